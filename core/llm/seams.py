"""Where a continuation meets the answer it continues, when it restarts instead.

Asked to continue a cut-off answer, a model sometimes restarts: it opens with a phrase
("Sure! Here's the continuation:", "I'm happy to continue.", "Конечно, продолжаю:") and
begins a new sentence or block, although the answer stopped mid-sentence. The opening
phrase is not part of the answer, and the new sentence must not be glued to the last word.

Invariants: only a whole opening phrase from `RESTART_OPENERS` at the very start of a
fragment, ended by punctuation or a line break, is dropped (optionally after an
interjection from `INTERJECTIONS`; an interjection alone only with "!"), so a sentence that
merely starts with such a word is kept; `join` adds only whitespace, never drops a
character. Pure: no I/O.
"""

from __future__ import annotations

import re

INTERJECTIONS = (
    "sure",
    "certainly",
    "of course",
    "okay",
    "ok",
    "alright",
    "absolutely",
    "конечно",
    "хорошо",
    "разумеется",
    "да",
)
"""Words that may come before an opening phrase; alone they are dropped only with '!'."""

RESTART_OPENERS = (
    r"here(?:'s| is) (?:the )?(?:rest|continuation)(?: of (?:the|my) (?:answer|response|reply"
    r"|text|plan|list))?",
    r"i(?:'m| am) (?:happy|glad) to continue",
    r"(?:i(?:'ll| will)|let me|let's|i can) continue(?: from where (?:i|we) (?:left off|stopped))?",
    r"continuing(?: from where (?:i|we) (?:left off|stopped))?",
    r"(?:picking up|continuing on) where (?:i|we) left off",
    r"to continue",
    r"(?:вот )?продолжение(?: ответа)?",
    r"продолжаю(?: с того места, где (?:я )?останови(?:лся|лась))?",
    r"продолжу|продолжим",
)
"""Opening phrases of a restarted continuation (lower case, apostrophes as "'"), each
ended by punctuation or a line break to count."""

BLOCK_START = re.compile(r"(?:#{1,6} |[-*+] |\d{1,3}[.)] |\||>|```)")
"""A fragment starting a Markdown block goes on a new paragraph."""

_END = r"(?:[.:!…]+[ \t]*\n*|[ \t]*\n+)\s*"
_OPENER = re.compile(
    rf"\A\s*(?:(?:{'|'.join(INTERJECTIONS)})[,!.]?\s+)?(?:{'|'.join(RESTART_OPENERS)}){_END}"
    rf"|\A\s*(?:{'|'.join(INTERJECTIONS)})!+\s+",
    re.IGNORECASE,
)
_WORD_END = re.compile(r"[\w.!?:;,)\]»\"'*_`]\Z")


def drop_opener(fragment: str) -> str:
    """`fragment` without a restart's opening phrase (unchanged when it has none; empty
    when it is nothing else)."""
    match = _OPENER.match(fragment.replace("’", "'"))
    return fragment if match is None else fragment[match.end() :]


def join(text: str, fragment: str) -> str:
    """`text` + `fragment`, with a space or a paragraph break when the fragment starts a
    new sentence or block after a word (a restart); glued otherwise (a continuation may
    start mid-word)."""
    if not text or not fragment or text[-1].isspace() or fragment[0].isspace():
        return text + fragment
    if not _WORD_END.search(text):
        return text + fragment
    if BLOCK_START.match(fragment):
        return text + "\n\n" + fragment
    if _starts_sentence(fragment) and not text[-1].isupper():
        return text + " " + fragment
    return text + fragment


def _starts_sentence(fragment: str) -> bool:
    """A capital letter followed by a lower-case letter, an apostrophe or a space ("The",
    "I'm", "I will", "Еженедельно"): not the rest of an acronym ("NA" + "SA")."""
    if len(fragment) < 2 or not fragment[0].isupper():
        return False
    second = fragment[1]
    return second.islower() or second in "' "
