"""The ports of the engine: where consultations are kept, who answers, who waits for whom.

`storage.sqlite.store.SqliteStore` and `storage.postgres.store.PostgresStore` implement
`ConsultationStore`; `core.llm.llm.OpenAICompleter` implements `Completer`;
`core.primitives.keyed_lock.KeyedLock` implements `ChatLocks` within one process. Tests may plug in
anything with the same shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.domain.attachments import Transcription
from core.domain.audit import AuditEntry
from core.domain.bots import BotProfile, NewBot, StoredBot
from core.domain.clarifying import Picks
from core.domain.consultation import (
    ChatSettings,
    Consultation,
    ConsultationSummary,
    Message,
    ModelOptions,
    Status,
    TurnRecord,
    Usage,
)
from core.domain.facts import Fact, MemoryPreferences, MemoryState
from core.domain.knowledge import Passage
from core.domain.llm_format import SchemaForm
from core.domain.payments import Grant, Payment, Recorded, StarsDay
from core.domain.plans import ActivePlan
from core.domain.quotas import QuotaOverride, Standing, TokenHold
from core.domain.stats import DayFigures, Period, Stats
from core.domain.tool_usage import ToolCalls
from core.domain.tools import ToolCall, ToolSpec
from core.domain.usage import Charge, ScopeKind, UsageTotal

OnDelta = Callable[[str], Awaitable[None]]
"""Called with each new piece of streamed text, in order."""

OnText = Callable[[str], Awaitable[None]]
"""Called with the whole reply text shown so far, each time it grows."""


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    # OpenAI chat format: {"role": ..., "content": ...}; content is a string, or for the
    # user message of a round with images a list of content parts (text, image_url).
    messages: list[dict[str, Any]]
    model: str
    max_tokens: int | None = None
    json_mode: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)
    # With json_mode: the JSON Schema the answer should follow, for servers that enforce one.
    json_schema: dict[str, Any] | None = None
    schema_name: str = "answer"  # `json_schema.name` (providers require one)
    # A structured reply the caller cannot do without in JSON alone (a clarifying round):
    # the schema is sent strict, and a server refusing it fails the call with
    # FORMAT_REFUSED instead of being asked for any JSON object.
    schema_required: bool = False
    # How a required schema is sent: `json_schema`, or `json_object` with the schema
    # (llama-cpp-python's form); `core.domain.llm_format` learns which one the server takes.
    schema_form: SchemaForm = SchemaForm.JSON_SCHEMA
    # The knowledge-base passages its system message holds, labelled `K1`… in this order
    # (`core.prompting.excerpts`): what the reply's citations name. Not sent as such.
    knowledge: tuple[Passage, ...] = ()
    # The tools offered with this call (`tools` of the request); empty: none.
    tools: tuple[ToolSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    finish_reason: str | None
    model: str
    usage: Usage = field(default_factory=Usage)
    extras: dict[str, Any] = field(default_factory=dict)  # provider extras, e.g. citations
    # The calls the model asked for instead of (or before) its text; finish_reason
    # "tool_calls" when it stopped for them.
    tool_calls: tuple[ToolCall, ...] = ()


class Completer(Protocol):
    async def complete(
        self, request: CompletionRequest, on_delta: OnDelta | None = None
    ) -> Completion:
        """Run one chat completion, streaming deltas if `on_delta` is given.

        Raises `core.domain.errors.ModelError` once its own retries are exhausted.
        """
        ...


class ConsultationStore(Protocol):
    async def ping(self) -> bool:
        """True if the store can read and write right now (a health check polls it).

        Never raises: a store that cannot be reached, or was closed, answers False.
        Cheap enough to call every few seconds.
        """
        ...

    async def load_active(self, chat_key: str) -> Consultation | None:
        """The chat's consultation with status ACTIVE, messages included."""
        ...

    async def get(self, consultation_id: str) -> Consultation | None:
        """A consultation by id whatever its status, messages included."""
        ...

    async def recent(self, chat_key: str, limit: int) -> list[ConsultationSummary]:
        """The chat's `limit` newest consultations (by when they started, newest first;
        the id breaks ties), whatever their status, without their messages: one indexed
        read however long the chat's history. Purged ones are gone from it."""
        ...

    async def latest_status(self, chat_key: str) -> Status | None:
        """Status of the chat's most recently active consultation, None if it never had one."""
        ...

    async def load_turn(
        self, chat_key: str, turn_id: str | None
    ) -> tuple[TurnRecord | None, Consultation | None]:
        """What a new turn needs to know first, in one read from one snapshot: the chat's
        consultation (any status, messages included) holding a user message stored with
        `turn_id`, with the reply that followed it (`core.domain.consultation.locate_turn`) — None
        without a turn id or when the chat has no such message; and, when no turn was
        found, the chat's ACTIVE consultation (`load_active`)."""
        ...

    async def create(
        self, consultation: Consultation, *, starter: str | None = None, start_limit: int = 0
    ) -> None:
        """Insert the consultation and the messages it already holds, atomically; with
        `starter` (a person key) it adds one to that person's consultations started on the
        UTC day of `created_at`, in the same transaction (`consultations_started`). With a
        `start_limit` (0: none) the count is added only while it is below the limit, as
        one conditional write: at the limit nothing is stored and
        `core.domain.quotas.StartRefused` is raised, however many workers start at once.

        A chat has at most one ACTIVE consultation, whoever writes: creating a second
        raises `core.domain.errors.ActiveConsultationExists` and stores nothing.
        """
        ...

    async def add_message(
        self, consultation_id: str, message: Message, *, last_activity_at: float
    ) -> None:
        """Durably append a message (committed before the model is called), whatever the
        consultation's status: a COMPLETE one takes its follow-ups this way."""
        ...

    async def record_reply(
        self,
        consultation_id: str,
        reply: Message,
        *,
        expected_round: int,
        current_round: int,
        status: Status,
        last_activity_at: float,
        charge: Charge | None = None,
    ) -> None:
        """Append the assistant reply and advance the round, atomically, as a
        compare-and-set: only if the stored consultation is still ACTIVE with
        `current_round == expected_round` (the round the turn was planned from).
        `charge` (the reply's usage) is added to its daily totals in the same transaction:
        a stored reply is never without its count, a superseded one never counted.

        Otherwise another writer moved it on (or ended it) meanwhile: nothing is
        written and `core.domain.errors.TurnSuperseded` is raised. `SessionNotFound` for an
        unknown id.
        """
        ...

    async def record_follow_up(
        self,
        consultation_id: str,
        reply: Message,
        *,
        expected_follow_ups: int,
        last_activity_at: float,
        charge: Charge | None = None,
    ) -> None:
        """Append the answer to a follow-up and count it, atomically, as a compare-and-set:
        only if the stored consultation is COMPLETE with `follow_ups ==
        expected_follow_ups` (the count the follow-up was planned from). The round, status
        and everything else stay as they are.

        Otherwise another writer answered it (or the consultation changed) meanwhile:
        nothing is written and `core.domain.errors.TurnSuperseded` is raised. `SessionNotFound`
        for an unknown id. `charge` is added with the answer, as `record_reply` does.
        """
        ...

    async def add_usage(self, charges: Sequence[Charge]) -> None:
        """Add each charge to the daily totals of each of its scopes (`Charge.scopes`), in
        one transaction: calls with no reply to store (a transcription, a memory note).
        Totals are sums kept by the database, so several workers adding at once lose
        nothing."""
        ...

    async def usage_of(
        self, scope: ScopeKind, key: str, *, since_day: str, until_day: str
    ) -> list[UsageTotal]:
        """The scope's totals by model over the UTC days `since_day`..`until_day`
        (inclusive, `YYYY-MM-DD`), one indexed read; ordered by model; empty when nothing
        was charged."""
        ...

    async def tool_calls_of(self, scope: ScopeKind, key: str, *, day: str) -> ToolCalls:
        """The scope's tool calls by tool (`Charge.tools`, as each reply's charge added
        them) on the UTC `day` and over its month up to it, one indexed read; empty when
        none was made."""
        ...

    async def consultations_started(self, person: str, day: str) -> int:
        """How many consultations `person` started on the UTC `day` (`create`'s `starter`);
        kept apart from the consultations, so deleting them (/forget, purge) does not
        lower it. One indexed read."""
        ...

    async def hold_tokens(
        self, hold: TokenHold, *, month: str, now: float, admit: Callable[[Standing], bool]
    ) -> tuple[Standing, bool]:
        """In one transaction, and one at a time per person and per client key across
        workers: read the standing of the hold's person (tokens used on its day and since
        `month`, a UTC day, and consultations started on its day) and client (tokens on
        its day), each as charged plus the live holds (`expires_at` after `now`); then
        store `hold` if `admit(standing)` says so. Returns the standing read and whether
        the hold was stored. A person or client of None reads as 0."""
        ...

    async def resize_hold(self, hold_id: str, tokens: int, expires_at: float) -> None:
        """Set a stored hold's tokens and expiry (nothing when it is gone)."""
        ...

    async def release_hold(self, hold_id: str) -> None:
        """Delete a hold (nothing when it is gone)."""
        ...

    async def load_quota_override(self, person: str) -> QuotaOverride | None:
        """An admin's quota override for `person` (`core.domain.quotas`), None when none is set."""
        ...

    async def save_quota_override(self, override: QuotaOverride, *, at: float) -> None:
        """Set (replace) the person's override."""
        ...

    async def delete_quota_override(self, person: str) -> bool:
        """Remove the person's override; True when there was one."""
        ...

    async def stats(self, period: Period, *, scope: int | None = None) -> Stats:
        """The operator's figures of `period` (`core.domain.stats.Stats`), from one snapshot: a
        handful of aggregate reads bounded by indexes on the period, whatever the store
        holds: every consultation's, or (`scope`) only those of one bot, whose chat and
        person keys are its (its Telegram keys, `core.domain.telegram_keys`, and its API
        keys, `core.domain.api_keys`; the terminal's are no bot's). A consultation's end
        counts on the day it happened: `record_reply` storing a final answer, `set_status`
        and `expire_idle` record when."""
        ...

    async def is_blocked(self, person: str) -> bool:
        """Whether an operator blocked `person` (`core.turns.blocks`)."""
        ...

    async def daily_stats(self, period: Period, *, scope: int | None = None) -> list[DayFigures]:
        """`period` day by day, oldest first, every day listed (zeros when nothing
        happened), counted as `stats` counts (`scope`: one bot's only): two aggregate reads
        bounded by indexes on the period, from one snapshot."""
        ...

    async def load_latest(self, chat_key: str) -> Consultation | None:
        """The chat's newest consultation (the last one created) whatever its status,
        messages included; None when the chat never had one."""
        ...

    async def withdraw_turn(self, consultation_id: str, turn_id: str) -> bool:
        """Take back the user message stored with `turn_id` in that consultation, if no
        reply followed it; True when one was taken back. A consultation left without
        messages is deleted; when the first message goes, the next user message becomes
        the initial request."""
        ...

    async def save_picks(self, consultation_id: str, picks: Picks | None) -> None:
        """Keep the options chosen so far for the questions of the consultation's last
        round, replacing any kept before (None: clear them). Loaded with the consultation
        (`Consultation.picks`); `SessionNotFound` for an unknown id."""
        ...

    async def set_status(self, consultation_id: str, status: Status, *, at: float) -> None: ...

    async def set_max_rounds(self, consultation_id: str, max_rounds: int) -> None: ...

    async def set_options(self, consultation_id: str, options: ModelOptions) -> None:
        """Replace the consultation's model options (`Consultation.options`), which its
        next model call reads; `SessionNotFound` for an unknown id."""
        ...

    async def load_chat_settings(self, chat_key: str) -> ChatSettings: ...

    async def save_chat_settings(self, chat_key: str, settings: ChatSettings) -> None: ...

    async def move_chat(self, old_key: str, new_key: str) -> int:
        """Give a chat's consultations and settings a new key (a group that changed id);
        its usage and tool calls are added to the new key's.

        An active consultation already under the new key wins; the old one is reset.
        Returns how many consultations moved.
        """
        ...

    async def expire_idle(self, *, inactive_since: float, at: float) -> int:
        """Mark ACTIVE consultations idle since before `inactive_since` as EXPIRED."""
        ...

    async def purge(self, *, older_than: float) -> int:
        """Delete finished consultations (and their messages) last active before `older_than`."""
        ...

    async def forget_bot(self, scope: int) -> int:
        """Delete everything the bot of `scope` keeps (`core.domain.telegram_keys`): its
        consultations, chat settings, memory, quotas and usage, languages, blocks, and
        its rows keyed by Telegram's ids (update ids, keyboards; on PostgreSQL also the
        updates waiting or given up, undelivered replies and flood waits), in one
        transaction; another bot's data, and the API's and the terminal's, stay. How many
        consultations went."""
        ...

    async def forget_chat(self, chat_key: str) -> int:
        """Delete everything kept under `chat_key`, in one transaction: its consultations of
        any status, their messages and idempotency keys, the chat's settings and its tool
        calls by day (`tool_calls_of`; its token usage stays). Returns how many
        consultations went; 0 (and nothing else changed) for an unknown key."""
        ...

    async def delete_consultation(self, consultation_id: str, audit: AuditEntry) -> bool:
        """Delete one consultation of any status with its messages and idempotency keys,
        writing `audit` in the same transaction; False (nothing written) for an unknown id."""
        ...

    # -- client memory (`core.domain.facts`) ---------------------------------------------------

    async def load_memory(self, owner: str, person: str) -> MemoryState:
        """`owner`'s facts (newest first, at most `MAX_FACTS`) and `person`'s preferences
        (the defaults when none were saved)."""
        ...

    async def add_facts(
        self, owner: str, person: str, facts: Sequence[str], *, at: float
    ) -> tuple[Fact, ...]:
        """Add `facts` to `owner`'s (cleaned by `core.domain.facts.distinct_facts`: those equal
        to one it holds, ignoring case and spacing, are skipped), then keep only its newest
        `MAX_FACTS`; one transaction. Returns the facts added, newest first. Bounded
        whatever `facts` holds: at most `MAX_FACTS` of them are looked at."""
        ...

    async def delete_fact(self, owner: str, fact_id: int) -> bool:
        """Delete the fact `fact_id` only if it belongs to `owner`; True when one went. Any
        other id (another owner's, unknown, out of range) changes nothing."""
        ...

    async def save_memory_preferences(self, person: str, preferences: MemoryPreferences) -> None:
        """Replace `person`'s preferences."""
        ...

    async def forget_memory(self, person: str) -> int:
        """Delete every fact `person` has in any scope (private and each group), their
        preferences (memory and interface language) and their tool calls by day
        (`tool_calls_of`; their token usage stays), in one transaction; the number of facts
        deleted."""
        ...

    async def load_language(self, person: str) -> str | None:
        """The interface language `person` chose (None when they never chose one)."""
        ...

    async def save_language(self, person: str, language: str) -> None:
        """Replace the interface language `person` chose."""
        ...

    async def delete_language(self, person: str) -> bool:
        """Forget the interface language `person` chose; True when there was one."""
        ...


