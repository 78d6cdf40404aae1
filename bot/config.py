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
    user_rate_limit_per_minute: int = 20  # 0: no limit
    group_config_admins_only: bool = True
    max_input_chars: int = 4000
    session_ttl_seconds: float = 3600
    private_progress_interval: float = 1.0  # seconds between progress edits
    group_progress_interval: float = 3.0  # groups share Telegram's stricter per-chat limit

    @property
    def file_base_url(self) -> str:
        """Where files are downloaded from: the Bot API's `/file/bot<token>` twin."""
        return self.api_base_url.replace("/bot", "/file/bot")

    @property
    def ttl_minutes(self) -> int:
        """The idle time after which a consultation expires, as users are told it."""
        return max(round(self.session_ttl_seconds / 60), 1)
