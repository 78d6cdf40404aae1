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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
REPLY_PRIMING = 3


def estimate_tokens(text: str) -> int:
    """Tokens of `text` by the byte formula above (0 for empty text)."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN)


def estimate_prompt_tokens(messages: Iterable[Mapping[str, object]]) -> int:
    """Tokens of a chat prompt: each message's content plus its framing, plus the reply's."""
    total = REPLY_PRIMING
    for message in messages:
        content = message.get("content")
        total += MESSAGE_OVERHEAD + estimate_tokens(content if isinstance(content, str) else "")
    return total
