"""Deployment settings, read once from the environment and `.env`.

Every value is validated here so a bad deployment fails at start-up with one
line naming the variable, never later with a traceback. Each part of the product
gets only its own small frozen config built from them (`engine_config`,
`bot_config`, `api_config`, `model_endpoint`): the engine never sees a Telegram or
HTTP setting, and the edges never read the environment.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from admin.config import MIN_ADMIN_TOKEN_CHARS, AdminConfig
from api.config import ApiConfig, WebhookConfig
from api.connection_slots import IPNetwork
from api.exposure import is_loopback
from bot.transport.config import BotConfig
from core.domain.api_keys import named_person
from core.domain.errors import ConfigError
from core.domain.facts import telegram_person
from core.domain.plans import Plan, parse_plans
from core.domain.quotas import QuotaConfig
from core.domain.usage import Prices, parse_prices
from core.llm.llm import ModelEndpoint
from core.prompting.requests import EngineConfig
from i18n.languages import LANGUAGES
from media.config import EmbeddingEndpoint, IntakeConfig, ReaderConfig, TranscriptionEndpoint
from tools.config import ToolsConfig, tools_config

MAX_MODELS = 20
"""LLM_MODELS names at most this many (a button each under /model)."""
MAX_MODEL_NAME_CHARS = 100
MIN_SECRET_KEY_CHARS = 16
"""SECRET_KEY is at least this long: the added bots' tokens are only as safe as it is."""


def _split_ids(value: Any) -> Any:
    if isinstance(value, str):
        return [int(part) for part in value.replace(";", ",").split(",") if part.strip()]
    return value


IdList = Annotated[frozenset[int], NoDecode]
PersonList = Annotated[frozenset[str], NoDecode]
"""People as person keys (`core.domain.facts`): Telegram ids become `tg:<id>`; `api:<userId>`
names an HTTP API user as its requests' `userId` does, `api<n>:<userId>` one of stored bot n."""
_TELEGRAM_ID = re.compile(r"-?[0-9]{1,19}")


def _split_people(value: Any) -> Any:
    """A comma-separated list of Telegram ids, `api:<userId>` and `api<n>:<userId>` as
    person keys (`core.domain.api_keys.named_person`); anything else is refused, naming the
    entry (the API refuses such a `userId` too)."""
    parts = value.replace(";", ",").split(",") if isinstance(value, str) else value
    people: set[str] = set()
    for part in parts:
        entry = str(part).strip()
        if not entry:
            continue
        if (person := named_person(entry)) is not None:
            people.add(person)
        elif _TELEGRAM_ID.fullmatch(entry):
            people.add(telegram_person(int(entry)))
        else:
            raise ValueError(
                f"{entry[:80]!r} is not a Telegram id, api:<userId> nor api<bot id>:<userId> "
                "(a valid API userId)"
            )
    return frozenset(people)


