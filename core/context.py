"""The bounded context window sent to the model (SPEC §4, seed 002's episodic memory).

Invariants of `build_model_messages`' result: the system message comes first; after it
the roles strictly alternate user/assistant starting with user (providers such as
Perplexity reject two user messages in a row); the original request (the first user
message) and the latest user message are always present, whatever the budget; the
first assistant reply is kept with the original request as a fixed prefix; what is
left out is whole user+assistant pairs from the middle, announced by an omission note
at the start of the first recent user message. When what must be kept is still over
the budget (one huge message), the kept messages longer than a common share are cut to
their beginning and end around an excerpt note, never below `MIN_KEPT_CHARS`: the size
of a request is bounded whatever one message holds. Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.excerpt import excerpt
from core.models import Message, Role

SEPARATOR = "\n\n"
CHARS_PER_TOKEN = 4
MIN_KEPT_CHARS = 1000
"""A kept message is never cut below this, however small the budget: a message that
short is cheap, and cutting it further would lose its point."""


@dataclass(slots=True)
class _Turn:
    """Consecutive messages of one role merged into one chat message."""

    role: Role
    content: str
    sources: int  # how many stored messages it stands for


def build_model_messages(
    system_prompt: str,
    history: Sequence[Message],
    *,
    is_group: bool,
    budget_chars: int,
    omission_note: Callable[[int], str],
    excerpt_note: Callable[[int], str],
) -> list[dict[str, str]]:
    """OpenAI chat messages for `history`, fitted to `budget_chars` characters of content.

    Consecutive user messages are merged (blank line between); in groups each user
    message is prefixed with ``"{author}: "``. If everything fits nothing is dropped;
    otherwise the fewest middle pairs are dropped, the omission note (counting the
    stored messages left out) included in the size; if the rest is still too big, the
    longest kept messages are cut to a common size (`excerpt_note(characters left out)`
    between their beginning and end). Assistant messages before the first user message
    have no request to answer and are not sent.
    """
    turns = _merge(history, is_group=is_group)
    system = {"role": "system", "content": system_prompt}
    if not turns:
        return [system]

    start, omitted = _fit(turns, len(system_prompt), budget_chars, omission_note)
    kept = turns[:2] + turns[start:] if omitted else turns
    note = omission_note(omitted) + SEPARATOR if omitted else ""
    share = _common_share(
        [len(turn.content) for turn in kept], budget_chars - len(system_prompt) - len(note)
    )
    messages = [system]
    for index, turn in enumerate(kept):
        content = turn.content
        if share is not None and len(content) > share:
            content = excerpt(content, share, excerpt_note)
        if omitted and index == 2:
            content = note + content
        messages.append({"role": turn.role.value, "content": content})
    return messages


def approx_tokens(text: str) -> int:
    """A rough token count: one token per 4 characters, rounded up.

    Good enough to compare rounds in the benchmark (English averages about 4
    characters a token with OpenAI tokenizers, Cyrillic fewer); never use it to
    enforce a provider's limit.
    """
    return -(-len(text) // CHARS_PER_TOKEN)


def _merge(history: Sequence[Message], *, is_group: bool) -> list[_Turn]:
    """Fold the stored messages into alternating turns that start with a user turn."""
    turns: list[_Turn] = []
    for message in history:
        if not turns and message.role is not Role.USER:
            continue
        text = message.text
        if is_group and message.role is Role.USER and message.author:
            text = f"{message.author}: {text}"
        if turns and turns[-1].role is message.role:
            turns[-1].content += SEPARATOR + text
            turns[-1].sources += 1
        else:
            turns.append(_Turn(message.role, text, 1))
    return turns


def _fit(
    turns: list[_Turn],
    system_chars: int,
    budget_chars: int,
    omission_note: Callable[[int], str],
) -> tuple[int, int]:
    """Where the recent part starts and how many stored messages are omitted (0: none).

    Turns alternate user/assistant from index 0, so user turns sit at even indices.
    The prefix is turns[0:2]; the recent part starts at an even index `start` ≥ 2
    that is at most the index of the last user turn, which is therefore always kept.
    """
    sizes = [len(turn.content) for turn in turns]
    if system_chars + sum(sizes) <= budget_chars:
        return 2, 0
    last_user = len(turns) - 1 if turns[-1].role is Role.USER else len(turns) - 2
    if last_user <= 2:
        return 2, 0  # nothing between the prefix and the current turn

    prefix_chars = system_chars + sizes[0] + sizes[1]
    suffix = [0] * (len(turns) + 1)
    for i in range(len(turns) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + sizes[i]

    omitted = 0
    for start in range(4, last_user + 1, 2):
        omitted = sum(turn.sources for turn in turns[2:start])
        note = len(omission_note(omitted)) + len(SEPARATOR)
        if prefix_chars + note + suffix[start] <= budget_chars:
            return start, omitted
    return last_user, omitted


def _common_share(sizes: list[int], room: int) -> int | None:
    """The size every longer message is cut to so that all fit `room` (None: they fit).

    Messages shorter than their fair share keep their size and leave the rest to the
    others; the share is never below `MIN_KEPT_CHARS`.
    """
    if sum(sizes) <= room:
        return None
    left = room
    for count, size in enumerate(sorted(sizes)):
        share = left // (len(sizes) - count)
        if size > share:
            return max(share, MIN_KEPT_CHARS)
        left -= size
    return None  # unreachable: the sizes were over `room`
