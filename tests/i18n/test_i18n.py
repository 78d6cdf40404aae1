"""The interface catalogs: complete where offered, consistent everywhere, extracted from the
code, and applied the way each language needs (plural forms, right-to-left isolates).

A language is held to every message only once it is in `i18n.languages.LANGUAGES`: a
translator fills its `.po`, adds the code there, and `pytest tests/i18n/test_i18n.py` names
every message still missing, untranslated or with other placeholders.
"""

from __future__ import annotations

import gettext
import io
import string
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog, Message
from babel.messages.pofile import read_po

from core.prompting.final_now import TEMPLATE, request_template
from core.prompting.prompts import PromptLibrary
from i18n.catalogs import compiled, read_catalog
from i18n.languages import CATALOGS, LANGUAGES, RIGHT_TO_LEFT, SOURCE, language_for, menu_code
from i18n.messages import MESSAGES, Plural
from i18n.translate import FSI, LOCALES, PDI, mo_path, t, translations_of

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_FILE = LOCALES / "messages.pot"
TRANSLATED = [code for code in CATALOGS if code != SOURCE]
COMPLETE = [code for code in LANGUAGES if code != SOURCE]

SAME_IN_EVERY_LANGUAGE = frozenset(
    {
        "OK",
        "DOCX",
        "Markdown",
        "🎤 “{text}”",
        "{value} MB",
        "{value} KB",
        "Document",
        "Document {number}",
        "Sources",
    }
)
"""Messages a translation may leave as in English: names and symbols that do not change."""


def fields(text: str) -> set[str]:
    """The `str.format` placeholders of `text`, by name."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def english(message: str | Plural) -> tuple[str, ...]:
    return (message.singular, message.plural) if isinstance(message, Plural) else (message,)


def forms(entry: Message) -> tuple[str, ...]:
    return tuple(entry.string) if isinstance(entry.string, tuple | list) else (entry.string,)


def entry_of(catalog: Catalog, message: str | Plural) -> Message | None:
    return catalog.get(message.singular if isinstance(message, Plural) else message)


# -- completeness ----------------------------------------------------------------------------


@pytest.mark.parametrize("language", COMPLETE)
def test_an_offered_language_has_every_message_translated(language: str) -> None:
    """Every message is there, not fuzzy, in every plural form the language has, with the
    placeholders of the English, and not left in English (`SAME_IN_EVERY_LANGUAGE` aside)."""
    catalog = read_catalog(language)
    problems: list[str] = []
    for key, message in MESSAGES.items():
        entry = entry_of(catalog, message)
        if entry is None:
            problems.append(f"{key}: missing (run pybabel update)")
            continue
        texts = forms(entry)
        source = english(message)
        if entry.fuzzy or not all(texts):
            problems.append(f"{key}: not translated")
            continue
        if isinstance(message, Plural) and len(texts) != catalog.num_plurals:
            problems.append(f"{key}: {len(texts)} plural forms, {catalog.num_plurals} needed")
        wanted = fields(source[-1])
        problems += [
            f"{key}: placeholders {fields(x)} ≠ {wanted}" for x in texts if fields(x) != wanted
        ]
        if set(texts) & set(source) - SAME_IN_EVERY_LANGUAGE:
            problems.append(f"{key}: still in English")
    assert problems == []


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_catalog_follows_the_template_and_keeps_placeholders(language: str) -> None:
    """Every catalog, complete or not, holds exactly the template's messages (updated
    with `pybabel update`), declares its plural rule, and whatever it translates keeps
    the English placeholders."""
    catalog = read_catalog(language)
    with TEMPLATE_FILE.open("rb") as file:
        template = read_po(file)
    assert {m.id for m in catalog if m.id} == {m.id for m in template if m.id}
    assert catalog.plural_forms and catalog.num_plurals >= 1
    for key, message in MESSAGES.items():
        entry = entry_of(catalog, message)
        assert entry is not None, key
        wanted = fields(english(message)[-1])
        for text in forms(entry):
            assert not text or fields(text) == wanted, (key, text)


def test_the_template_is_extracted_from_the_code(tmp_path: Path) -> None:
    """The checked-in `messages.pot` is what `pybabel extract` makes of the code now."""
    fresh = tmp_path / "messages.pot"
    command = [sys.executable, "-m", "babel.messages.frontend", "extract", "-F", "babel.cfg"]
    options = ["--no-location", "--project", "consultation-bot", "-o", str(fresh), "."]
    subprocess.run([*command, *options], cwd=ROOT, check=True, capture_output=True)

    def messages(path: Path) -> list[tuple[object, ...]]:
        with path.open("rb") as file:
            catalog = read_po(file)
        return [(m.id, m.flags, m.auto_comments) for m in catalog if m.id]

    assert messages(TEMPLATE_FILE) == messages(fresh), "run the extract in docs/languages.md"
    extracted = {m[0] for m in messages(fresh)}
    assert extracted == {
        (m.singular, m.plural) if isinstance(m, Plural) else m for m in MESSAGES.values()
    }


@pytest.mark.parametrize("language", TRANSLATED)
def test_the_compiled_catalog_is_its_po_file(language: str) -> None:
    """The committed `.mo` the bot reads says what its `.po` says (`make messages`
    compiles it): the same translations and the same plural rule."""
    fresh = gettext.GNUTranslations(io.BytesIO(compiled(read_catalog(language))))
    with mo_path(language).open("rb") as file:
        shipped = gettext.GNUTranslations(file)

    def messages(translations: gettext.GNUTranslations) -> dict[object, str]:
        table: dict[object, str] = translations._catalog  # type: ignore[attr-defined]
        return {key: text for key, text in table.items() if key != ""}  # "" is the header

    assert messages(shipped) == messages(fresh), "run `make messages`"
    assert [shipped.plural(n) for n in range(200)] == [fresh.plural(n) for n in range(200)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("language", CATALOGS)
def test_every_catalog_loads_with_the_standard_library(language: str) -> None:
    """Each language's catalog reads with `gettext` alone, and a complete one translates."""
    translations = translations_of(language)
    text = translations.gettext(str(MESSAGES["answer_button"]))
    assert (text != MESSAGES["answer_button"]) == (language != SOURCE)


