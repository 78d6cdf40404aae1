"""`GET /v1/models`, `GET /v1/models/{model_id}` and `POST /v1/chat/completions`: the
consultation as a model any chat app that speaks the OpenAI API can pick.

Invariants:
- every refusal that can be known before the model is called (the body, the model id, the
  history, a blocked user, a quota) is a plain JSON error in the OpenAI shape with its own
  status, on a streaming request too: the stream opens only once the reply's first text is
  there (or the reply is done);
- the conversation is rebuilt from the request alone (`core.domain.client_history`) and
  answered by `core.turns.client_chats`, keyed by the API client, `user` and the
  conversation's first message, under the scope of the bot `metadata.bot` names
  (`api.bots`; by default the deployment's own), on that bot's engine;
- a reply runs in a task of its own, so a client that hangs up never aborts it: it is
  stored like any other and the next request with the same history finds it; the
  request's share of the body budget is given back when that task ends;
- a streamed reply (`api.openai_compat.streaming`) has exactly the content of a plain one:
  text streams as it comes only for a reply sure to be final; a round is sent whole.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import Collection
from dataclasses import replace

from aiohttp import web

from api.attachments import read_attachments
from api.body_budget import BodyBudget, Reservation, server_busy
from api.bots import BotEngines, OwnBotOnly, ServedBot, served
from api.chat import CLIENT_KEY
from api.config import ApiConfig
from api.errors import json_response
from api.limits import Limits, read_body, refuse_declared_over
from api.memory import api_scope
from api.openai_compat.errors import OpenAIError, failure, invalid, model_not_found
from api.openai_compat.models import choose, model_ids, model_object
from api.openai_compat.requests import CompletionAsk, parse_completion
from api.openai_compat.shapes import completion
from api.openai_compat.streaming import ChunkIds, LiveText, reply_of, stream_reply
from core.domain.api_keys import client_key, key_range, person_key
from core.domain.attachments import Image, MessageInput
from core.domain.client_history import HistoryInvalid, Next, Rebuilt, rebuild
from core.domain.errors import ConsultationError
from core.domain.outcomes import Reply
from core.domain.quotas import Stage
from core.domain.usage import Payer
from core.primitives.intake_gate import IntakeGate
from core.turns.client_chats import ClientTurn
from core.turns.engine import Engine
from media.intake import Intake
from telemetry.metrics import Metrics

log = logging.getLogger(__name__)

CHAT_KEY_WORD = "oai-"
"""A chat app's conversations are API sessions (`api:oai-…`, `api<n>:oai-…` for bot n):
the console, stats and exports see them."""
DRAIN_SECONDS = 30.0


def conversation_key(client: str, user: str | None, first_message: str, bot: int = 0) -> str:
    """The chat key of a conversation: its API client, `user` and first user message, in
    the scope of bot `bot` (`core.domain.api_keys`; the client as the gate names it)."""
    digest = hashlib.sha256()
    for part in (client, user or "", first_message):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    return key_range(bot) + CHAT_KEY_WORD + digest.hexdigest()[:32]


class OpenAIEndpoints:
    """The `/v1/` routes over the engine."""

    def __init__(
        self,
        engine: Engine,
        metrics: Metrics,
        config: ApiConfig,
        *,
        budget: BodyBudget,
        intake: Intake | None = None,
        bots: BotEngines | None = None,
        turn_intake: IntakeGate | None = None,
    ) -> None:
        """`budget` is the chat endpoints' budget of body bytes in flight, shared; `engine`
        the deployment's own bot's, `bots` the stored bots' too (None: its own alone); each
        reply runs through `turn_intake`, the process's intake gate (None: none)."""
        self._gate = turn_intake or IntakeGate(0)
        self._engine = engine
        self._bots: BotEngines = bots if bots is not None else OwnBotOnly(engine)
        self._metrics = metrics
        self._limits = Limits.of(config, intake)
        self._intake = intake
        self._budget = budget
        self._created = int(time.time())
        self._tasks: set[asyncio.Task[Reply]] = set()
        self._memory_tasks: set[asyncio.Task[None]] = set()

    def _roles(self) -> Collection[str]:
        return self._engine.settings.roles().keys()

    async def models(self, request: web.Request) -> web.Response:
        """List `consultation` and one `consultation-<role>` per persona."""
        data = [model_object(model, self._created) for model in model_ids(self._roles())]
        return json_response({"object": "list", "data": data})

    async def model(self, request: web.Request) -> web.Response:
        """One model by its id (a round count suffix included); 404 for another id."""
        model = request.match_info["model_id"]
        if choose(model, self._roles(), self._limits.max_rounds) is None:
            raise model_not_found(model)
        return json_response(model_object(model, self._created))

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """Answer the conversation's last user message: a round, the final answer or a
        follow-up's answer, whole or streamed."""
        ask, held = await self._ask(request)
        try:
            turn, bot = await self._turn(request, ask, held)
        except BaseException:
            held.release()
            raise
        ids = ChunkIds("chatcmpl-" + uuid.uuid4().hex, ask.model, int(time.time()))
        if not ask.stream:
            reply = await reply_of(self._start(bot, turn, held))
            body = completion(
                reply, completion_id=ids.completion_id, model=ask.model, created=ids.created
            )
            return json_response(body)
        rebuilt = turn.rebuilt
        # Text streams as it comes only for a reply sure to be final: a round is sent whole.
        final = rebuilt.next is not Next.ROUND or rebuilt.rounds_done + 1 >= rebuilt.max_rounds
        live = LiveText()
        task = self._start(bot, replace(turn, on_text=live.on_text if final else None), held)
        return await stream_reply(request, task, live, ids, include_usage=ask.include_usage)

    async def _turn(
        self, request: web.Request, ask: CompletionAsk, held: Reservation
    ) -> tuple[ClientTurn, ServedBot]:
        """The turn the request asks for and the bot it runs on: its model, the
        conversation rebuilt, who pays, and the last message's files read (their photos'
        share of the budget kept in `held`)."""
        choice = choose(ask.model, self._roles(), self._limits.max_rounds)
        if choice is None:
            raise model_not_found(ask.model)
        bot = await served(self._bots, request, ask.bot)
        engine = bot.engine
        config = engine.config
        rounds = ask.rounds or choice.rounds or config.default_max_rounds
        role = choice.role or config.default_role
        try:
            rebuilt = rebuild(
                ask.messages,
                max_rounds=rounds,
                followup_limit=config.followup_limit,
                seed=f"{role}\x00{rounds}",
            )
        except HistoryInvalid as exc:
            raise invalid(str(exc), exc.param) from None
        asker = request.get(CLIENT_KEY) or f"addr:{request.remote}"
        client = client_key(asker, bot.scope)
        person = None if ask.user is None else person_key(ask.user, bot.scope)
        if person is not None and await engine.blocks.blocked(person):
            raise OpenAIError(403, "this user is blocked by the operator", kind="permission_error")
        payer = Payer(person=person, client=client)
        first = next(m.text for m in ask.messages if m.role == "user")
        chat_key = conversation_key(asker, ask.user, first, bot.scope)
        images: tuple[Image, ...] = ()
        if ask.files and rebuilt.next is not Next.FINAL_NOW:
            rebuilt, read = await self._with_files(engine, rebuilt, ask, payer, person or client)
            images = read.images
            held.shrink_to(sum(len(image.data) for image in images))
            if read.transcription is not None:
                await engine.figures.charge_transcription(chat_key, read.transcription, payer=payer)
        memory = None if ask.user is None else api_scope(ask.user, bot.scope)
        turn = ClientTurn(chat_key, rebuilt, role, payer=payer, memory=memory, images=images)
        return turn, bot

    async def _with_files(
        self, engine: Engine, rebuilt: Rebuilt, ask: CompletionAsk, payer: Payer, owner: str
    ) -> tuple[Rebuilt, MessageInput]:
        """The last user turn read with its files (documents' text, the transcript, photos),
        as the JSON API reads attachments; a payer a quota refuses pays for no reading."""
        follow_up = rebuilt.next is Next.FOLLOW_UP
        if follow_up:
            stage = Stage.FOLLOW_UP
        else:
            stage = Stage.START if rebuilt.rounds_done == 0 else Stage.CONTINUE
        try:
            await engine.quotas.require(payer, stage)
            files = await read_attachments(ask.files, self._intake)
            assert self._intake is not None  # files are decoded only with an intake
            typed = rebuilt.message if follow_up else rebuilt.text
            read = await self._intake.read(typed, files, owner=owner)
        except ConsultationError as exc:
            raise failure(exc) from None
        stored = read.stored_text
        return replace(rebuilt, text=stored, message=stored if follow_up else rebuilt.message), read

    async def drain(self, app: web.Application | None = None) -> None:
        """Let replies still being written finish (and be stored) before shutting down."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=DRAIN_SECONDS)
        if self._memory_tasks:
            await asyncio.wait(set(self._memory_tasks), timeout=DRAIN_SECONDS)

    async def _ask(self, request: web.Request) -> tuple[CompletionAsk, Reservation]:
        """The request's body read within the limits and the body budget, and checked; its
        share of the budget, held while its files are (the caller releases it)."""
        refuse_declared_over(request, self._limits.max_body_bytes)
        held = self._budget.reserve(request.content_length)
        if held is None:
            raise server_busy()
        try:
            raw = await read_body(request, self._limits.max_body_bytes, held)
            ask = parse_completion(
                raw,
                max_input_chars=self._limits.max_input_chars,
                max_rounds=self._limits.max_rounds,
            )
        except BaseException:
            held.release()
            raise
        if not ask.files:
            held.release()
        return ask, held

    def _start(self, bot: ServedBot, turn: ClientTurn, held: Reservation) -> asyncio.Task[Reply]:
        """The reply in a task of its own (see the module), which gives `held` back when
        it ends."""
        engine = bot.engine
        task = asyncio.create_task(self._gate.through(engine.client_chats.answer(turn)))
        self._tasks.add(task)

        def done(finished: asyncio.Task[Reply]) -> None:
            self._tasks.discard(finished)
            held.release()
            if not finished.cancelled() and finished.exception() is None:
                reply = finished.result()
                self._metrics.record_reply(reply, source="api", bot=bot.scope)
                if reply.completed_now:
                    self._remember(engine, reply.consultation_id)

        task.add_done_callback(done)
        return task

    def _remember(self, engine: Engine, consultation_id: str) -> None:
        """Keep a completed consultation's facts (client memory, with a `user`) in a task
        of its own, as `/api/chat` does; its failure is logged, the reply stands."""
        if not engine.memories.enabled:
            return

        async def remember() -> None:
            try:
                await engine.memories.remember(consultation_id)
            except Exception as exc:
                log.warning("consultation %s not remembered: %s", consultation_id, exc)

        task = asyncio.create_task(remember())
        self._memory_tasks.add(task)
        task.add_done_callback(self._memory_tasks.discard)
