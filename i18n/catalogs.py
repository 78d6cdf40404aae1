"""The translators' `.po` catalogs compiled to the `.mo` files the bot reads.

A build step, run by `make messages` (`python -m i18n.catalogs`) and never by the bot:
reading `.po` needs Babel, which the running process then neither imports nor parses
with. The `.mo` files are committed beside their `.po`, so a clone, the wheel and the
container image carry them; `tests/i18n/test_i18n.py` fails while one differs from its `.po`.

A message left empty (any plural form included) or marked fuzzy is left out of the
`.mo`, so it reads in English: a partial catalog never shows a blank or a guess.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from i18n.languages import CATALOGS, SOURCE
from i18n.translate import DOMAIN, LOCALES, mo_path


def catalog_path(language: str) -> Path:
    return LOCALES / language / "LC_MESSAGES" / f"{DOMAIN}.po"


def read_catalog(language: str) -> Catalog:
    with catalog_path(language).open("rb") as file:
        return read_po(file, locale=language, domain=DOMAIN)


def compiled(catalog: Catalog) -> bytes:
    """`catalog` as a `.mo` file, without its untranslated or fuzzy messages."""
    for message in list(catalog):
        if message.id and not is_translated(message.string):
            del catalog[message.id]
    mo = io.BytesIO()
    write_mo(mo, catalog)  # fuzzy messages are left out
    return mo.getvalue()


def is_translated(string: str | tuple[str, ...] | list[str] | None) -> bool:
    """Whether a catalog entry has its text: every plural form for a plural message."""
    if string is None or isinstance(string, str):
        return bool(string)
    return bool(string) and all(string)


def compile_all() -> list[Path]:
    """Write every language's `.mo` from its `.po`; the paths written."""
    written = []
    for language in CATALOGS:
        if language != SOURCE:
            path = mo_path(language)
            path.write_bytes(compiled(read_catalog(language)))
            written.append(path)
    return written


if __name__ == "__main__":
    paths = compile_all()
    print(f"compiled {len(paths)} catalogs", file=sys.stderr)
