"""Prompt templates and the system prompt of each round.

Invariants: prompt text lives only in Mustache files (never in code); values are
substituted verbatim (no HTML escaping) and never interpreted as Mustache, so user
text such as ``{{x}}`` reaches the model unchanged; a template that names a
variable the caller did not pass raises `PromptError` instead of rendering blank.

The user's original request, repeated in the final round's system prompt, is quoted
line by line (every line starts with "> ", between delimiter lines the templates
name), so no text of the user's can stand as a line of instructions; past
`PromptContext.request_budget_chars` only its beginning and end are repeated, around
the `excerpt_note` template. Its documents are not repeated: each stands as its
reference by name (`core.domain.attachments.without_document_bodies`), and the
`request_documents` note says where their text is. The early-finish marker the
`early_finish` template names is `core.prompting.early_finish.EARLY_FINISH_MARKER`.

Knowledge-base excerpts are quoted the same way (`knowledge_excerpts`): every line of a
passage's text starts with "> " and its title and heading path are one line each, so
nothing a passage holds (the section's closing line, a forged `[K2]` heading, "ignore
your instructions") can stand outside the section or as a line of instructions.

Role files (``roles/<key>.mustache``) may start with a comment ``{{! title: ... }}``
giving the short title shown in the /role menu; the key (file stem) is the fallback.
Partials (``{{>name}}``) resolve to the library's own templates, never to other files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pystache
from pystache.common import PystacheError
from pystache.context import KeyNotFoundError
from pystache.parsed import ParsedTemplate
from pystache.parser import ParsingError

from core.domain.attachments import document_names, without_document_bodies
from core.domain.clarifying import MAX_OPTION_CHARS, MAX_OPTIONS, MAX_QUESTIONS
from core.domain.facts import MAX_FACTS
from core.domain.knowledge import Passage
from core.domain.knowledge_sources import label, one_line
from core.domain.tools import ToolUse
from core.prompting.context import Omissions
from core.prompting.early_finish import EARLY_FINISH_MARKER
from core.prompting.excerpt import split_excerpt
from core.prompting.render_cache import RenderCache, template_names
from prompts import DEFAULT_PROMPTS_DIR

CONTINUATION_TAIL_CHARS = 300
"""How much of a cut-off answer's end the continuation request quotes."""
TOOL_HISTORY_RESULT_CHARS = 600
"""How much of an earlier reply's tool result later calls are sent (one line)."""
TOOL_HISTORY_ARGUMENT_CHARS = 200
"""How much of its arguments."""
DEFAULT_ROLE = "expert"
SUFFIX = ".mustache"
ROLES_SUBDIR = "roles"

# Every template the engine uses, with the variables it is rendered with. check()
# renders each with exactly these, so an operator template naming anything else
# fails at start-up rather than in the middle of a consultation.
_SYSTEM_VARS = (
    "round",
    "max_rounds",
    "remaining",
    "initial_request",
    "marker",
    "max_questions",
    "max_options",
    "max_option_chars",
)
TEMPLATE_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "system_base": _SYSTEM_VARS,
    "round_context": _SYSTEM_VARS,
    "round_questions": _SYSTEM_VARS,
    "early_finish": _SYSTEM_VARS,
    "final_round": _SYSTEM_VARS,
    "final_ready": _SYSTEM_VARS,
    "final_brief": (),
    "final_requested": (*_SYSTEM_VARS, "language"),
    "follow_up": (*_SYSTEM_VARS, "language"),
    "user_request": _SYSTEM_VARS,
    "group_context": _SYSTEM_VARS,
    "json_output": ("schema",),
    "continuation": ("answer_tail",),
    "omission_note": ("omitted", "omitted_replies", "omitted_messages", "shortened"),
    "named_documents_note": ("omitted",),
    "request_documents": (),
    "excerpt_note": ("omitted_chars",),
    "images_not_seen": (),
    "knowledge_round": (),
    "knowledge_answer": (),
    "knowledge_excerpts": ("excerpts",),
    "knowledge_none": (),
    "tools_data": (),
    "knowledge_tool": (),
    "tools_answer_now": (),
    "tool_uses": ("uses",),
    "final_now_request": (),
    # The same request in each interface language (`.<code>`, the codes of i18n/locales).
    "final_now_request.ru": (),
    "final_now_request.uk": (),
    "final_now_request.es": (),
    "final_now_request.pt_BR": (),
    "final_now_request.de": (),
    "final_now_request.fr": (),
    "final_now_request.it": (),
    "final_now_request.tr": (),
    "final_now_request.id": (),
    "final_now_request.fa": (),
    "final_now_request.ar": (),
    "final_now_request.ja": (),
    "final_now_request.zh_Hans": (),
    "client_memory": ("facts",),
    "extract_facts": ("max_facts", "known", "facts", "structured"),
}
_SAMPLE_VALUES: Mapping[str, Any] = {
    "round": 2,
    "max_rounds": 3,
    "remaining": 1,
    "initial_request": 'Sample "request" {{x}}',
    "marker": EARLY_FINISH_MARKER,
    "max_questions": MAX_QUESTIONS,
    "max_options": MAX_OPTIONS,
    "max_option_chars": MAX_OPTION_CHARS,
    "language": "Russian",
    "schema": '{"type": "object"}',
    "omitted": 4,
    "omitted_replies": 3,
    "omitted_messages": 1,
    "shortened": 2,
    "named_documents": 1,
    "omitted_chars": "12,345",
    "answer_tail": "…the last characters of {{the}} answer so far",
    "facts": ["Lives in {{Riga}}", "Has two children"],
    "known": True,
    "max_facts": 20,
    "structured": True,
    "uses": [
        {"name": "time__now", "arguments": '{"tz": "{{UTC}}"}', "result": "12:00", "error": ""},
        {"name": "docs__read", "arguments": "{}", "result": "", "error": "timed out"},
    ],
    "excerpts": [
        {
            "label": "K1",
            "title": "Warranty {{terms}}",
            "section": "Kettles",
            "page": 3,
            "text": "> Two years.",
        },
        {"label": "K2", "title": "FAQ", "section": "", "page": None, "text": "> Yes."},
    ],
}