class ChatLocks(Protocol):
    """Mutual exclusion per chat key: while one holder is inside `hold(key)`, another
    `hold(key)` waits; different keys never wait for each other."""

    def hold(self, key: str) -> AbstractAsyncContextManager[None]: ...


class Transcriber(Protocol):
    async def transcribe(
        self, audio: bytes, *, filename: str, language: str | None = None
    ) -> Transcription:
        """The words spoken in `audio` (sent as `filename`, whose extension names the format),
        with what the service billed for them.

        Raises `core.domain.errors.AttachmentRefused` (TRANSCRIPTION_FAILED) when the service
        fails after its own retries.
        """
        ...


class BotRegistry(Protocol):
    """The bots an operator added (`core.domain.bots`), as both stores keep them in the
    bots table. A bot's id is its scope and is never reused: a removed bot keeps its row
    (`removed_at`), and adding the same Telegram bot again brings that row back."""

    async def add_bot(self, bot: NewBot, *, at: float) -> StoredBot:
        """Store `bot` and return it with its id, in one transaction. A Telegram bot
        already stored and not removed raises `core.domain.bots.BotExists` and changes
        nothing; a removed one gets its row (and id) back with the new token and settings."""
        ...

    async def bots(self, *, removed: bool = False) -> list[StoredBot]:
        """The bots stored, by id; with `removed` the removed ones too."""
        ...

    async def count_bots(self) -> int:
        """How many bots are stored and not removed: one indexed count."""
        ...

    async def update_bot(
        self,
        bot_id: int,
        *,
        at: float,
        enabled: bool | None = None,
        profile: BotProfile | None = None,
        label: str | None = None,
    ) -> StoredBot | None:
        """Change what is given (None: kept) of a bot not removed; the bot as stored now,
        None when there is no such bot."""
        ...

    async def remove_bot(self, bot_id: int, *, at: float) -> bool:
        """Mark the bot removed (disabled, its row and scope kept, its API token revoked);
        False when there was no such bot or it was removed already."""
        ...

    async def set_bot_api_token(
        self, bot_id: int, token_hash: str | None, *, at: float
    ) -> StoredBot | None:
        """Give the bot the API token whose SHA-256 (hex) is `token_hash`, or none (None);
        the bot as stored now, None when there is no such bot (or it was removed). A hash
        another bot has raises `core.domain.bots.BotExists` and changes nothing."""
        ...


