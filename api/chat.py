"""`POST /api/chat`, `POST /api/chat/stream` and `GET /api/sessions/{id}`.

Invariants:
- both chat endpoints run the same steps and return the same object (the stream's
  `done` event is exactly `/api/chat`'s body);
- every refusal that can be known before the model is called (validation, limits,
  unknown or finished session, a reused idempotency key) is a plain JSON error with
  its own status, even on the streaming endpoint: a session is vetted and answered
  under one per-session lock, and the stream opens only once the vetting passed;
- a stream's first event names its session, so a client that loses the connection
  can read the session back or retry;
- a failure while the round runs — of any kind — never consumes the round, and its
  error names the session to retry (a brand-new session included);
- a round runs in a task of its own, so a client that hangs up never aborts it
  (see `api.round_tasks`);
- with `Idempotency-Key` a request is answered at most once, by whichever worker
  claimed the key first (see `api.idempotency`, `api.key_claims` and `api.responses`);
- a body of 64 KB or more is read only within the process's budget of body bytes in
  flight, reserved before it is read and given back once its files are read (see
  `api.body_budget`): past it the request is SERVER_BUSY, its body unread;
- attached files are checked (kind, size, base64) before the stream opens and read
  (documents' text, a voice note's transcript, photos) before a session is opened or a
  message stored, so a refused file leaves nothing behind and uses no round; the message
  is then stored as its text (`MessageInput.stored_text`), photos going to the model only
  in this round.

`answers` answer the questions of the session's last reply: they are checked against
that round while the session is vetted (a question or option it does not have is
ANSWER_INVALID, a reply that asked none ANSWER_STALE), before anything is changed or
stored, and the stored user message is their question–answer lines, then the message.

`followUp` asks about a complete session (`ConsultationService.follow_up`): vetted like a
round (complete, within its TTL, under FOLLOWUP_LIMIT, else FOLLOW_UP_UNAVAILABLE before
the stream opens), answered directly and stored in the session; without it a complete
session stays DIALOG_COMPLETED.

`maxRounds` on a continuing request: omitted or equal to the session's limit changes
nothing; a different value is applied like Telegram's /rounds (validated the same
way; a limit at or below the rounds already used makes this reply the final one).

This module runs the steps; `api.limits` holds what a request may ask for,
`api.round_tasks` a round in flight (its outcome and streamed text) and `api.responses`
the response body and the replay of a reply given before.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, replace

from aiohttp import web

from api.attachments import read_attachments
from api.body_budget import BodyBudget, Reservation, server_busy
from api.bots import BotEngines, OwnBotOnly, ServedBot, parse_bot, query_bot, served
from api.config import ApiConfig
from api.errors import (
    ApiError,
    attachment_refused,
    from_engine,
    json_response,
    model_error,
    store_unavailable,
)
from api.idempotency import HEADER, KeyStore, fingerprint, key_reused, parse_key
from api.key_claims import Hold, claim
from api.limits import Limits, read_body, refuse_declared_over
from api.memory import api_scope
from api.responses import replay_answered, replayed_headers, response
from api.round_tasks import Flight, Message, Relay, RoundTask, shielded
from api.schemas import ChatRequest, SessionView, parse_chat_request
from api.sse import EventStream
from core.domain.api_keys import client_key, person_key
from core.domain.attachments import Attachment
from core.domain.errors import (
    AttachmentRefused,
    ConsultationError,
    FollowUpUnavailable,
    ModelError,
    StoreUnavailable,
    TurnCancelled,
    TurnDidNotHappen,
    TurnSuperseded,
)
from core.domain.ports import ChatLocks
from core.domain.quotas import Stage
from core.domain.usage import Payer
from core.primitives.intake_gate import IntakeGate
from core.primitives.keyed_lock import KeyedLock
from core.turns.engine import Engine
from core.turns.follow_ups import unavailable_reason
from core.turns.round_answers import user_message_text
from media.intake import Intake
from telemetry.metrics import Metrics

log = logging.getLogger(__name__)

DRAIN_SECONDS = 30.0
SESSION_LOCK_PREFIX = "session:"
CLIENT_KEY = web.RequestKey("client", str)
"""Who the request counts for (set by the gate in `api.app`): scopes idempotency keys."""


@dataclass(slots=True)
class Asked:
    """A validated request and its files, decoded but not yet read, with the share of the
    body budget they hold. `body` keeps no base64 (the files are decoded); `files` is
    emptied once they are read."""

    body: ChatRequest
    files: tuple[Attachment, ...]
    held: Reservation
    bot: ServedBot
    client: str  # who asked (`_client`), under the bot's scope (`client_key`)
    fingerprint: str | None = None

    def person(self) -> str | None:
        """The request's `userId` as a person key of its bot, None without one."""
        user_id = self.body.user_id
        return None if user_id is None else person_key(user_id, self.bot.scope)