_TITLE_RE = re.compile(r"\A\s*\{\{!\s*title:\s*(?P<title>.*?)\s*\}\}")


class PromptError(Exception):
    """A template is missing, malformed, or names a variable nobody passed."""

    def __init__(self, template: str, message: str, variable: str | None = None) -> None:
        super().__init__(f"prompt template {template!r}: {message}")
        self.template = template
        self.variable = variable


@dataclass(frozen=True, slots=True)
class RoleInfo:
    key: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class _Template:
    name: str
    path: Path
    source: str
    parsed: ParsedTemplate


class PromptLibrary:
    """Templates loaded once: the operator's folder file by file over the defaults."""

    def __init__(self, folder: Path | None = None) -> None:
        if folder is not None and not folder.is_dir():
            raise PromptError(str(folder), "the prompts folder does not exist")
        self._templates = _load_dir(DEFAULT_PROMPTS_DIR, folder)
        self._roles = _load_dir(DEFAULT_PROMPTS_DIR / ROLES_SUBDIR, _sub(folder))
        # Partials resolve to our own templates only, never to files in the cwd.
        partials = {name: t.source for name, t in self._templates.items()}
        self._renderer = pystache.Renderer(
            missing_tags="strict", escape=lambda s: s, partials=partials
        )
        self._role_info: dict[str, RoleInfo] | None = None
        self._rendered = RenderCache()
        self._names = {
            name: template_names(t.parsed, self._parsed_partial)
            for name, t in self._templates.items()
        }

    def _parsed_partial(self, name: str) -> ParsedTemplate | None:
        template = self._templates.get(name)
        return None if template is None else template.parsed

    def render(self, name: str, **values: Any) -> str:
        """Render template `name`; a tag with no value raises PromptError naming it. A
        render is kept by the values the template reads (`core.prompting.render_cache`)."""
        template = self._templates.get(name)
        if template is None:
            raise PromptError(name, "no such template")
        key = self._rendered.key(name, self._names[name], values)
        text = self._rendered.get(key)
        if text is None:
            text = self._render(template, values)
            self._rendered.keep(key, text)
        return text

    def excerpt_note(self, omitted_chars: int) -> str:
        """The note standing for `omitted_chars` characters left out of a long text."""
        return self.render("excerpt_note", omitted_chars=f"{omitted_chars:,}")

    def omission_note(self, omitted: Omissions) -> str:
        """The note saying what the context window left out, shortened or named only."""
        note = self.render(
            "omission_note",
            omitted=omitted.left_out,
            omitted_replies=omitted.replies,
            omitted_messages=omitted.messages,
            shortened=omitted.shortened,
        )
        if omitted.documents:
            note += " " + self.render("named_documents_note", omitted=omitted.documents)
        return note

    @property
    def images_not_seen(self) -> str:
        """The note for a round whose images the model could not take."""
        return self.render("images_not_seen")

    @property
    def knowledge_none(self) -> str:
        """The note for an answer the knowledge base, searched, had nothing for."""
        return self.render("knowledge_none")

    @property
    def tools_data(self) -> str:
        """The system prompt's line for a call offering tools: their results are data."""
        return self.render("tools_data")

    @property
    def knowledge_tool(self) -> str:
        """The description of the knowledge base's search offered as a tool."""
        return self.render("knowledge_tool")

    @property
    def tools_answer_now(self) -> str:
        """The note for the call made without tools once a turn's tool calls are spent."""
        return self.render("tools_answer_now")

    def tool_uses(self, uses: Sequence[ToolUse]) -> str:
        """What an earlier reply's tool calls gave, put before it in the conversation:
        each one line, its arguments and result shortened (`TOOL_HISTORY_*_CHARS`)."""
        return self.render(
            "tool_uses",
            uses=[
                {
                    "name": use.name,
                    "arguments": _line(use.arguments, TOOL_HISTORY_ARGUMENT_CHARS),
                    "result": _line(use.result, TOOL_HISTORY_RESULT_CHARS),
                    "error": one_line(use.error or ""),
                }
                for use in uses
            ],
        )

    def knowledge(self, passages: Sequence[Passage], *, answering: bool) -> str:
        """The system message's knowledge part: the instruction of a round (ask nothing the
        excerpts answer) or of an answer (rely on them, cite them, say what they do not
        cover), then `passages` quoted as the section, labelled `K1`… in their order."""
        instruction = self.render("knowledge_answer" if answering else "knowledge_round")
        return instruction + "\n\n" + self.knowledge_excerpts(passages)

    def knowledge_excerpts(
        self, passages: Sequence[Passage], positions: Sequence[int] | None = None
    ) -> str:
        """`passages` quoted as the knowledge base's section, labelled `K1`… in their order,
        or by their `positions` (a search the model made labels after the turn's own)."""
        excerpts = [
            {
                "label": label(position),
                "title": one_line(passage.title),
                "section": one_line(passage.heading_path),
                "page": passage.page,
                "text": _quote(passage.text),
            }
            for position, passage in zip(
                positions or range(1, len(passages) + 1), passages, strict=True
            )
        ]
        return self.render("knowledge_excerpts", excerpts=excerpts)

    def client_memory(self, facts: Sequence[str]) -> str:
        """The system prompt's part naming what the person told in earlier consultations."""
        return self.render("client_memory", facts=list(facts))

    def extract_facts(self, known: Sequence[str], *, structured: bool) -> str:
        """The instruction to note a finished consultation's durable facts (`known`: those
        already remembered), as JSON (`structured`) or one a line."""
        return self.render(
            "extract_facts",
            max_facts=MAX_FACTS,
            known=bool(known),
            facts=list(known),
            structured=structured,
        )

    def continuation(self, answer: str) -> str:
        """The request to continue `answer`, quoting its last `CONTINUATION_TAIL_CHARS`
        characters so the model can pick up at the exact character."""
        return self.render("continuation", answer_tail=answer[-CONTINUATION_TAIL_CHARS:])

    def roles(self) -> dict[str, RoleInfo]:
        """The personas by key, sorted, with their /role menu titles."""
        if self._role_info is None:
            info: dict[str, RoleInfo] = {}
            for key in sorted(self._roles):
                template = self._roles[key]
                match = _TITLE_RE.match(template.source)
                title = match.group("title") if match and match.group("title") else key.title()
                info[key] = RoleInfo(key, title, self._render(template, {}))
            self._role_info = info
        return dict(self._role_info)

    def role_text(self, key: str | None) -> str:
        """The persona text of `key`, or of the default role when it is unknown."""
        roles = self.roles()
        role = roles.get(key or DEFAULT_ROLE) or roles.get(DEFAULT_ROLE)
        return role.text if role is not None else ""

    def check(self) -> None:
        """Render every template once with sample values; raise PromptError if any fails."""
        for name, variables in TEMPLATE_VARIABLES.items():
            self.render(name, **{v: _SAMPLE_VALUES[v] for v in variables})
        self.render("json_output", schema=None)
        self.render("final_requested", **{**_SAMPLE_VALUES, "language": None})
        self.render("extract_facts", max_facts=20, known=False, facts=[], structured=False)
        self.render("follow_up", **{**_SAMPLE_VALUES, "language": None})
        if DEFAULT_ROLE not in self.roles():
            raise PromptError(f"{ROLES_SUBDIR}/{DEFAULT_ROLE}", "the default role is missing")

    def _render(self, template: _Template, values: Mapping[str, Any]) -> str:
        try:
            text: str = self._renderer.render(template.parsed, dict(values))
        except KeyNotFoundError as exc:
            key = getattr(exc, "key", None)
            raise PromptError(
                template.name, f"no value for variable {key!r} ({template.path})", key
            ) from exc
        except PystacheError as exc:
            raise PromptError(template.name, f"{exc} ({template.path})") from exc
        return text.strip()


