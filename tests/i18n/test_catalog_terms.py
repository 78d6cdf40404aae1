"""The catalogs' terminology: one word for one thing within a language, and different
words for different things. A follow-up (a question about a finished answer) is never
called a clarifying question (what the bot asks in a round), and each term is written
one way in a catalog. Read from the compiled catalogs, as a person sees them."""

from __future__ import annotations

import re

import pytest

from i18n.languages import CATALOGS, SOURCE
from i18n.messages import MESSAGES, Plural
from i18n.translate import translations_of

FOLLOW_UP_AND_CLARIFYING = {
    "ar": ("متابعة", "توضيح"),
    "de": ("nachfrage", "rückfrage"),
    "es": ("adicional", "aclar"),
    "fa": ("تکمیلی", "روشن"),
    "fr": ("complémentaire", "préci"),
    "id": ("lanjutan", "klarifikasi"),
    "it": ("aggiuntiv", "chiariment"),
    "ja": ("追加", "確認"),
    "pt_BR": ("adiciona", "esclarec"),
    "ru": ("дополнительн", "уточня"),
    "tr": ("ek soru", "netleştir"),
    "uk": ("додатков", "уточню"),
    "zh_Hans": ("追问", "澄清"),
}
"""Per language, the stem every follow-up message uses and the one every message about
clarifying questions uses."""

NEVER = {
    "de": ("umschreib",),  # "transcribe" is transkribieren; umschreiben is "rewrite"
    "es": ("costo",),  # the catalog says "coste"
    "it": ("round",),  # a round is a "turno"
}
"""Per language, words a catalog must not use: a wrong sense, or a variant of a term it
writes another way."""


NOT_WORDS = re.compile(r"\{\w+\}|/\w+")
"""Placeholders and commands (`{rounds}`, `/rounds`): not words of the language."""


def shown(language: str, key: str) -> list[str]:
    """Every text a person may see for `key` (each plural form), lower-cased, without
    placeholders and commands."""
    message = MESSAGES[key]
    translations = translations_of(language)
    if isinstance(message, Plural):
        texts = [translations.ngettext(message.singular, message.plural, n) for n in (1, 2, 5)]
    else:
        texts = [translations.gettext(message)]
    return [NOT_WORDS.sub(" ", text).lower() for text in texts]


def english(key: str) -> str:
    message = MESSAGES[key]
    return (message.singular if isinstance(message, Plural) else message).lower()


FOLLOW_UP_KEYS = [key for key in MESSAGES if "follow-up" in english(key)]
CLARIFYING_KEYS = [key for key in MESSAGES if "clarifying" in english(key)]


def test_the_terms_are_pinned_for_every_catalog() -> None:
    assert set(FOLLOW_UP_AND_CLARIFYING) == set(CATALOGS) - {SOURCE}
    assert len(FOLLOW_UP_KEYS) >= 10 and len(CLARIFYING_KEYS) >= 2


@pytest.mark.parametrize("language", sorted(FOLLOW_UP_AND_CLARIFYING))
def test_a_follow_up_is_never_called_a_clarifying_question(language: str) -> None:
    follow_up, clarifying = FOLLOW_UP_AND_CLARIFYING[language]
    wrong = []
    for key in FOLLOW_UP_KEYS:
        for text in shown(language, key):
            if follow_up not in text or clarifying in text:
                wrong.append(f"{key}: {text}")
    for key in CLARIFYING_KEYS:
        for text in shown(language, key):
            if clarifying not in text or follow_up in text:
                wrong.append(f"{key}: {text}")
    assert wrong == []


@pytest.mark.parametrize("language", sorted(NEVER))
def test_a_catalog_avoids_wrong_words_and_variants(language: str) -> None:
    found = [
        f"{key}: {text}"
        for key in MESSAGES
        for text in shown(language, key)
        for word in NEVER[language]
        if word in text
    ]
    assert found == []
