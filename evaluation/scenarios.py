"""Scenario files: one YAML file per scenario, loaded into frozen dataclasses.

Invariant: a scenario that loads is complete and consistent — every required field
present and well typed, no unknown key anywhere (a typo never silently drops a
behaviour), the id equal to the file name. Any problem raises one `ScenarioError`
naming the file and the field path (``behaviour.answers``, ``speakers[1].name``).
A knowledge scenario's folder of documents is named relative to its file and is not
read here: a run that loads it says when it is missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from core.prompting.prompts import PromptLibrary

DEFAULT_SCENARIOS_DIR = Path(__file__).resolve().parent / "scenarios"
LANGUAGES = ("en", "ru")
MAX_ROUNDS = 10
DEFAULT_MAX_ROUNDS = 3
PERSONA_TYPES = ("precise", "vague", "off-focus", "contradictory", "factually-wrong", "refusing")
"""How the simulated user answers the consultant's questions: the six user personas of
ClarifyMT-Bench (arXiv 2512.21120), each a rule set in `evaluation/prompts/simulated_user`."""
DEFAULT_PERSONA_TYPE = "precise"
_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

T = TypeVar("T")


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class Speaker:
    """One member of a group consultation."""

    name: str
    persona: str
    hidden_facts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ChangeOfMind:
    after_round: int  # revealed in the user's message after the bot's reply to this round
    change: str


@dataclass(frozen=True, slots=True)
class Behaviour:
    """How the simulated user acts beyond answering in character."""

    answers: Literal["all", "partial"] = "all"
    press_final_now_after_round: int | None = None
    asks_for_answer_immediately: bool = False
    changes_mind: ChangeOfMind | None = None


@dataclass(frozen=True, slots=True)
class Expect:
    early_finish: bool | None = None  # None: not checked


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact a knowledge scenario's answer needs from the knowledge base.

    `passage` is a literal that one passage of `document` holds (the shipped knowledge
    base has each in exactly one passage); `answer` are literals of which the final
    answer states at least one (by default `passage`); `asked_as` are phrases of a
    clarifying question that asks the person for this fact, which the material answers.
    """

    document: str  # the file, relative to the knowledge folder ("warranty.md")
    passage: str
    answer: tuple[str, ...]
    asked_as: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class KnowledgeNeeds:
    """A scenario answered from a knowledge base: the folder loaded, the facts needed."""

    documents: Path  # the folder, resolved against the scenario file's folder
    facts: tuple[Fact, ...] = ()
    not_covered: str | None = None  # what the knowledge base does not say (the answer should)


@dataclass(frozen=True, slots=True)
class Scenario:
    id: str
    title: str
    language: str
    role: str
    max_rounds: int
    first_message: str
    persona: str
    hidden_facts: tuple[str, ...]
    goal: str
    rubric: tuple[str, ...]
    persona_type: str = DEFAULT_PERSONA_TYPE  # one of PERSONA_TYPES
    behaviour: Behaviour = field(default_factory=Behaviour)
    expect: Expect = field(default_factory=Expect)
    speakers: tuple[Speaker, ...] = ()
    knowledge: KnowledgeNeeds | None = None

    @property
    def is_group(self) -> bool:
        return bool(self.speakers)


def load_scenarios(folder: Path = DEFAULT_SCENARIOS_DIR) -> list[Scenario]:
    """Every `*.yaml` scenario in `folder`, sorted by id; ScenarioError on the first bad one."""
    paths = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not paths:
        raise ScenarioError(f"{folder}: no scenario files (*.yaml)")
    return sorted((load_scenario(path) for path in paths), key=lambda s: s.id)


def load_scenario(path: Path) -> Scenario:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot be read: {exc}") from None
    fields = _Fields(path, "", data)
    scenario = Scenario(
        id=fields.text("id"),
        title=fields.text("title"),
        language=fields.choice("language", LANGUAGES),
        role=fields.choice("role", _built_in_roles(), quoted=False),
        max_rounds=fields.whole("max_rounds", 1, MAX_ROUNDS) or DEFAULT_MAX_ROUNDS,
        first_message=fields.text("first_message"),
        persona=fields.text("persona"),
        hidden_facts=fields.texts("hidden_facts", minimum=1),
        goal=fields.text("goal"),
        rubric=fields.texts("rubric", minimum=2),
        persona_type=fields.choice(
            "persona_type", PERSONA_TYPES, default=DEFAULT_PERSONA_TYPE, quoted=False
        ),
        behaviour=fields.nested("behaviour", _behaviour, Behaviour()),
        expect=fields.nested("expect", _expect, Expect()),
        speakers=fields.speakers("speakers"),
        knowledge=fields.nested("knowledge", _knowledge, None),
    )
    fields.no_other_keys()
    if not _ID.fullmatch(scenario.id):
        raise fields.error("id", "must be lowercase letters, digits and dashes")
    if scenario.id != path.stem:
        raise fields.error("id", f'must equal the file name without .yaml ("{path.stem}")')
    return scenario


def _behaviour(fields: _Fields) -> Behaviour:
    answers = fields.choice("answers", ("all", "partial"), default="all")
    return Behaviour(
        answers="partial" if answers == "partial" else "all",
        press_final_now_after_round=fields.whole("press_final_now_after_round", 1, MAX_ROUNDS),
        asks_for_answer_immediately=fields.flag("asks_for_answer_immediately", False) is True,
        changes_mind=fields.nested("changes_mind", _change, None),
    )