@dataclass(frozen=True)
class PromptContext:
    round: int  # the round being answered, 1-based
    max_rounds: int
    is_final: bool
    final_requested: bool
    initial_request: str
    role: str
    custom_system_prompt: str | None
    is_group: bool
    json_mode: bool = False
    json_schema: str | None = None
    request_budget_chars: int = 6000  # how much of `initial_request` is repeated verbatim
    language: str | None = None  # the name of the language the user writes in, when known
    structured: bool = False  # a question round asked as a JSON `core.domain.clarifying` round
    model_ready: bool = False  # the final answer the model chose to give in this round
    brief: bool = False  # a final text answer opens with what it took into account
    follow_up: bool = False  # a question after the final answer (`core.turns.follow_ups`)


def build_system_prompt(library: PromptLibrary, ctx: PromptContext) -> str:
    """Base + persona (or the custom prompt) + group + JSON + round or final instruction.

    The original request is repeated in its own words with each attached document named
    instead of repeated: the document itself is in the conversation (`core.prompting.context` keeps
    it there in every round), and repeating it here would cost its length again.

    A reply is final when `is_final` or `final_requested`; the "asked for it now"
    wording is used only when that happens before the last round, the "you decided"
    one when the model said it knew enough (`model_ready`). A final answer in text opens
    with its brief when `brief`. A question round is asked as a structured reply when
    `structured` (its JSON's ready flag replaces the early-finish marker); in text, the
    early-finish instruction is offered only with rounds still to come. A `follow_up`
    (a question after the final answer) gets the follow-up instruction instead of any
    round's: answer it directly, ask nothing.
    """
    shown_round = min(ctx.round, ctx.max_rounds) if ctx.max_rounds > 0 else ctx.round
    values: dict[str, Any] = {
        "round": shown_round,
        "max_rounds": ctx.max_rounds,
        "remaining": max(ctx.max_rounds - ctx.round, 0),
        "initial_request": quote_request(
            library, without_document_bodies(ctx.initial_request), ctx.request_budget_chars
        ),
        "marker": EARLY_FINISH_MARKER,
        "max_questions": MAX_QUESTIONS,
        "max_options": MAX_OPTIONS,
        "max_option_chars": MAX_OPTION_CHARS,
        "language": ctx.language,
    }
    custom = (ctx.custom_system_prompt or "").strip()
    parts = [
        library.render("system_base", **values),
        custom or library.role_text(ctx.role),
    ]
    if ctx.is_group:
        parts.append(library.render("group_context", **values))
    if ctx.json_mode:
        parts.append(library.render("json_output", schema=ctx.json_schema or None))
    if ctx.follow_up:
        parts.append(library.render("follow_up", **values))
    elif ctx.is_final or ctx.final_requested:
        early = ctx.final_requested and ctx.round < ctx.max_rounds
        final = "final_ready" if ctx.model_ready else "final_requested" if early else "final_round"
        parts.append(library.render(final, **values))
        if document_names(ctx.initial_request):
            parts.append(library.render("request_documents"))
        if ctx.brief and not ctx.json_mode:
            parts.append(library.render("final_brief"))
    elif ctx.structured:
        parts.append(library.render("round_questions", **values))
    else:
        parts.append(library.render("round_context", **values))
        if ctx.round < ctx.max_rounds:
            parts.append(library.render("early_finish", **values))
    return "\n\n".join(part for part in parts if part)