RETIRED = frozenset({"api_allowed_models"})
"""Settings that were replaced: read only to stop a start that still sets them."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
    )

    # Telegram
    telegram_bot_token: SecretStr | None = None
    telegram_api_base_url: str = "https://api.telegram.org/bot"
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = None
    webhook_path: str = "/telegram/webhook"
    telegram_max_rate: float = Field(default=0, ge=0)  # overall requests/s; 0: no cap

    # Model (OPENAI_API_KEY / OPENAI_BASE_URL are the openai SDK's own names)
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    # The models a chat (/model) or an API session may choose; empty: LLM_MODEL alone.
    llm_models: Annotated[tuple[str, ...], NoDecode] = ()
    # Retired (`RETIRED`): LLM_MODELS is the one allow-list now; set, it stops the start.
    api_allowed_models: str | None = None
    llm_max_tokens: int = Field(default=2048, ge=1)  # the final answer's budget per call
    llm_question_max_tokens: int = Field(default=400, ge=1)  # a clarifying round's budget
    llm_timeout_seconds: float = Field(default=120.0, gt=0)
    llm_max_retries: int = Field(default=2, ge=0, le=10)
    llm_extra_body: Annotated[dict[str, Any], NoDecode] = Field(default_factory=dict)
    llm_http_transport: Literal["httpx", "aiohttp"] = "aiohttp"
    llm_first_token_timeout_seconds: float = Field(default=120.0, gt=0)
    llm_total_timeout_seconds: float = Field(default=600.0, gt=0)
    max_answer_chars: int = Field(default=50_000, ge=1000)
    llm_vision: bool = False  # the model accepts images (photos go to it as image parts)
    # Clarifying rounds as structured replies (questions with tap-to-answer options):
    # auto falls back to text for an endpoint that cannot (core.domain.llm_format).
    llm_structured_questions: Literal["auto", "on", "off"] = "auto"
    final_brief: bool = True  # a final answer opens with what it took into account
    # Prices per million tokens by model, JSON: {"gpt-4o-mini": {"input": 0.15, "output": 0.6}}
    model_prices: str = ""
    # Client memory: durable facts a person stated, offered to their later consultations.
    memory_enabled: bool = True
    memory_max_tokens: int = Field(default=300, ge=20, le=4000)  # the facts' prompt budget
    # Knowledge base: the passages every model call of a consultation is given.
    knowledge_top_k: int = Field(default=6, ge=1, le=50)  # passages a turn reads
    knowledge_max_chars: int = Field(default=6000, ge=200, le=100_000)  # their text in all
    # The tool loop (core.llm.tool_loop), when the consultation has tools (MCP servers, or
    # the knowledge base's search as a tool):
    tools_in_rounds: bool = True  # clarifying rounds may call tools, not only answers
    tools_max_calls: int = Field(default=6, ge=0, le=50)  # tool calls per turn; 0: none
    tool_parallel: int = Field(default=3, ge=1, le=16)  # of one turn at once
    knowledge_tool: bool = True  # the knowledge base's search offered as knowledge__search
    # Hybrid retrieval: each passage's vector from the provider's /v1/embeddings, searched
    # beside its words. Empty: full text only (numpy is never loaded).
    embedding_model: str = ""  # e.g. text-embedding-3-small, nomic-embed-text
    embedding_base_url: str | None = None  # default: OPENAI_BASE_URL
    embedding_api_key: SecretStr | None = None  # default: OPENAI_API_KEY
    embedding_dimensions: int | None = Field(default=None, ge=1, le=8192)  # text-embedding-3
    embedding_batch_size: int = Field(default=64, ge=1, le=2048)  # texts per request
    embedding_timeout_seconds: float = Field(default=30.0, gt=0)  # one request, each try
    embedding_query_timeout_seconds: float = Field(default=5.0, gt=0)  # a search's wait

    # Voice, documents and photos
    transcription_model: str = ""  # e.g. whisper-1, gpt-4o-mini-transcribe; empty: voice off
    transcription_base_url: str | None = None  # default: OPENAI_BASE_URL
    transcription_api_key: SecretStr | None = None  # default: OPENAI_API_KEY
    max_voice_bytes: int = Field(default=20_000_000, ge=1000)  # Telegram's download limit
    max_document_bytes: int = Field(default=10_000_000, ge=1000)
    max_document_chars: int = Field(default=30_000, ge=500)
    max_image_bytes: int = Field(default=5_000_000, ge=1000)
    # PDF and DOCX are parsed in reader processes, each within a deadline and a memory limit
    document_readers: int = Field(default=2, ge=1, le=32)
    document_read_timeout_seconds: float = Field(default=15.0, gt=0, le=600)
    document_read_memory_mb: int = Field(default=512, ge=128)
    telegram_file_base_url: str | None = None  # default: TELEGRAM_API_BASE_URL's …/file/bot
    # The knowledge base (`consultation-bot knowledge add`): the largest document loaded
    knowledge_max_document_bytes: int = Field(default=20_000_000, ge=1000)

    # Tools: MCP servers the expert may call (docs/tools.md). MCP_SERVERS is a JSON object
    # of server names to {"command", "args", "env", "cwd"} (stdio) or {"url", "headers"}
    # (streamable HTTP); empty: no tools, and the MCP SDK is never loaded.
    tools_enabled: bool = True
    mcp_servers: str = ""
    mcp_tools_allow: str = ""  # server.tool patterns (fnmatch), comma-separated; empty: all
    tool_timeout_seconds: float = Field(default=20.0, gt=0, le=600)  # one call
    tool_result_max_chars: int = Field(default=8000, ge=200, le=200_000)  # one result

    # Consultations
    db_path: Path = Path("consultations.sqlite3")
    database_url: SecretStr | None = None  # postgresql://…: PostgreSQL instead of DB_PATH
    database_pool_size: int = Field(default=10, ge=1, le=1000)
    default_max_rounds: int = Field(default=3, ge=1)
    max_rounds_limit: int = Field(default=10, ge=1)
    session_ttl_seconds: int = Field(default=3600, ge=1)
    followup_limit: int = Field(default=5, ge=0, le=50)  # follow-ups per consultation; 0: off
    history_budget_chars: int = Field(default=24_000, ge=1000)
    max_continuations: int = Field(default=3, ge=0, le=20)
    max_input_chars: int = Field(default=4000, ge=1)
    initial_request_budget_chars: int = Field(default=6000, ge=500)
    prompts_dir: Path | None = None
    default_role: str = "expert"
    retention_days: int = Field(default=30, ge=1)
    cleanup_interval_seconds: int = Field(default=600, ge=1)

    # Updates that cannot be handled: given up after this many handlings started (the
    # shared inbox) or one handling this long (unset: derived from the model's timeouts)
    inbox_max_attempts: int = Field(default=3, ge=1, le=100)
    inbox_handling_deadline_seconds: float | None = Field(default=None, gt=0)
    # Turns between their arrival and their model call at once in one process (0: no gate)
    turn_intake_slots: int = Field(default=64, ge=0, le=4096)

    # Access
    allowed_user_ids: IdList = frozenset()
    allowed_chat_ids: IdList = frozenset()
    # Telegram users who operate the bot: /stats, /quota (in a private chat)
    admin_user_ids: IdList = frozenset()
    user_rate_limit_per_minute: int = Field(default=20, ge=0)  # 0: no limit
    button_presses_per_minute: int = Field(default=10, ge=0)  # per user; 0: no limit
    group_config_admins_only: bool = True

    # Quotas (0: no limit): tokens (prompt + completion) per person a UTC day and month,
    # consultations a person starts a UTC day, tokens per API bearer token a UTC day
    user_daily_token_limit: int = Field(default=0, ge=0)
    user_monthly_token_limit: int = Field(default=0, ge=0)
    user_daily_consultation_limit: int = Field(default=0, ge=0)
    # Telegram ids and api:<userId> with no person limits, besides ADMIN_USER_IDS
    quota_exempt_user_ids: PersonList = frozenset()
    api_daily_token_limit: int = Field(default=0, ge=0)

    # Plans sold in Telegram Stars (core.domain.plans): a JSON list; empty: nothing is sold
    plans: str = ""
    # What /paysupport and /terms answer (Telegram asks bots that take payments for both)
    payment_support_text: str = Field(default="", max_length=4000)
    payment_terms_text: str = Field(default="", max_length=4000)

    # HTTP API
    api_enabled: bool = False
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8080, ge=1, le=65535)
    api_token: SecretStr | None = None
    api_max_body_bytes: int = Field(default=1_000_000, ge=1024)
    api_allow_anonymous: bool = False
    api_max_tokens_limit: int = Field(default=8192, ge=1)
    api_rate_limit_per_minute: int = Field(default=60, ge=0)  # 0: no limit
    api_access_log: bool = True
    # Whole-request read deadlines for the HTTP server (API and webhook): a client slower
    # than these (a byte every few seconds) is disconnected.
    http_header_timeout_seconds: float = Field(default=10.0, gt=0)
    http_body_timeout_seconds: float = Field(default=30.0, gt=0)
    http_max_connections: int = Field(default=256, ge=1)  # open at once (file descriptors)
    http_max_connections_per_address: int = Field(default=32, ge=1)  # of those, one address's
    # Proxies (addresses or networks) whose X-Forwarded-For names the client
    trusted_proxies: Annotated[tuple[IPNetwork, ...], NoDecode] = ()
    # Chat request bodies held at once, in bytes; past it a large one is refused (503).
    api_body_bytes_in_flight: int = Field(default=32_000_000, ge=1024)

    # The operator's web console under /admin/ on the HTTP server; unset: off (404)
    admin_token: SecretStr | None = None
    admin_session_minutes: int = Field(default=480, ge=1, le=43_200)  # a sign-in lasts this
    # Where the evaluator writes its reports (one folder per run), which /admin/ lists
    eval_reports_dir: Path = Path("evaluation-report")

    # Encrypts the tokens of the bots added with `bots add` (app.bot_secrets); needed once
    # a bot is stored, and the same key must be kept for as long as they are.
    secret_key: SecretStr | None = None

    log_level: str = "INFO"

    _split = field_validator(
        "allowed_user_ids",
        "allowed_chat_ids",
        "admin_user_ids",
        mode="before",
    )(_split_ids)
    _people = field_validator("quota_exempt_user_ids", mode="before")(_split_people)

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_networks(cls, value: Any) -> Any:
        if isinstance(value, str):
            parts = value.replace(";", ",").split(",")
            return tuple(ipaddress.ip_network(p.strip(), strict=False) for p in parts if p.strip())
        return value

    @field_validator("llm_models", mode="before")
    @classmethod
    def _split_model_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
        return value

    @field_validator("llm_models")
    @classmethod
    def _check_model_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > MAX_MODELS:
            raise ValueError(f"at most {MAX_MODELS} models, got {len(value)}")
        for name in value:
            if len(name) > MAX_MODEL_NAME_CHARS or any(c.isspace() for c in name):
                raise ValueError(
                    f"{name[:40]!r}: a model name has no spaces and at most "
                    f"{MAX_MODEL_NAME_CHARS} characters"
                )
        return value

    @field_validator("llm_extra_body", mode="before")
    @classmethod
    def _parse_extra_body(cls, value: Any) -> Any:
        if isinstance(value, str):
            if not value.strip():
                return {}
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON: {exc.msg}") from None
        return value

    def models(self) -> tuple[str, ...]:
        """The models a chat or an API session may choose, in LLM_MODELS' order:
        LLM_MODELS, else only LLM_MODEL."""
        return self.llm_models or (self.llm_model,)

    @field_validator("model_prices", mode="after")
    @classmethod
    def _check_prices(cls, value: str) -> str:
        parse_prices(value)  # PricesInvalid is a ValueError: reported as this setting's
        return value

    def prices(self) -> Prices:
        return parse_prices(self.model_prices)

    def api_models(self) -> frozenset[str]:
        """Models an API client may ask for: the same allow-list as a chat's (LLM_MODELS)."""
        return frozenset(self.models())

    def secret(self, name: str) -> str | None:
        """The plain value of a SecretStr setting, or None."""
        value = getattr(self, name)
        return value.get_secret_value() if value is not None else None

    @field_validator("secret_key", mode="after")
    @classmethod
    def _long_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value().strip()) < MIN_SECRET_KEY_CHARS:
            raise ValueError(
                f"at least {MIN_SECRET_KEY_CHARS} characters (it encrypts the added bots' "
                "tokens); e.g. `openssl rand -hex 32`"
            )
        return value

    @field_validator("plans", mode="after")
    @classmethod
    def _check_plans(cls, value: str) -> str:
        parse_plans(value, LANGUAGES)  # a ValueError: reported as this setting's
        return value

    def plan_list(self) -> tuple[Plan, ...]:
        """PLANS, parsed (checked when the settings were read)."""
        return parse_plans(self.plans, LANGUAGES)

    @field_validator("database_url", mode="after")
    @classmethod
    def _postgres_only(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(
            ("postgresql://", "postgres://")
        ):
            raise ValueError("must start with postgresql:// (or be empty for SQLite)")
        return value

    def tools_config(self) -> ToolsConfig:
        """The tool servers and the bounds of a call; no servers with TOOLS_ENABLED=false
        (a bad MCP_SERVERS still stops the start: it is read when the settings are)."""
        return tools_config(
            self.mcp_servers,
            self.mcp_tools_allow,
            enabled=self.tools_enabled,
            timeout_seconds=self.tool_timeout_seconds,
            result_max_chars=self.tool_result_max_chars,
        )

    def handling_deadline(self) -> float:
        """INBOX_HANDLING_DEADLINE_SECONDS, else the longest turn the model's timeouts allow
        (the first call and every continuation, each up to LLM_TOTAL_TIMEOUT_SECONDS; with
        tools, a model call and a tool call, up to TOOL_TIMEOUT_SECONDS, for each of
        TOOLS_MAX_CALLS) plus five minutes for reading a file and delivering the reply."""
        if self.inbox_handling_deadline_seconds is not None:
            return self.inbox_handling_deadline_seconds
        calls = self.max_continuations + 1
        tools = 0.0
        if self.tools_enabled and (self.mcp_servers.strip() or self.knowledge_tool):
            calls += self.tools_max_calls
            tools = self.tools_max_calls * self.tool_timeout_seconds
        return calls * self.llm_total_timeout_seconds + tools + 300.0

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            model=self.llm_model,
            models=self.models(),
            max_tokens=self.llm_max_tokens,
            question_max_tokens=self.llm_question_max_tokens,
            default_max_rounds=self.default_max_rounds,
            max_rounds_limit=self.max_rounds_limit,
            session_ttl_seconds=self.session_ttl_seconds,
            history_budget_chars=self.history_budget_chars,
            max_continuations=self.max_continuations,
            default_role=self.default_role,
            max_answer_chars=self.max_answer_chars,
            initial_request_budget_chars=self.initial_request_budget_chars,
            documents_budget_chars=self.max_document_chars,
            structured_questions=self.llm_structured_questions,
            final_brief=self.final_brief,
            memory_enabled=self.memory_enabled,
            memory_max_tokens=self.memory_max_tokens,
            followup_limit=self.followup_limit,
            knowledge_top_k=self.knowledge_top_k,
            knowledge_max_chars=self.knowledge_max_chars,
            tools_in_rounds=self.tools_in_rounds,
            tools_max_calls=self.tools_max_calls,
            tool_parallel=self.tool_parallel,
            knowledge_tool=self.knowledge_tool and self.tools_enabled,
        )

    def quota_config(self) -> QuotaConfig:
        """The limits, with the people exempt from them (QUOTA_EXEMPT_USER_IDS, Telegram
        ids and API users, and ADMIN_USER_IDS) as person keys."""
        admins = frozenset(telegram_person(user_id) for user_id in self.admin_user_ids)
        return QuotaConfig(
            user_daily_tokens=self.user_daily_token_limit,
            user_monthly_tokens=self.user_monthly_token_limit,
            user_daily_consultations=self.user_daily_consultation_limit,
            api_daily_tokens=self.api_daily_token_limit,
            exempt=self.quota_exempt_user_ids | admins,
        )

    def model_endpoint(self) -> ModelEndpoint:
        """The bot's model: OPENAI_BASE_URL, OPENAI_API_KEY, LLM_MODEL and the call limits.

        A missing key fails here, at start-up, not on the first call.
        """
        api_key = self.secret("openai_api_key")
        if not api_key:
            raise ConfigError(
                "OPENAI_API_KEY: required (any non-empty value for providers without keys)"
            )
        return ModelEndpoint(
            name="bot",
            api_key=api_key,
            base_url=self.openai_base_url,
            model=self.llm_model,
            timeout_seconds=self.llm_timeout_seconds,
            max_retries=self.llm_max_retries,
            extra_body=dict(self.llm_extra_body),
            transport=self.llm_http_transport,
            first_token_timeout_seconds=self.llm_first_token_timeout_seconds,
            total_timeout_seconds=self.llm_total_timeout_seconds,
        )

    def intake_config(self) -> IntakeConfig:
        """What voice notes, documents and photos may be, and what reads them."""
        return IntakeConfig(
            vision=self.llm_vision,
            voice=bool(self.transcription_model),
            max_voice_bytes=self.max_voice_bytes,
            max_document_bytes=self.max_document_bytes,
            max_document_chars=self.max_document_chars,
            max_image_bytes=self.max_image_bytes,
        )

    def reader_config(self) -> ReaderConfig:
        """The reader processes PDF and DOCX documents are parsed in."""
        return ReaderConfig(
            processes=self.document_readers,
            timeout_seconds=self.document_read_timeout_seconds,
            memory_mb=self.document_read_memory_mb,
        )

    def transcription_endpoint(self) -> TranscriptionEndpoint | None:
        """The speech-to-text service (None: voice is off); its URL and key default to the
        model provider's."""
        if not self.transcription_model:
            return None
        api_key = self.secret("transcription_api_key") or self.secret("openai_api_key")
        if not api_key:
            raise ConfigError("TRANSCRIPTION_API_KEY (or OPENAI_API_KEY): required for voice")
        return TranscriptionEndpoint(
            model=self.transcription_model,
            api_key=api_key,
            base_url=self.transcription_base_url or self.openai_base_url,
            timeout_seconds=self.llm_timeout_seconds,
            max_retries=self.llm_max_retries,
        )

    def embedding_endpoint(self) -> EmbeddingEndpoint | None:
        """The embeddings service (None: retrieval by full text only); its URL and key
        default to the model provider's."""
        if not self.embedding_model:
            return None
        api_key = self.secret("embedding_api_key") or self.secret("openai_api_key")
        if not api_key:
            raise ConfigError("EMBEDDING_API_KEY (or OPENAI_API_KEY): required for embeddings")
        return EmbeddingEndpoint(
            model=self.embedding_model,
            api_key=api_key,
            base_url=self.embedding_base_url or self.openai_base_url,
            dimensions=self.embedding_dimensions,
            batch=self.embedding_batch_size,
            timeout_seconds=self.embedding_timeout_seconds,
            max_retries=self.llm_max_retries,
            query_seconds=self.embedding_query_timeout_seconds,
        )

    def bot_config(self) -> BotConfig:
        token = self.secret("telegram_bot_token")
        if not token:
            raise ConfigError(
                "TELEGRAM_BOT_TOKEN is not set. Create a bot with @BotFather and put its "
                "token in .env (see .env.example)."
            )
        return BotConfig(
            token=token,
            api_base_url=self.telegram_api_base_url,
            webhook=bool(self.webhook_url),
            max_rate=self.telegram_max_rate,
            allowed_user_ids=self.allowed_user_ids,
            allowed_chat_ids=self.allowed_chat_ids,
            admin_user_ids=self.admin_user_ids,
            user_rate_limit_per_minute=self.user_rate_limit_per_minute,
            button_presses_per_minute=self.button_presses_per_minute,
            group_config_admins_only=self.group_config_admins_only,
            max_input_chars=self.max_input_chars,
            session_ttl_seconds=self.session_ttl_seconds,
            file_api_url=self.telegram_file_base_url,
            handling_deadline=self.handling_deadline(),
            payment_support_text=self.payment_support_text.strip(),
            payment_terms_text=self.payment_terms_text.strip(),
        )

    def api_config(self) -> ApiConfig:
        webhook = None
        if self.webhook_url:
            secret = self.secret("webhook_secret")
            if not secret:
                raise ConfigError(
                    "WEBHOOK_SECRET is not set. Webhook mode needs a secret (1-256 characters "
                    "of A-Z a-z 0-9 _ -) so that only Telegram can post updates."
                )
            webhook = WebhookConfig(url=self.webhook_url, secret=secret, path=self.webhook_path)
        return ApiConfig(
            enabled=self.api_enabled,
            host=self.api_host,
            port=self.api_port,
            token=self.secret("api_token"),
            allow_anonymous=self.api_allow_anonymous,
            max_body_bytes=self.api_max_body_bytes,
            models=self.api_models(),
            max_tokens_limit=self.api_max_tokens_limit,
            max_input_chars=self.max_input_chars,
            max_rounds_limit=self.max_rounds_limit,
            rate_limit_per_minute=self.api_rate_limit_per_minute,
            access_log=self.api_access_log,
            header_timeout_seconds=self.http_header_timeout_seconds,
            body_timeout_seconds=self.http_body_timeout_seconds,
            max_connections=self.http_max_connections,
            max_connections_per_address=self.http_max_connections_per_address,
            trusted_proxies=self.trusted_proxies,
            body_bytes_in_flight=self.api_body_bytes_in_flight,
            model=self.llm_model,
            webhook=webhook,
        )

    def admin_config(self) -> AdminConfig | None:
        """The console's settings; None when ADMIN_TOKEN is unset (the console is off)."""
        token = self.secret("admin_token")
        if not token:
            return None
        if len(token) < MIN_ADMIN_TOKEN_CHARS:
            raise ConfigError(
                f"ADMIN_TOKEN: at least {MIN_ADMIN_TOKEN_CHARS} characters (it is the "
                "console's only password); e.g. `openssl rand -hex 32`"
            )
        return AdminConfig(
            token=token,
            secure_cookies=not is_loopback(self.api_host),
            session_seconds=self.admin_session_minutes * 60,
            reports_dir=self.eval_reports_dir,
        )


