"""Prompt templates and the system prompt of each round.

Invariants: prompt text lives only in Mustache files (never in code); values are
substituted verbatim (no HTML escaping) and never interpreted as Mustache, so user
text such as ``{{x}}`` reaches the model unchanged; a template that names a
variable the caller did not pass raises `PromptError` instead of rendering blank.

Role files (``roles/<key>.mustache``) may start with a comment ``{{! title: ... }}``
giving the short title shown in the /role menu; the key (file stem) is the fallback.
Partials (``{{>name}}``) resolve to the library's own templates, never to other files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pystache
from pystache.common import PystacheError
from pystache.context import KeyNotFoundError
from pystache.parsed import ParsedTemplate
from pystache.parser import ParsingError

from prompts import DEFAULT_PROMPTS_DIR

EARLY_FINISH_MARKER = "[[FINAL]]"
DEFAULT_ROLE = "expert"
SUFFIX = ".mustache"
ROLES_SUBDIR = "roles"

# Every template the engine uses, with the variables it is rendered with. check()
# renders each with exactly these, so an operator template naming anything else
# fails at start-up rather than in the middle of a consultation.
_SYSTEM_VARS = ("round", "max_rounds", "remaining", "initial_request", "marker")
TEMPLATE_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "system_base": _SYSTEM_VARS,
    "round_context": _SYSTEM_VARS,
    "early_finish": _SYSTEM_VARS,
    "final_round": _SYSTEM_VARS,
    "final_requested": _SYSTEM_VARS,
    "group_context": _SYSTEM_VARS,
    "json_output": ("schema",),
    "continuation": (),
    "omission_note": ("omitted",),
    "final_now_request": (),
}
_SAMPLE_VALUES: Mapping[str, Any] = {
    "round": 2,
    "max_rounds": 3,
    "remaining": 1,
    "initial_request": 'Sample "request" {{x}}',
    "marker": EARLY_FINISH_MARKER,
    "schema": '{"type": "object"}',
    "omitted": 4,
}

_TITLE_RE = re.compile(r"\A\s*\{\{!\s*title:\s*(?P<title>.*?)\s*\}\}")
_MARKER_RE = re.compile(r"\*\*\[\[FINAL\]\]\*\*|`\[\[FINAL\]\]`|\[\[FINAL\]\]", flags=re.IGNORECASE)


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

    def render(self, name: str, **values: Any) -> str:
        """Render template `name`; a tag with no value raises PromptError naming it."""
        template = self._templates.get(name)
        if template is None:
            raise PromptError(name, "no such template")
        return self._render(template, values)

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


def build_system_prompt(library: PromptLibrary, ctx: PromptContext) -> str:
    """Base + persona (or the custom prompt) + group + JSON + round or final instruction.

    A reply is final when `is_final` or `final_requested`; the "asked for it now"
    wording is used only when that happens before the last round. The early-finish
    instruction is offered only in a non-final round with rounds still to come.
    """
    shown_round = min(ctx.round, ctx.max_rounds) if ctx.max_rounds > 0 else ctx.round
    values: dict[str, Any] = {
        "round": shown_round,
        "max_rounds": ctx.max_rounds,
        "remaining": max(ctx.max_rounds - ctx.round, 0),
        "initial_request": ctx.initial_request,
        "marker": EARLY_FINISH_MARKER,
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
    if ctx.is_final or ctx.final_requested:
        early = ctx.final_requested and ctx.round < ctx.max_rounds
        parts.append(library.render("final_requested" if early else "final_round", **values))
    else:
        parts.append(library.render("round_context", **values))
        if ctx.round < ctx.max_rounds:
            parts.append(library.render("early_finish", **values))
    return "\n\n".join(part for part in parts if part)


def strip_marker(text: str) -> tuple[str, bool]:
    """Remove every early-finish marker; report whether there was one.

    Whitespace after a leading marker goes too, so the answer starts cleanly.
    Tolerates the marker wrapped in ``**`` or backticks and any letter case.
    """
    stripped, count = _MARKER_RE.subn("", text)
    if count == 0:
        return text, False
    if _MARKER_RE.match(text.lstrip()):
        stripped = stripped.lstrip()
    return stripped, True


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
