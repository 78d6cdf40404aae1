"""The interface languages: which exist, which are complete, and which one a person gets.

`CATALOGS` lists every language with a catalog in `i18n/locales`; `LANGUAGES` those whose
catalog is fully translated: only these are offered (/language, the command menus) and
picked from a Telegram `language_code`. A translator who fills a catalog adds its code
to `LANGUAGES` (docs/languages.md); the catalog tests then hold it to every message.
"""

from __future__ import annotations

SOURCE = "en"
"""The language the messages are written in (the msgids): it needs no catalog."""

LANGUAGES: tuple[str, ...] = (
    "en", "ru", "uk", "de", "es", "pt_BR", "it", "fr", "tr", "id", "ja", "zh_Hans", "fa", "ar",
)  # fmt: skip
"""The complete languages, in the order /language shows them."""

CATALOGS: tuple[str, ...] = (
    "en", "ru", "uk", "es", "pt_BR", "de", "fr", "it", "tr", "id", "fa", "ar", "ja", "zh_Hans",
)  # fmt: skip
"""Every language with a catalog (English is the source), complete or not."""

NATIVE_NAMES: dict[str, str] = {
    "en": "English",
    "ru": "Русский",
    "uk": "Українська",
    "es": "Español",
    "pt_BR": "Português (Brasil)",
    "de": "Deutsch",
    "fr": "Français",
    "it": "Italiano",
    "tr": "Türkçe",
    "id": "Bahasa Indonesia",
    "fa": "فارسی",
    "ar": "العربية",
    "ja": "日本語",
    "zh_Hans": "简体中文",
}
"""Each language's name in itself: what its button on /language says."""

RIGHT_TO_LEFT = frozenset({"ar", "fa"})

_BY_TELEGRAM_BASE = {"pt": "pt_BR", "zh": "zh_Hans"}
"""Base codes whose catalog carries a region or script (any `pt-*`, any `zh-*`)."""


def language_for(code: str | None, offered: tuple[str, ...] = LANGUAGES) -> str:
    """The offered language for a Telegram `language_code` (an IETF tag such as `en`,
    `pt-br`, `zh-hans`, `de-AT`): region and script variants map to their base language;
    anything else, or nothing, to English."""
    base = (code or "").strip().lower().replace("_", "-").split("-")[0]
    language = _BY_TELEGRAM_BASE.get(base, base)
    return language if language in offered else SOURCE


def is_offered(language: str) -> bool:
    return language in LANGUAGES


def menu_code(language: str) -> str:
    """The two-letter `language_code` Telegram's setMyCommands takes for `language`: its
    base language (`pt_BR` → `pt`, `zh_Hans` → `zh`)."""
    return language.split("_")[0]
