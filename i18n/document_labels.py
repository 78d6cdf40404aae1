"""The exported document's labels in a person's interface language, from the catalogs.

Invariant: each label is the catalog's message (`i18n.messages` `document_*`, and the
knowledge-base sources' heading and page, and the tools' heading and failure mark, as the
bot's messages word them), so a document reads in the same language, and with the same
words, as the bot's messages; a
right-to-left language's placeholders come isolated (`i18n.translate`), so the date and the
numbers core puts in them keep their direction. Imports nothing of Telegram: the HTTP
API and the terminal are given these labels too.
"""

from __future__ import annotations

from core.turns.transcript import TranscriptLabels, TranscriptLanguages
from i18n.languages import LANGUAGES
from i18n.translate import t


def document_labels(language: str) -> TranscriptLabels:
    """The labels in `language` (English for a language without a catalog)."""
    # A placeholder formatted as itself stays for core to fill (`TranscriptLabels`).
    return TranscriptLabels(
        date=t(language, "document_date", date="{date}"),
        request=t(language, "document_request"),
        round=t(language, "document_round", number="{number}"),
        questions=t(language, "document_questions"),
        answer=t(language, "document_answer"),
        not_answered=t(language, "document_not_answered"),
        final=t(language, "document_final"),
        untitled=t(language, "document_untitled"),
        follow_ups=t(language, "document_follow_ups"),
        follow_up=t(language, "document_follow_up", number="{number}"),
        knowledge_sources=t(language, "knowledge_sources"),
        page=t(language, "knowledge_page", page="{page}"),
        tools_used=t(language, "tools_used"),
        tool_failed=t(language, "tool_failed", call="{call}"),
    )


DOCUMENT_LANGUAGES = TranscriptLanguages(LANGUAGES, document_labels)
"""Every offered interface language, for an edge that picks the reader's language itself."""