def _change(fields: _Fields) -> ChangeOfMind:
    after = fields.whole("after_round", 1, MAX_ROUNDS)
    if after is None:
        raise fields.error("after_round", "is required")
    return ChangeOfMind(after_round=after, change=fields.text("change"))


def _expect(fields: _Fields) -> Expect:
    return Expect(early_finish=fields.flag("early_finish", None))


def _knowledge(fields: _Fields) -> KnowledgeNeeds:
    folder = fields.text("documents")
    facts = fields.items("facts", _fact)
    not_covered = fields.optional_text("not_covered")
    if not facts and not_covered is None:
        raise fields.error(
            "facts", "is required (or not_covered, for a question it does not answer)"
        )
    return KnowledgeNeeds(
        documents=(fields.path.parent / folder).resolve(),
        facts=facts,
        not_covered=not_covered,
    )


def _fact(fields: _Fields) -> Fact:
    document = fields.text("document")
    parts = Path(document).parts
    if Path(document).is_absolute() or ".." in parts:
        raise fields.error("document", "must be a path inside the knowledge folder")
    passage = fields.text("passage")
    answer = fields.texts("answer", minimum=1) if fields.has("answer") else (passage,)
    asked_as = fields.texts("asked_as", minimum=1) if fields.has("asked_as") else ()
    return Fact(
        document=Path(document).as_posix(), passage=passage, answer=answer, asked_as=asked_as
    )


def _speaker(fields: _Fields) -> Speaker:
    return Speaker(
        name=fields.text("name"),
        persona=fields.text("persona"),
        hidden_facts=fields.texts("hidden_facts", minimum=1),
    )


def _built_in_roles() -> tuple[str, ...]:
    return tuple(PromptLibrary().roles())


class _Fields:
    """The keys of one mapping, read by name; each read marks the key as known."""

    def __init__(self, path: Path, prefix: str, data: Any) -> None:
        self._path = path
        self._prefix = prefix
        if not isinstance(data, Mapping):
            where = f"{prefix.rstrip('.')}: " if prefix else ""
            raise ScenarioError(f"{path}: {where}must be a mapping of fields")
        self._data = data
        self._read: set[str] = set()

    @property
    def path(self) -> Path:
        return self._path

    def has(self, key: str) -> bool:
        """Whether the key is given (a null value counts as not given)."""
        return self._data.get(key) is not None

    def optional_text(self, key: str) -> str | None:
        return None if self._get(key) is None else self.text(key)

    def items(self, key: str, read: Callable[[_Fields], T]) -> tuple[T, ...]:
        """A list of mappings, each read by `read` (none when the key is not given)."""
        value = self._get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(key, "must be a list")
        found: list[T] = []
        for index, item in enumerate(value):
            fields = _Fields(self._path, f"{self._prefix}{key}[{index}].", item)
            found.append(read(fields))
            fields.no_other_keys()
        return tuple(found)

    def error(self, key: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self._path}: {self._prefix}{key}: {problem}")

    def _get(self, key: str) -> Any:
        self._read.add(key)
        return self._data.get(key)

    def text(self, key: str) -> str:
        value = self._get(key)
        if value is None:
            raise self.error(key, "is required")
        return self._checked_text(key, value)

    def _checked_text(self, key: str, value: Any) -> str:
        if not isinstance(value, str):
            raise self.error(key, "must be text")
        if not value.strip():
            raise self.error(key, "must not be blank")
        return value.strip()

    def texts(self, key: str, *, minimum: int) -> tuple[str, ...]:
        value = self._get(key)
        if value is None:
            raise self.error(key, "is required")
        if not isinstance(value, list):
            raise self.error(key, "must be a list of texts")
        if len(value) < minimum:
            raise self.error(key, f"must list at least {minimum} item{'s' * (minimum > 1)}")
        return tuple(self._checked_text(f"{key}[{i}]", item) for i, item in enumerate(value))

    def choice(
        self, key: str, allowed: tuple[str, ...], *, default: str | None = None, quoted: bool = True
    ) -> str:
        value = self._get(key)
        if value is None and default is not None:
            return default
        if value is None:
            raise self.error(key, "is required")
        if value not in allowed:
            shown = [f'"{a}"' if quoted else a for a in allowed]
            if len(shown) == 2:
                raise self.error(key, f"must be {shown[0]} or {shown[1]}")
            raise self.error(key, f"must be one of {', '.join(shown)}")
        return str(value)

    def whole(self, key: str, low: int, high: int) -> int | None:
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.error(key, f"must be a whole number from {low} to {high}")
        return value

    def flag(self, key: str, default: bool | None) -> bool | None:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, "must be true or false")
        return value

    def nested(self, key: str, read: Callable[[_Fields], T], default: T) -> T:
        value = self._get(key)
        if value is None:
            return default
        fields = _Fields(self._path, f"{self._prefix}{key}.", value)
        result = read(fields)
        fields.no_other_keys()
        return result

    def speakers(self, key: str) -> tuple[Speaker, ...]:
        value = self._get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(key, "must be a list of speakers")
        if len(value) < 2:
            raise self.error(key, "must list at least 2 items")
        speakers: list[Speaker] = []
        for index, item in enumerate(value):
            fields = _Fields(self._path, f"{self._prefix}{key}[{index}].", item)
            speaker = _speaker(fields)
            fields.no_other_keys()
            if any(s.name == speaker.name for s in speakers):
                raise fields.error("name", f'"{speaker.name}" is used twice')
            speakers.append(speaker)
        return tuple(speakers)

    def no_other_keys(self) -> None:
        for key in self._data:
            if key not in self._read:
                raise self.error(str(key), "unknown key")
