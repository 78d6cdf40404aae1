"""Replies stored but never delivered (Telegram failed every attempt), kept per conversation
so they are sent before that conversation's next turn.

The port is `UndeliveredReplies`. `MemoryUndelivered` keeps them in this process for a day
(a restart forgets them: the reply is still in the store and the history the model sees).
`StoredUndelivered` keeps them as JSON documents in a table every worker shares
(`storage.postgres.cluster.undelivered.PostgresUndelivered`), so whichever worker
runs the next turn, or a restarted one, sends them. A reply is taken (`pop`) by exactly
one turn; a worker that dies between taking and sending it loses that copy, which the
history still holds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Protocol

from core.domain.clarifying import ClarifyingRound
from core.domain.consultation import Usage
from core.domain.knowledge_sources import sources_from_json, sources_to_json
from core.domain.outcomes import Notice, Reply
from core.domain.tool_uses import uses_from_json, uses_to_json
from core.primitives.expiring import ExpiringDict

FORGET_AFTER = 24 * 3600.0
MAX_UNDELIVERED = 10_000
Conversation = tuple[int, int | None]  # chat id, forum topic id


class UndeliveredReplies(Protocol):
    async def put(self, chat_id: int, thread_id: int | None, reply: Reply, language: str) -> None:
        """Keep `reply` for the conversation (replacing one kept before)."""
        ...

    async def pop(self, chat_id: int, thread_id: int | None) -> tuple[Reply, str] | None:
        """Take the conversation's kept reply and its language, if any."""
        ...

    async def forget_chat(self, chat_id: int) -> int:
        """Drop the replies kept for every conversation of the chat (each forum topic);
        how many went."""
        ...


class MemoryUndelivered:
    """In this process, for a day, at most `max_size` conversations (the oldest go first)."""

    def __init__(
        self,
        *,
        max_size: int = MAX_UNDELIVERED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._items: ExpiringDict[Conversation, tuple[Reply, str]]
        self._items = ExpiringDict(FORGET_AFTER, max_size=max_size, clock=clock)

    async def put(self, chat_id: int, thread_id: int | None, reply: Reply, language: str) -> None:
        self._items[(chat_id, thread_id)] = (reply, language)

    async def pop(self, chat_id: int, thread_id: int | None) -> tuple[Reply, str] | None:
        return self._items.pop((chat_id, thread_id))

    async def forget_chat(self, chat_id: int) -> int:
        return self._items.discard_where(lambda conversation: conversation[0] == chat_id)

    def __len__(self) -> int:
        return len(self._items)


class DocumentRows(Protocol):
    """Where `StoredUndelivered` keeps its JSON documents (one per conversation)."""

    async def put(
        self, chat_id: int, thread_id: int | None, document: str, language: str
    ) -> None: ...

    async def pop(self, chat_id: int, thread_id: int | None) -> tuple[str, str] | None: ...

    async def forget_chat(self, chat_id: int) -> int: ...


class StoredUndelivered:
    """`UndeliveredReplies` as JSON documents in shared rows."""

    def __init__(self, rows: DocumentRows) -> None:
        self._rows = rows

    async def put(self, chat_id: int, thread_id: int | None, reply: Reply, language: str) -> None:
        await self._rows.put(chat_id, thread_id, json.dumps(reply_to_dict(reply)), language)

    async def pop(self, chat_id: int, thread_id: int | None) -> tuple[Reply, str] | None:
        found = await self._rows.pop(chat_id, thread_id)
        if found is None:
            return None
        document, language = found
        return reply_from_dict(json.loads(document)), language

    async def forget_chat(self, chat_id: int) -> int:
        return await self._rows.forget_chat(chat_id)


def reply_to_dict(reply: Reply) -> dict[str, Any]:
    """A JSON-ready dict of the reply; `reply_from_dict` gives back an equal `Reply`.

    `extras` (the provider's raw fields, where the sources come from) is JSON already; a
    structured round is kept in its stored form, so a reply sent later has its buttons,
    and so are the knowledge-base sources it cites and the tools it used, so it lists them.
    """
    usage = reply.usage
    return {
        "text": reply.text,
        "consultation_id": reply.consultation_id,
        "round": reply.round,
        "max_rounds": reply.max_rounds,
        "is_final": reply.is_final,
        "is_complete": reply.is_complete,
        "model": reply.model,
        "usage": [usage.prompt_tokens, usage.completion_tokens, usage.estimated],
        "notices": sorted(notice.value for notice in reply.notices),
        "extras": reply.extras,
        "json_valid": reply.json_valid,
        "schema_valid": reply.schema_valid,
        "questions": None if reply.questions is None else reply.questions.to_json(),
        "model_ready": reply.model_ready,
        "follow_up": reply.follow_up,
        "follow_ups_left": reply.follow_ups_left,
        "knowledge_sources": sources_to_json(reply.knowledge_sources),
        "tool_uses": uses_to_json(reply.tool_uses),
    }


def reply_from_dict(data: dict[str, Any]) -> Reply:
    """The `Reply` of `reply_to_dict`; notices this version does not know are dropped."""
    prompt, completion, estimated = data.get("usage") or (0, 0, False)
    known = {notice.value for notice in Notice}
    return Reply(
        text=data["text"],
        consultation_id=data["consultation_id"],
        round=int(data["round"]),
        max_rounds=int(data["max_rounds"]),
        is_final=bool(data["is_final"]),
        is_complete=bool(data["is_complete"]),
        model=data.get("model", ""),
        usage=Usage(int(prompt), int(completion), bool(estimated)),
        notices=frozenset(Notice(n) for n in data.get("notices", ()) if n in known),
        extras=dict(data.get("extras") or {}),
        json_valid=data.get("json_valid"),
        schema_valid=data.get("schema_valid"),
        questions=ClarifyingRound.from_json(data.get("questions")),
        model_ready=bool(data.get("model_ready")),
        follow_up=int(data.get("follow_up") or 0),
        follow_ups_left=_count(data.get("follow_ups_left")),
        knowledge_sources=sources_from_json(data.get("knowledge_sources")),
        tool_uses=uses_from_json(data.get("tool_uses")),
    )


def _count(value: Any) -> int | None:
    """A kept count; None when the reply did not say (or was kept by a version before)."""
    return None if value is None else int(value)
