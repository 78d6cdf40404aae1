"""What the Telegram edge needs to know of the deployment, as one frozen value.

Built by the composition root from the deployment settings (`app.settings`), so the
bot depends on these few values and not on every setting of the process.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BotConfig:
    token: str
    api_base_url: str = "https://api.telegram.org/bot"
    webhook: bool = False  # updates arrive through the HTTP server instead of polling
    external_updates: bool = False  # updates come from the shared inbox: PTB polls nothing
    max_rate: float = 0  # overall Bot API requests per second; 0: no cap
    allowed_user_ids: frozenset[int] = frozenset()
    allowed_chat_ids: frozenset[int] = frozenset()
    admin_user_ids: frozenset[int] = frozenset()  # operators: /stats, /quota, /knowledge
    user_rate_limit_per_minute: int = 20  # 0: no limit
    button_presses_per_minute: int = 10  # per user, apart from messages; 0: no limit
    group_config_admins_only: bool = True
    max_input_chars: int = 4000
    session_ttl_seconds: float = 3600
    private_progress_interval: float = 1.0  # seconds between progress edits
    group_progress_interval: float = 3.0  # groups share Telegram's stricter per-chat limit
    file_api_url: str | None = None  # TELEGRAM_FILE_BASE_URL; None: derived from api_base_url
    download_timeout: float = 60.0  # seconds for getFile and the download of one file
    handling_deadline: float | None = None  # seconds one update may take; None: no bound
    # The bot's scope (`core.domain.telegram_keys`): 0 is TELEGRAM_BOT_TOKEN's, n the bots
    # table's bot n. Every key it builds and every Telegram-level row it keeps is of it.
    scope: int = 0
    payment_support_text: str = ""  # what /paysupport answers (PAYMENT_SUPPORT_TEXT)
    payment_terms_text: str = ""  # what /terms answers (PAYMENT_TERMS_TEXT)
    # A stored bot's interface language (its profile's `language`) in place of the one the
    # user's Telegram client names; a language chosen with /language still overrides it.
    language: str | None = None

    @property
    def file_base_url(self) -> str:
        """Where files users send are downloaded from (the token and file path follow):
        as set, else the Bot API URL with its trailing "/bot" made "/file/bot"."""
        if self.file_api_url:
            return self.file_api_url
        base = self.api_base_url.rstrip("/")
        if base.endswith("/bot"):
            return base[: -len("/bot")] + "/file/bot"
        return base + "/file/bot"

    @property
    def ttl_minutes(self) -> int:
        """The idle time after which a consultation expires, as users are told it."""
        return max(round(self.session_ttl_seconds / 60), 1)