def load_settings(**overrides: Any) -> Settings:
    """Read settings; raise `ConfigError` naming the first bad variable."""
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]).upper() if error["loc"] else "settings"
        given = error.get("input")
        shown = f" (got {given!r})" if isinstance(given, str | int | float) else ""
        raise ConfigError(f"{name}: {error['msg']}{shown}") from None
    except SettingsError as exc:  # e.g. a value pydantic-settings could not decode
        raise ConfigError(str(exc)) from None
    if settings.llm_first_token_timeout_seconds > settings.llm_total_timeout_seconds:
        raise ConfigError(
            f"LLM_FIRST_TOKEN_TIMEOUT_SECONDS ({settings.llm_first_token_timeout_seconds:g}) is "
            f"above LLM_TOTAL_TIMEOUT_SECONDS ({settings.llm_total_timeout_seconds:g})"
        )
    if settings.api_allowed_models is not None:
        raise ConfigError(
            "API_ALLOWED_MODELS was replaced by LLM_MODELS, the models chats and API sessions "
            "may choose (with LLM_MODEL among them): rename it"
        )
    if settings.llm_model not in settings.models():
        raise ConfigError(
            f"LLM_MODELS: it must name LLM_MODEL ({settings.llm_model!r}), the model chats "
            f"use until they choose another; got {', '.join(settings.llm_models)}"
        )
    settings.tools_config()  # MCP_SERVERS and MCP_TOOLS_ALLOW: a ConfigError naming the field
    if settings.default_max_rounds > settings.max_rounds_limit:
        raise ConfigError(
            f"DEFAULT_MAX_ROUNDS ({settings.default_max_rounds}) is above "
            f"MAX_ROUNDS_LIMIT ({settings.max_rounds_limit})"
        )
    return settings
