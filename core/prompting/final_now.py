"""The "final answer now" request, in the user's language, and the language to answer in.

The request is stored as the user's message when someone asks for the final answer without
typing anything (/answer, the button, the terminal). Its text comes from the template
`final_now_request`, or `final_now_request.<code>` where one exists for the user's
language (each is declared in `core.prompting.prompts.TEMPLATE_VARIABLES`, so `check()` renders it
at start-up). Detecting the user's language leaves these requests out: they were written
by the bot, and one in English must not make a Russian conversation look English.
"""

from __future__ import annotations

from core.domain.consultation import Consultation, Role
from core.prompting.language import written_language
from core.prompting.prompts import TEMPLATE_VARIABLES, PromptLibrary

TEMPLATE = "final_now_request"
DEFAULT_LANGUAGE = "en"


def request_template(language: str) -> str:
    """The template of the request in `language`; the default one (English) otherwise."""
    localized = f"{TEMPLATE}.{language}"
    return localized if localized in TEMPLATE_VARIABLES else TEMPLATE


def request_text(prompts: PromptLibrary, language: str | None) -> str:
    return prompts.render(request_template(language or DEFAULT_LANGUAGE))


def user_language(consultation: Consultation, prompts: PromptLibrary) -> str | None:
    """The code of the language of the user's own messages, when it can be told."""
    automatic = {
        prompts.render(name)
        for name in TEMPLATE_VARIABLES
        if name == TEMPLATE or name.startswith(TEMPLATE + ".")
    }
    return written_language(
        m.text for m in consultation.messages if m.role is Role.USER and m.text not in automatic
    )
