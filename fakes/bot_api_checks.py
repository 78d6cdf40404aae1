"""Telegram's own checks on message text, as the fake Bot API applies them.

Invariant: a text that passes here passes the real Bot API's length and entity checks; the
HTML and MarkdownV2 checks are rough (tag balance, unescaped reserved characters) but return the
same error wording Telegram uses, so code matching on it is exercised.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any

MAX_TEXT = 4096
ENTITY_TYPES = frozenset(
    ("mention", "hashtag", "cashtag", "bot_command", "url", "email", "phone_number", "bold",
     "italic", "underline", "strikethrough", "spoiler", "blockquote", "expandable_blockquote",
     "code", "pre", "text_link", "text_mention", "custom_emoji", "date_time")
)  # fmt: skip
HTML_TAGS = frozenset(
    ("b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a",
     "code", "pre", "blockquote", "tg-emoji", "tg-time")
)  # fmt: skip
_MDV2_RESERVED = re.compile(r"(?<!\\)(?:\\\\)*([_*\[\]()~`>#+\-=|{}.!])")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, Telegram's unit for lengths and offsets."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def check_text(text: Any, entities: Any, parse_mode: Any) -> str | None:
    """Telegram's error description for this message text, or None when it is accepted."""
    if not isinstance(text, str):
        return "Bad Request: message text is empty"
    visible = text
    if parse_mode and not entities:
        mode = str(parse_mode).lower()
        problem, visible = (
            _check_html(text) if mode == "html" else _check_mdv2(text) if mode == "markdownv2"
            else (None, text)
        )  # fmt: skip
        if problem:
            return f"Bad Request: can't parse entities: {problem}"
    if not visible.strip():
        return "Bad Request: message text is empty"
    size = utf16_len(visible)
    if size > MAX_TEXT:
        return "Bad Request: message is too long"
    for i, ent in enumerate(entities or []):
        problem = _check_entity(ent, size)
        if problem:
            return f"Bad Request: can't parse entities: {problem} in entity {i}"
    return None


def _check_entity(ent: Any, size: int) -> str | None:
    if not isinstance(ent, dict) or ent.get("type") not in ENTITY_TYPES:
        return "unsupported entity type"
    offset, length = ent.get("offset"), ent.get("length")
    if not isinstance(offset, int) or not isinstance(length, int) or offset < 0 or length <= 0:
        return "wrong entity offset or length"
    if offset + length > size:
        return f"entity end {offset + length} is out of the text of length {size}"
    if ent["type"] == "text_link" and not re.match(
        r"(?:https?|tg|ftp|mailto):\S+$", str(ent.get("url") or ""), re.IGNORECASE
    ):
        return "wrong HTTP URL"
    return None


class _TagChecker(HTMLParser):
    """Collects the first markup error and the text Telegram would show."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.error: str | None = None
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in HTML_TAGS:
            self.error = self.error or f'Unsupported start tag "{tag}"'
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.error = self.error or f'Unexpected end tag "{tag}"'
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _check_html(text: str) -> tuple[str | None, str]:
    checker = _TagChecker()
    checker.feed(text)
    checker.close()
    if checker.error is None and checker.stack:
        checker.error = f'Can\'t find end tag corresponding to start tag "{checker.stack[-1]}"'
    if checker.error is None and re.search(r"<(?![a-zA-Z/])|&(?!#?\w+;)", text):
        checker.error = "Unsupported start tag or unescaped character"
    return checker.error, html.unescape("".join(checker.parts))


def _check_mdv2(text: str) -> tuple[str | None, str]:
    # rough: a reserved character outside paired formatting must be escaped
    stripped = re.sub(r"```.*?```|`[^`\n]*`|\*[^*\n]+\*|_[^_\n]+_|~[^~\n]+~|\|\|.+?\|\|", "", text)
    stripped = re.sub(r"\[[^\]\n]*\]\([^)\n]*\)", "", stripped)
    match = _MDV2_RESERVED.search(stripped)
    if match:
        char = match.group(1)
        return f"Character '{char}' is reserved and must be escaped with the preceding '\\'", text
    return None, re.sub(r"\\(.)", r"\1", text)