class PaymentBook(Protocol):
    """The payments in Stars and the plans they give (`core.domain.payments`), as both stores
    keep them (`payments`, `person_plans`), by person key."""

    async def record_payment(self, payment: Payment, grant: Grant | None) -> Recorded:
        """Store `payment` and, in the same transaction, apply `grant` to its person's plan
        (None: store only). Exactly once per charge id: a payment already stored changes
        nothing (`stored` False), however many callers (workers) record it at once."""
        ...

    async def grant(self, person: str, grant: Grant, *, at: float) -> ActivePlan:
        """Give the person `grant`'s plan, extended from the later of `at` and its current
        end (`core.domain.payments.extended_end`), in one statement."""
        ...

    async def active_plan(self, person: str, now: float) -> ActivePlan | None:
        """The person's plan if it ends after `now`."""
        ...

    async def payment(self, charge_id: str) -> Payment | None: ...

    async def refund(
        self, charge_id: str, *, at: float, audit: AuditEntry | None = None
    ) -> Payment | None:
        """Mark the payment refunded and revoke its person's plan, with `audit` (the
        console's entry) when given, in one transaction; the payment as it is now, None
        when there is no such payment or it was refunded already (then nothing is written)."""
        ...

    async def cancel_renewal(
        self, person: str, plan_id: str, *, at: float | None, audit: AuditEntry | None = None
    ) -> ActivePlan | None:
        """Keep that the person's subscription to the plan is not renewed (cancelled at
        `at`; None: it renews again), with `audit` when given, in one transaction; the
        person's plan as it is now, None when they hold no plan of that id (then only
        `audit` is written). A later grant (a renewal) clears it."""
        ...

    async def payments(
        self, *, person: str | None = None, plan_id: str | None = None, limit: int = 50
    ) -> list[Payment]:
        """The latest payments first, of one person and/or plan when given; a
        subscription's says whether its person's plan of that plan will not renew."""
        ...

    async def stars_by_day(
        self, since: float, until: float, *, scope: int | None = None
    ) -> list[StarsDay]:
        """The payments kept in [since, until) by UTC day, oldest first (a range of the
        index on their time); of the people of bot `scope` only, when given."""
        ...

    async def active_plans(self, now: float, *, scope: int | None = None) -> int:
        """How many people (of bot `scope`, when given) have a plan that ends after `now`."""
        ...