def test_every_language_has_the_final_answer_request() -> None:
    """The "final answer now" text stored as the user's turn exists in every language."""
    library = PromptLibrary()
    texts = {library.render(request_template(code)) for code in CATALOGS}
    assert all(request_template(code) != TEMPLATE for code in TRANSLATED)
    assert len(texts) == len(CATALOGS)  # each its own


# -- lookup ----------------------------------------------------------------------------------


def test_plural_forms_follow_each_language() -> None:
    """ngettext picks the form by the language's rule: three forms in Russian."""
    assert "(1 follow-up left)" in t("en", "follow_ups_left", left=1)
    assert "(2 follow-ups left)" in t("en", "follow_ups_left", left=2)
    assert "остался 1 дополнительный вопрос" in t("ru", "follow_ups_left", left=1)
    assert "осталось 3 дополнительных вопроса" in t("ru", "follow_ups_left", left=3)
    assert "осталось 5 дополнительных вопросов" in t("ru", "follow_ups_left", left=5)
    assert "осталось 11 дополнительных вопросов" in t("ru", "follow_ups_left", left=11)
    assert "остался 21 дополнительный вопрос" in t("ru", "follow_ups_left", left=21)


def test_untranslated_and_fuzzy_messages_read_in_english() -> None:
    """A partial catalog never shows a blank or a guess: what it lacks is English."""
    catalog = Catalog(locale="de")
    catalog.add("Final answer", "Endgültige Antwort")
    catalog.add("Sources", "")
    catalog.add("Cancel", "Vielleicht", flags=["fuzzy"])
    catalog.add(("Answer {number}", "Answers {number}"), ("Antwort {number}", ""))
    translations = gettext.GNUTranslations(io.BytesIO(compiled(catalog)))
    assert translations.gettext("Final answer") == "Endgültige Antwort"
    assert translations.gettext("Sources") == "Sources"
    assert translations.gettext("Cancel") == "Cancel"
    assert translations.ngettext("Answer {number}", "Answers {number}", 1) == "Answer {number}"


def test_an_unknown_language_reads_in_english() -> None:
    assert t("xx", "round_label", round=1, max_rounds=3) == "Round 1 of 3"
    assert t("ru", "round_label", round=2, max_rounds=3) == "Раунд 2 из 3"


@pytest.mark.parametrize("language", sorted(RIGHT_TO_LEFT))
def test_right_to_left_text_isolates_numbers_commands_and_names(language: str) -> None:
    """In Arabic and Persian each placeholder, @mention and /command keeps its own
    direction (FSI…PDI), so a number or Latin name cannot scramble the sentence."""
    label = t(language, "round_label", round=2, max_rounds=3)
    assert f"{FSI}2{PDI}" in label and f"{FSI}3{PDI}" in label
    start = t(language, "start", rounds=3)
    assert f"{FSI}/rounds{PDI}" in start and f"{FSI}/help{PDI}" in start
    assert f"{FSI}@consult_bot{PDI}" in t(language, "privacy_note", username="consult_bot")
    assert f"{FSI}gpt-4o{PDI}" in t(language, "model_set", model="gpt-4o")