class ChatEndpoints:
    """The chat routes over the engine of the bot each request names (`api.bots`)."""

    def __init__(
        self,
        engine: Engine,
        metrics: Metrics,
        config: ApiConfig,
        *,
        keys: KeyStore | None = None,
        keepalive_seconds: float = 15.0,
        locks: ChatLocks | None = None,
        intake: Intake | None = None,
        bots: BotEngines | None = None,
        turn_intake: IntakeGate | None = None,
    ) -> None:
        """`engine` is the deployment's own bot's; `bots` serves the stored bots too
        (None: the deployment's own bot alone); each round runs through `turn_intake`, the
        process's intake gate (None: none)."""
        self._gate = turn_intake or IntakeGate(0)
        self._bots: BotEngines = bots if bots is not None else OwnBotOnly(engine)
        self._metrics = metrics
        self._intake = intake  # None: requests with attachments are refused
        self._limits = Limits.of(config, intake)
        # Never below one largest body: a file at its limit is always admissible.
        self._budget = BodyBudget(max(config.body_bytes_in_flight, self._limits.max_body_bytes))
        self._keys = keys
        self._keepalive = keepalive_seconds
        # Vetting and answering a session are one step, in every worker sharing `locks`
        # (this process only by default). Keys are "session:<id>", apart from chat keys.
        self._sessions: ChatLocks = KeyedLock() if locks is None else locks
        self._flights: dict[Flight, RoundTask] = {}  # keyed requests being answered
        self._tasks: set[asyncio.Task[None]] = set()

    async def chat(self, request: web.Request) -> web.Response:
        """Answer one round and return it as JSON."""
        round_task, joined = await self._begin(request, relay=None)
        await shielded(round_task.session)
        body = await shielded(round_task.result)
        return json_response(body, headers=replayed_headers(round_task, joined))

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """Answer one round as Server-Sent Events: `session`, `delta`…, then `done` or `error`."""
        relay = Relay()
        round_task, joined = await self._begin(request, relay=relay)
        session_id = await shielded(round_task.session)  # a refusal is still a plain JSON error
        headers = replayed_headers(round_task, joined)
        events = EventStream(request, keepalive=self._keepalive, headers=headers)
        await events.open()
        try:
            await events.send("session", {"sessionId": session_id})
            if round_task.relay is relay:  # this request runs the round: stream its text
                await relay.attach(events)
            try:
                body = await shielded(round_task.result)
            except ApiError as exc:
                await events.send("error", {**exc.body(), "status": exc.status})
            else:
                await events.send("done", body)
        finally:
            await events.close()
        return events.response

    async def session(self, request: web.Request) -> web.Response:
        """Read a session back: status, round, limit and messages."""
        bot = await served(self._bots, request, query_bot(request))
        try:
            session_id = str(uuid.UUID(request.match_info["session_id"]))
            consultation = await bot.engine.sessions.get_session(session_id)
        except (ValueError, ConsultationError):
            raise ApiError("SESSION_NOT_FOUND", "session not found") from None
        view = SessionView.from_consultation(consultation)
        return json_response(view.model_dump(mode="json", by_alias=True))

    def _remember(self, engine: Engine, consultation_id: str) -> None:
        """Keep a completed session's facts (client memory) in a task of its own, so the
        response never waits for it; `drain` waits for it on shutdown. Its failure is
        logged: the client's reply does not depend on it."""
        if not engine.memories.enabled:
            return

        async def remember() -> None:
            try:
                await engine.memories.remember(consultation_id)
            except Exception as exc:
                log.warning("session %s not remembered: %s", consultation_id, exc)

        task = asyncio.create_task(remember())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def budget(self) -> BodyBudget:
        """The budget of body bytes in flight, which the OpenAI-compatible endpoint shares."""
        return self._budget

    async def drain(self, app: web.Application | None = None) -> None:
        """Let rounds still being answered finish (and be stored) before shutting down."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=DRAIN_SECONDS)

    # -- steps -----------------------------------------------------------------------------

    async def _begin(self, request: web.Request, *, relay: Relay | None) -> tuple[RoundTask, bool]:
        """Validate the request; join the running round task of its idempotency key (True),
        or start a round task of its own (False)."""
        key = parse_key(request.headers.get(HEADER))
        refuse_declared_over(request, self._limits.max_body_bytes)  # too large, not busy
        held = self._budget.reserve(request.content_length)
        if held is None:  # refused before a byte of the body is read
            raise server_busy()
        started = False  # from then on the round task releases the reservation
        try:
            asked = await self._parse(request, held, keyed=key is not None)
            if key is None:
                round_task = RoundTask(None, relay)
                self._start(round_task, asked, None)
                started = True
                return round_task, False
            if self._keys is None:
                raise ApiError("VALIDATION_ERROR", f"{HEADER}: not supported by this deployment")
            flight = (asked.client, key)
            running = self._flights.get(flight)
            if running is not None:
                if running.fingerprint != asked.fingerprint:
                    raise key_reused()
                return running, True
            round_task = RoundTask(asked.fingerprint, relay)
            self._flights[flight] = round_task
            self._start(round_task, asked, flight)
            started = True
            return round_task, False
        finally:
            if not started:
                held.release()

    async def _parse(self, request: web.Request, held: Reservation, *, keyed: bool) -> Asked:
        """Read, validate and decode the request; the files' base64 is dropped once decoded."""
        body = parse_chat_request(await read_body(request, self._limits.max_body_bytes, held))
        bot = await served(self._bots, request, parse_bot(body.bot))
        limits = self._limits
        if bot.scope:  # a stored bot's sessions choose among its own models
            limits = replace(limits, models=frozenset(bot.engine.config.allowed_models))
        limits.check(body)
        if body.user_id is not None and await bot.engine.blocks.blocked(
            person_key(body.user_id, bot.scope)
        ):
            raise ApiError("FORBIDDEN", "this user is blocked by the operator")
        try:
            files = await read_attachments(body.attachments, self._intake)
        except AttachmentRefused as exc:
            raise attachment_refused(exc) from None
        wanted = fingerprint(body) if keyed else None
        body = body.model_copy(update={"attachments": []})
        client = client_key(_client(request), bot.scope)
        return Asked(body, tuple(files), held, bot, client, wanted)

    def _start(self, round_task: RoundTask, asked: Asked, flight: Flight | None) -> None:
        task = asyncio.create_task(self._gate.through(self._run(round_task, asked, flight)))
        self._tasks.add(task)

        def forget(done: asyncio.Task[None]) -> None:
            self._tasks.discard(done)
            if flight is not None and self._flights.get(flight) is round_task:
                del self._flights[flight]

        task.add_done_callback(forget)

    async def _run(self, round_task: RoundTask, asked: Asked, flight: Flight | None) -> None:
        """The whole round task: claim its key, read its files, find or open the session, vet it,
        answer it, store the reply."""
        body = asked.body
        engine = asked.bot.engine
        hold: Hold | None = None
        error: ApiError | None = None
        try:
            if flight is not None:
                assert self._keys is not None
                hold = await claim(self._keys, flight, round_task)
                if hold is None:  # answered before: replayed
                    return
            stored = hold.session_id if hold is not None else None
            payer = Payer(person=asked.person(), client=asked.client)
            if asked.files and stored is None and (body.follow_up or body.session_id is None):
                # Before the files are read (a transcription, a document): a refused payer
                # costs nothing. A round of a session under way is never refused.
                stage = Stage.FOLLOW_UP if body.follow_up else Stage.START
                await engine.quotas.require(payer, stage)
            message = await self._read(asked)
            # Only the photos the model is still to see stay referenced.
            asked.held.shrink_to(sum(len(image.data) for image in message.images))
            if stored is not None:  # an earlier attempt with this key was not answered
                session_id, new = stored, False
            elif body.session_id is None:
                session_id, new = await self._open(asked, message.text, hold, payer), True
            else:
                session_id, new = body.session_id, False
            async with self._sessions.hold(SESSION_LOCK_PREFIX + session_id):
                if (
                    hold is not None
                    and stored is not None
                    and await replay_answered(
                        engine.sessions, hold, round_task, session_id, message
                    )
                ):
                    return
                if not new:
                    await self._vet(engine, session_id, body, message, payer)
                if hold is not None and stored is None:
                    await hold.attach(session_id)
                round_task.session.set_result(session_id)
                if message.read is not None and message.read.transcription is not None:
                    await engine.figures.charge_transcription(
                        engine.sessions.key(session_id), message.read.transcription, payer=payer
                    )
                await self._answer(
                    engine, round_task, session_id, message, hold, payer, follow_up=body.follow_up
                )
        except ApiError as exc:
            error = exc
        except ConsultationError as exc:
            error = from_engine(exc)
        except StoreUnavailable as exc:  # before the round: nothing of it was stored
            log.warning("chat request refused: %s", exc)
            error = store_unavailable()
        except Exception as exc:
            log.error("chat request failed", exc_info=exc)
            error = ApiError("INTERNAL_ERROR", "internal error")
        finally:
            asked.held.release()
            if hold is not None:  # released before the refusal: its retry finds it free
                await hold.end()
        if error is not None:
            round_task.refuse(error)

    async def _read(self, asked: Asked) -> Message:
        """The request's message as the session stores it: typed words alone, or read with
        its files (documents' text, the transcript, photos), and its answers; the decoded
        files are let go as soon as they are read. Raises `AttachmentRefused`."""
        files, asked.files = asked.files, ()
        answers = tuple(answer.answer() for answer in asked.body.answers)
        if not files:
            return Message(asked.body.message, answers=answers)
        assert self._intake is not None  # files are decoded only with an intake
        read = await self._intake.read(asked.body.message, files, owner=_reader_owner(asked))
        return Message(read.stored_text, read, answers)

    async def _open(self, asked: Asked, text: str, hold: Hold | None, payer: Payer) -> str:
        """Open the session (`QuotaExceeded` when `payer` may start none: nothing stored)."""
        body = asked.body
        return await asked.bot.engine.sessions.open_session(
            text,
            max_rounds=body.max_rounds or 1,
            system_prompt=body.system_prompt,
            options=body.options(),
            turn_id=hold.turn_id if hold is not None else None,
            memory=None if body.user_id is None else api_scope(body.user_id, asked.bot.scope),
            payer=payer,
        )

    async def _vet(
        self, engine: Engine, session_id: str, body: ChatRequest, message: Message, payer: Payer
    ) -> None:
        """Check an existing session can take this round and its answers answer the
        session's last questions (`AnswerInvalid`, `AnswerStale`); then re-limit it if
        asked. A follow-up instead needs a complete session that takes one
        (`FollowUpUnavailable`) and a payer within their quotas (`QuotaExceeded`)."""
        if body.follow_up:
            found = await engine.sessions.get_session(session_id)
            reason = unavailable_reason(found, now=time.time(), config=engine.config)
            if reason is not None:
                raise FollowUpUnavailable(reason, f"session {session_id}")
            await engine.quotas.require(payer, Stage.FOLLOW_UP)
            return
        consultation = await engine.sessions.check_session(session_id)
        if message.answers:
            user_message_text(consultation, message.text, message.answers, author=None)
        if body.max_rounds is not None:
            await engine.sessions.set_session_max_rounds(session_id, body.max_rounds)

    async def _answer(
        self,
        engine: Engine,
        round_task: RoundTask,
        session_id: str,
        message: Message,
        hold: Hold | None,
        payer: Payer,
        *,
        follow_up: bool = False,
    ) -> None:
        """Answer the round (or follow-up), its usage charged to the session and `payer`."""
        relay = round_task.relay
        on_text = relay.on_text if relay is not None else None
        on_tool = relay.on_tool if relay is not None else None
        turn_id = hold.turn_id if hold is not None else None
        try:
            if follow_up:
                reply = await engine.turns.follow_up(
                    engine.sessions.key(session_id),
                    message.text,
                    consultation_id=session_id,
                    images=message.images,
                    on_text=on_text,
                    on_tool=on_tool,
                    turn_id=turn_id,
                    payer=payer,
                )
            else:
                reply = await engine.sessions.continue_session(
                    session_id,
                    message.text,
                    images=message.images,
                    on_text=on_text,
                    on_tool=on_tool,
                    turn_id=turn_id,
                    answers=message.answers,
                    payer=payer,
                )
        except Exception as exc:
            raise _round_failure(exc, session_id) from None
        self._metrics.record_reply(reply, source="api", bot=engine.sessions.scope)
        if reply.completed_now:
            self._remember(engine, reply.consultation_id)
        body = response(reply, message.read)
        if hold is not None:
            try:
                await hold.save(body)
            except Exception:  # the reply stands; only a later retry would not find it
                log.warning("could not store the reply of an idempotent request", exc_info=True)
        round_task.result.set_result(body)


