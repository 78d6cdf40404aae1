"""Helpers for group-chat tests: members' messages, mentions, and waiting for answers.

A finished answer is recognised by its footer ("Round k of N" / "Final answer"): whether it
arrived as a new message or as the final edit of a progress message, exactly one successful
call carries it.
"""

from __future__ import annotations

from typing import Any

from tests.bot_harness import RunningBot
from tests.fakes.bot_api import Call

GROUP = -1001234
ALICE, BOB, CAROL = 11, 12, 13
FOOTERS = ("Round ", "Final answer")
NOT_ADMIN = "Only group admins"


def mention(text: str, name: str = "@consult_bot") -> list[dict[str, Any]]:
    """The `mention` entity Telegram attaches to `name` inside `text` (ASCII texts only)."""
    return [{"type": "mention", "offset": text.index(name), "length": len(name)}]


def in_chat(call: Call, chat_id: int) -> bool:
    return call.status == 200 and call.params.get("chat_id") == chat_id


async def say(
    bot: RunningBot,
    text: str,
    *,
    user: int = ALICE,
    name: str = "Alice",
    chat: int = GROUP,
    addressed: str | None = "@consult_bot",
    **kwargs: Any,
) -> dict[str, Any]:
    """A member's message in a group; mentioning the bot unless `addressed` is None."""
    kwargs.setdefault("chat_type", "supergroup")
    entities = mention(text, addressed) if addressed and addressed in text else None
    return await bot.send(chat, text, user_id=user, first_name=name, entities=entities, **kwargs)


async def answers(bot: RunningBot, count: int, chat: int = GROUP, timeout: float = 10) -> Call:  # noqa: ASYNC109
    """Wait for the `count`-th finished answer in the chat (a send or edit carrying a footer)."""
    return await bot.api.wait_for(
        lambda c: (
            c.method in ("sendMessage", "editMessageText")
            and in_chat(c, chat)
            and any(f in c.params["text"] for f in FOOTERS)
        ),
        timeout,
        count=count,
    )


async def said(bot: RunningBot, fragment: str, count: int = 1, chat: int = GROUP) -> Call:
    """Wait for the `count`-th sendMessage to the chat containing `fragment`."""
    return await bot.api.wait_for(
        lambda c: c.method == "sendMessage" and in_chat(c, chat) and fragment in c.params["text"],
        count=count,
    )


def bot_texts(bot: RunningBot, chat: int = GROUP) -> list[str]:
    return [c.params["text"] for c in bot.api.calls_of("sendMessage") if in_chat(c, chat)]
