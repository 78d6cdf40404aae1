"""What a chat app is sent: a reply as Markdown, in the OpenAI completion and chunk shapes.

Invariants:
- a clarifying round is `core.domain.round_markdown.round_markdown` (the preamble, the
  numbered questions, each option a `1a) …` list item, the line on answering by labels);
  a final answer or a follow-up's is the model's Markdown as written, then its sources
  (the provider's, linked; the knowledge base's passages) and one closing line, and never
  ends like a round, so the next request tells them apart;
- the chunks of a streamed reply append to exactly the content of the same reply sent
  whole: the role in the first delta, the text in the next ones, `finish_reason` in the
  last choice chunk, then the usage chunk when asked (`stream_options.include_usage`).
"""

from __future__ import annotations

import re
from typing import Any

from core.domain.outcomes import Reply
from core.domain.round_markdown import round_markdown

_LINK_TEXT = re.compile(r"([\[\]\\`*_])")


def content_of(reply: Reply) -> str:
    """The reply's text as the chat app shows it (see the module)."""
    if not reply.is_final:
        return round_markdown(reply.text, reply.questions)
    parts = [reply.text.rstrip()]
    if reply.sources:
        lines = [
            f"{source.index}. [{_escaped(source.title or source.url)}](<{source.url}>)"
            if source.is_web_link
            else f"{source.index}. {_escaped(source.title or source.url)}"
            for source in reply.sources
        ]
        parts.append("**Sources**\n\n" + "\n".join(lines))
    if reply.knowledge_sources:
        lines = []
        for passage in reply.knowledge_sources:
            where = passage.title + (f" › {passage.section}" if passage.section else "")
            if passage.page is not None:
                where += f", page {passage.page}"
            lines.append(f"- [{passage.ref}] {_escaped(where)}")
        parts.append("**From the knowledge base**\n\n" + "\n".join(lines))
    if reply.quota is not None:
        parts.append("_A usage limit was reached, so this is the final answer._")
    parts.append(_closing(reply))
    return "\n\n".join(parts)


def _closing(reply: Reply) -> str:
    left = reply.follow_ups_left
    if left:
        questions = "question" if left == 1 else "questions"
        return f"_You may ask {left} follow-up {questions}; then a new consultation starts._"
    return "_Your next message starts a new consultation._"


def _escaped(text: str) -> str:
    """A title as literal text in Markdown."""
    return _LINK_TEXT.sub(r"\\\1", " ".join(text.split()))


def finish_reason(reply: Reply) -> str:
    return "length" if reply.truncated else "stop"


def usage_of(reply: Reply) -> dict[str, int]:
    usage = reply.usage
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def consultation_of(reply: Reply) -> dict[str, Any]:
    """Where the consultation stands after the reply (a field the OpenAI shape lacks; the
    `openai` package keeps it as an extra field)."""
    return {
        "id": reply.consultation_id,
        "round": reply.round,
        "max_rounds": reply.max_rounds,
        "final": reply.is_final,
        "follow_up": reply.follow_up,
        "follow_ups_left": reply.follow_ups_left,
    }


def completion(reply: Reply, *, completion_id: str, model: str, created: int) -> dict[str, Any]:
    """The whole reply as a `chat.completion`."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content_of(reply), "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason(reply),
            }
        ],
        "usage": usage_of(reply),
        "consultation": consultation_of(reply),
    }


def chunk(
    *,
    completion_id: str,
    model: str,
    created: int,
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    consultation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk`: a choice with `delta` (and `finish`), or, with
    `usage`, the usage chunk (no choices)."""
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    if consultation is not None:
        body["consultation"] = consultation
    return body