@pytest.mark.parametrize("language", sorted(RIGHT_TO_LEFT))
def test_right_to_left_text_keeps_commands_with_arguments_and_named_bots_whole(
    language: str,
) -> None:
    """`/rounds N` is one left-to-right unit: isolating only `/rounds` would show it as
    `N /rounds` in Arabic or Persian. A literal @mention such as @BotFather is isolated
    like `@{username}`, so its @ stays in front."""
    assert f"{FSI}/rounds N{PDI}" in t(language, "rounds_show", rounds=3, limit=10)
    assert f"{FSI}/rounds 3{PDI}" in t(language, "rounds_invalid", value="x", limit=10)
    assert f"{FSI}/export N{PDI}" in t(language, "export_usage")
    assert f"{FSI}/memory off|on{PDI}" in t(language, "help", limit=10, rounds=3, username="b")
    usage = t(language, "memory_usage")
    assert f"{FSI}/memory off{PDI}" in usage and f"{FSI}/memory on{PDI}" in usage
    privacy = t(language, "privacy_note", username="consult_bot")
    assert f"{FSI}@BotFather{PDI}" in privacy and f"{FSI}@consult_bot{PDI}" in privacy


@pytest.mark.parametrize("language", sorted(RIGHT_TO_LEFT))
@pytest.mark.parametrize("value", ["/reset now", "@someone", "{rounds}", "{", "x" * 5000])
def test_right_to_left_isolates_a_value_whole_and_never_reads_into_it(
    language: str, value: str
) -> None:
    """What a person wrote (a transcript, a request) is wrapped once, as it is: a command,
    @mention or brace inside it is neither isolated again nor formatted."""
    assert f"«{FSI}{value}{PDI}»" in t(language, "heard", text=value)


@pytest.mark.parametrize("language", sorted(RIGHT_TO_LEFT))
def test_right_to_left_list_on_lines_of_its_own_is_not_isolated(language: str) -> None:
    """An isolate cannot span lines: a list standing on its own lines (the remembered
    facts) is left bare, so each of its lines takes its direction from its own text
    instead of the first reading left-to-right; the sentence around it keeps its isolates."""
    facts = "1. کاربر در تهران زندگی می‌کند\n2. Works in Python"
    text = t(language, "memory_list", where=t(language, "memory_in_group"), facts=facts)
    assert f"\n\n{facts}\n\n" in text
    assert f"{FSI}/memory off{PDI}" in text and text.count(FSI) == text.count(PDI) == 2


def test_left_to_right_text_has_no_isolates() -> None:
    for language in ("en", "ru"):
        text = t(language, "start", rounds=3) + t(language, "model_set", model="gpt-4o")
        assert FSI not in text and PDI not in text


# -- which language a person gets --------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("en", "en"),
        ("en-GB", "en"),
        ("ru", "ru"),
        ("ru-RU", "ru"),
        ("de", "de"),
        ("de-AT", "de"),
        ("pt", "pt_BR"),
        ("pt-br", "pt_BR"),
        ("pt-PT", "pt_BR"),
        ("zh-hans", "zh_Hans"),
        ("zh-hant", "zh_Hans"),
        ("zh", "zh_Hans"),
        ("fa", "fa"),
        ("uk", "uk"),
        ("be", "en"),
        ("xx", "en"),
        ("", "en"),
        (None, "en"),
        ("x" * 10_000, "en"),
    ],
)
def test_a_telegram_code_maps_to_its_base_language(code: str | None, language: str) -> None:
    """Region and script variants map to the base language's catalog; unknown: English."""
    assert language_for(code, offered=CATALOGS) == language


@pytest.mark.parametrize("code", [c for c in CATALOGS if c != SOURCE])
def test_a_language_not_offered_is_not_picked(code: str) -> None:
    """A catalog still being translated (not among the offered) is not picked from a
    Telegram code: the person gets English."""
    offered = tuple(language for language in LANGUAGES if language != code)
    assert language_for(menu_code(code), offered=offered) == SOURCE


@pytest.mark.parametrize("language", LANGUAGES)
def test_an_offered_language_is_picked_from_its_telegram_code(language: str) -> None:
    assert language_for(menu_code(language)) == language
    assert language_for(menu_code(language).upper() + "-XX") == language
