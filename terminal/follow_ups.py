"""Follow-up questions at the terminal: `/followup TEXT`, and a line starting with `>`
typed right after a final answer (the terminal has no Telegram reply to point at one).

Invariants: a follow-up always asks about the terminal's newest consultation
(`ConsultationService.follow_up` without an id); one it cannot take gets one line naming
the reason and the setting behind it, and nothing is stored; a `>` line is a follow-up
only while the last reply printed was a final answer (or a follow-up's), so a quoted line
in the middle of a consultation stays an ordinary message.
"""

from __future__ import annotations

from core.domain.errors import FollowUpReason, FollowUpUnavailable
from core.turns.engine import Engine
from terminal.replies import StreamPrinter

QUOTE = ">"
USAGE = "[usage: /followup TEXT asks about the last final answer]"

REFUSALS = {
    FollowUpReason.NOT_FOUND: "there is no finished consultation to ask about: type your "
    "question to start one",
    FollowUpReason.NOT_COMPLETE: "the consultation has no final answer yet: just type your message",
    FollowUpReason.EXPIRED: "the consultation ended longer ago than SESSION_TTL_SECONDS: type "
    "a new question to start another one",
    FollowUpReason.LIMIT_REACHED: "the consultation has taken all its follow-ups "
    "(FOLLOWUP_LIMIT): type a new question to start another one",
    FollowUpReason.DISABLED: "follow-ups are turned off (FOLLOWUP_LIMIT=0)",
}


def quoted_follow_up(text: str, *, after_final: bool) -> str | None:
    """The question of a `>` line typed right after a final answer; None for any other."""
    if not after_final or not text.startswith(QUOTE):
        return None
    return text[len(QUOTE) :].strip()


async def ask_follow_up(engine: Engine, key: str, text: str, printer: StreamPrinter) -> None:
    """Ask `text` about the newest consultation and print the answer, or why not."""
    if not text.strip():
        print(USAGE)
        return
    try:
        reply = await engine.turns.follow_up(
            key, text, on_text=printer.feed, on_tool=printer.tool_started
        )
    except FollowUpUnavailable as exc:
        print(f"[{REFUSALS[exc.reason]}; nothing was sent]")
        return
    printer.done(reply)
