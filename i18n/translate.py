"""Interface strings in a person's language, from the gettext catalogs in `i18n/locales`.

`t(language, key, **values)` looks up the English message named `key` (`i18n.messages`)
in the language's catalog and formats it with `values`; a plural message picks its form
with ngettext by the language's plural rule. A message a catalog lacks, leaves empty or
marks fuzzy reads in English, so a partial catalog never shows a blank.

Translators edit `.po` files; `make messages` compiles each to the `.mo` beside it
(`i18n.catalogs`), and the bot reads the `.mo` with the standard library's
`gettext.GNUTranslations` the first time its language is used, and keeps it. Text wanted
once in every language (the command menus set at start-up, the follow-up prompt a reply
is recognised by) is read from catalogs not otherwise in use and not kept, so the process
holds only the catalogs of the languages its people use (about 75 KB each). Both ship as
package data and are committed, so a clone, the wheel and the container image read the
same catalogs, and the running process needs neither Babel nor a `.po` parser.

In right-to-left languages every placeholder, @mention and /command (with the Latin
arguments that follow it, as in `/rounds N` or `/memory off`) is wrapped in Unicode
isolates (FSI…PDI): a number, command or Latin name inside Arabic or Persian text then
keeps its own direction instead of scrambling the sentence around it, and a command reads
in the order it is typed.
"""

from __future__ import annotations

import gettext
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from i18n.languages import CATALOGS, RIGHT_TO_LEFT, SOURCE
from i18n.messages import MESSAGES, Plural

LOCALES = Path(__file__).resolve().parent / "locales"
DOMAIN = "messages"

COMMANDS: tuple[str, ...] = (
    "start", "help", "rounds", "answer", "reset", "status", "retry", "role", "model",
    "memory", "usage", "forget", "history", "export", "language",
)  # fmt: skip
"""The command menu, in order; each command's description is the message `command_<name>`."""
PAYMENT_COMMANDS: tuple[str, ...] = ("plans", "paysupport", "terms")
"""Added at the end of the menu when the bot sells plans (PLANS): Telegram asks bots that
take payments to offer /paysupport and /terms. /refund is an operator's and the menus are
everyone's, so it is in none."""

FSI, PDI = "\u2068", "\u2069"
_ISOLATED = re.compile(
    r"@?\{[^{}]*\}"  # a placeholder, @{username} included
    r"|(?<![A-Za-z0-9_])@[A-Za-z0-9_]+"  # a literal @mention such as @BotFather
    r"|(?<![A-Za-z0-9_/])/[a-z_]+(?: [A-Za-z0-9|\[\]]+)*"  # a /command and its arguments
)
"""What keeps its own direction in right-to-left text. A command takes the Latin words,
digits and `[N]`/`off|on` syntax after it, so `/rounds N` is one left-to-right unit (apart,
the bidi algorithm would show it as `N /rounds`). The lookbehinds are ASCII-only: Latin
`and/or` is no command, but an Arabic conjunction written onto a command (`و/memory`) is."""


def t(language: str, key: str, /, **values: Any) -> str:
    """The message `key` in `language` (English when it has no translation), formatted."""
    return _formatted(translations_of(language), language, key, values)


def texts_once(language: str, keys: Iterable[str]) -> list[str]:
    """The messages `keys`, which take no values, in `language` as `t` gives them, read
    from the language's catalog without keeping it when `t` has not loaded it."""
    translations = _passing(language)
    return [_formatted(translations, language, key, {}) for key in keys]


def _formatted(
    translations: gettext.NullTranslations, language: str, key: str, values: dict[str, Any]
) -> str:
    message = MESSAGES[key]
    if isinstance(message, Plural):
        text = translations.ngettext(message.singular, message.plural, _count(values, message))
    else:
        text = translations.gettext(message)
    if language in RIGHT_TO_LEFT:
        text = _ISOLATED.sub(_isolated, text)
    return text.format(**values)


def _isolated(match: re.Match[str]) -> str:
    """The match wrapped in FSI…PDI, except a placeholder on lines of its own (a list such
    as the remembered facts): an isolate ends at a line break, and a line that is all
    isolate reads left-to-right, so each line of such a value is left to take its
    direction from its own text."""
    text, start, end = match.string, match.start(), match.end()
    alone = text[start - 1 : start] in ("", "\n") and text[end : end + 1] in ("", "\n")
    if alone and match.group(0).startswith("{"):
        return match.group(0)
    return FSI + match.group(0) + PDI


def every_translation(key: str) -> frozenset[str]:
    """The unformatted message `key` in every catalog's language (English included)."""
    message = MESSAGES[key]
    assert isinstance(message, str), key
    return frozenset(_passing(language).gettext(message) for language in CATALOGS)


def mo_path(language: str) -> Path:
    """The compiled catalog the bot reads (`make messages` writes it from the `.po`)."""
    return LOCALES / language / "LC_MESSAGES" / f"{DOMAIN}.mo"


_ENGLISH = gettext.NullTranslations()
_kept: dict[str, gettext.NullTranslations] = {}
"""The catalogs `t` loaded: the languages in use, each read once."""


def translations_of(language: str) -> gettext.NullTranslations:
    """The language's compiled catalog, read once and kept; plain English for the source
    or an unknown code."""
    kept = _kept.get(language)
    if kept is None:
        kept = _read(language)
        if language in CATALOGS:
            kept = _kept.setdefault(language, kept)
    return kept


def _passing(language: str) -> gettext.NullTranslations:
    """The language's catalog for one use: the kept one, or one read now and not kept."""
    return _kept.get(language) or _read(language)


def _read(language: str) -> gettext.NullTranslations:
    if language == SOURCE or language not in CATALOGS:
        return _ENGLISH
    with mo_path(language).open("rb") as file:
        return gettext.GNUTranslations(file)


def _count(values: dict[str, Any], message: Plural) -> int:
    count = values[message.count]
    return count if isinstance(count, int) else int(str(count))