def quote_request(library: PromptLibrary, text: str, budget_chars: int) -> str:
    """The user's `text` with every line quoted ("> "); past `budget_chars`, its beginning
    and end with the (unquoted) excerpt note between them."""
    cut = split_excerpt(text, budget_chars, 0)
    if not cut.omitted:
        return _quote(text)
    note = library.excerpt_note(cut.omitted)
    return "\n".join((_quote(cut.head), note, _quote(cut.tail)))


def _line(text: str, chars: int) -> str:
    """`text` on one line, at most `chars` long (with an ellipsis when cut)."""
    line = one_line(text[: chars * 2])
    return line if len(line) <= chars else line[: chars - 1] + "…"


def _quote(text: str) -> str:
    # splitlines() breaks at every line boundary a model may honour (\r, \u2028, …).
    return "\n".join("> " + line for line in text.splitlines() or [""])


def _sub(folder: Path | None) -> Path | None:
    return folder / ROLES_SUBDIR if folder is not None else None


def _load_dir(default_dir: Path, override_dir: Path | None) -> dict[str, _Template]:
    """Parse every ``*.mustache`` of the defaults, replaced file by file by the override."""
    paths = {p.stem: p for p in sorted(default_dir.glob(f"*{SUFFIX}"))}
    if override_dir is not None and override_dir.is_dir():
        paths.update({p.stem: p for p in sorted(override_dir.glob(f"*{SUFFIX}"))})
    templates: dict[str, _Template] = {}
    for name, path in paths.items():
        try:
            source = path.read_text(encoding="utf-8")
            templates[name] = _Template(name, path, source, pystache.parse(source))
        except (OSError, UnicodeDecodeError, PystacheError, ParsingError) as exc:
            raise PromptError(name, f"cannot load {path}: {exc}") from exc
    return templates
