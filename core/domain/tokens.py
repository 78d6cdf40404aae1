"""Token counts estimated from text, for providers whose streams report no usage.

llama.cpp's server ignores `stream_options.include_usage`; without an estimate its
calls would count 0 tokens. tiktoken cannot be used: it downloads its encodings at
run time, and a model's own tokenizer is not known here anyway. So:

    tokens(text)       = ceil(UTF-8 bytes / 4)
    tokens(messages)   = Σ (tokens(content) + 4) + 3

Why bytes, not characters: the tokenizers of OpenAI, Llama, Qwen and Mistral models are
byte-level BPEs, and a token averages about 4 bytes of English text (OpenAI's "1 token ≈
4 characters"). Cyrillic, Greek or Arabic letters take 2 bytes each and CJK characters
3, and these scripts also get fewer characters per token (about 2 for Russian, about 1
for Chinese), so bytes / 4 follows them where characters / 4 would count Russian at
half its real cost. The 4 tokens per message and 3 for the reply are OpenAI's documented
chat framing (`<|start|>role … <|end|>`). Expect ±25% against the real tokenizer: good
enough for cost dashboards, which is all these figures are for; they are marked
`Usage.estimated` wherever they are kept or shown.

A message whose content is a list of parts (text and images, for a model that sees
images) counts its text parts by the same formula and each image as `IMAGE_TOKENS`:
what an image costs depends on the provider and the image's size (OpenAI bills a
512-pixel tile at 170 tokens plus 85, so a typical photo at high detail runs to about
800), and no one number is right for all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
REPLY_PRIMING = 3
IMAGE_TOKENS = 800


def estimate_tokens(text: str) -> int:
    """Tokens of `text` by the byte formula above (0 for empty text)."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN)


def estimate_prompt_tokens(messages: Iterable[Mapping[str, object]]) -> int:
    """Tokens of a chat prompt: each message's content plus its framing, plus the reply's."""
    total = REPLY_PRIMING
    for message in messages:
        total += MESSAGE_OVERHEAD + content_tokens(message.get("content"))
    return total


def content_tokens(content: object) -> int:
    """Tokens of one message's content: a string, or a list of OpenAI content parts."""
    if isinstance(content, str):
        return estimate_tokens(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            total += estimate_tokens(part["text"])
        elif kind == "image_url":
            total += IMAGE_TOKENS
    return total