def _round_failure(exc: Exception, session_id: str) -> ApiError:
    """Log a round that was not answered and return its client's error.

    The user's message was committed before the model was called and the round was not
    consumed, so sending the same message with this `sessionId` answers the same round:
    the error names the session, a refusal of the engine's excepted.
    """
    if isinstance(exc, TurnDidNotHappen):
        return did_not_happen(exc, session_id)
    if isinstance(exc, ConsultationError):
        log.warning("round of session %s not answered: %s", session_id, exc)
        return from_engine(exc)
    log.error("round of session %s failed", session_id, exc_info=exc)
    return ApiError("INTERNAL_ERROR", "internal error", sessionId=session_id)


def did_not_happen(exc: TurnDidNotHappen, session_id: str) -> ApiError:
    """Log a round of `session_id` that did not happen and return its client's error, which
    names the session to retry. Every member of the family is worded here."""
    if isinstance(exc, ModelError):
        log.warning("model error for session %s: %s", session_id, exc)
        error = model_error(exc)
    elif isinstance(exc, StoreUnavailable):
        log.warning("round of session %s not answered: %s", session_id, exc)
        error = store_unavailable()
    elif isinstance(exc, TurnSuperseded):  # another worker answered it: nothing went wrong
        log.info("round of session %s answered elsewhere first: %s", session_id, exc)
        error = ApiError("CONFLICT", "this round was answered by another request meanwhile")
    elif isinstance(exc, TurnCancelled):  # only a chat's /reset stops a turn, never a session's
        log.error("round of session %s failed", session_id, exc_info=exc)
        error = ApiError("INTERNAL_ERROR", "internal error")
    else:
        raise TypeError(f"no wording for {type(exc).__name__}")
    error.extra["sessionId"] = session_id
    return error


def _reader_owner(asked: Asked) -> str | None:
    """Whose share of the document readers the request's files are read in
    (`media.reader_shares`): the person (`api:<userId>`) when it names one, so one end
    user's costly files never hold up another's of the same API client; else the client."""
    return asked.person() or asked.client


def _client(request: web.Request) -> str:
    """Who sent `request`: its client key (`CLIENT_KEY`), else its address."""
    return request.get(CLIENT_KEY) or f"addr:{request.remote}"
