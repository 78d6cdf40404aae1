"""What one evaluation run produced: transcripts, judgements and comparisons, as plain data.

The runner fills these; the reports (terminal table, JSON, HTML) only read them. Every
field is JSON-serialisable through `dataclasses.asdict`, so the JSON report is a dump of
`Report` and can be loaded back for later comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(slots=True)
class AskedQuestion:
    """One question of a clarifying round asked as a structured reply, with its options."""

    text: str
    options: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Pick:
    """An option the simulated user chose: question and option numbers (1-based) and the
    `question — option` line the model was sent."""

    question: int
    option: int
    line: str


@dataclass(slots=True)
class GivenPassage:
    """A knowledge-base passage a bot's model call was given, under the label it had."""

    label: str  # "K1"…, in the call's order
    document: str  # its file, relative to the knowledge folder ("" when not one of them)
    title: str
    section: str
    text: str


@dataclass(slots=True)
class SeenMessage:
    """One message of a consultation as the evaluator saw it."""

    speaker: str  # "bot", "user", or a group member's name
    text: str  # a user's message as the simulated user wrote it (option labels included)
    round: int | None = None  # the bot's round for its replies; None for user messages
    final_now: bool = False  # the user pressed "final answer now" instead of writing
    # A bot's clarifying round asked as a structured reply: its questions (empty otherwise).
    questions: list[AskedQuestion] = field(default_factory=list)
    asked: int = 0  # questions a clarifying round asked (a text round's are counted by "?")
    model_ready: bool = False  # a final answer the model gave because it knew enough
    picks: list[Pick] = field(default_factory=list)  # a user's answers by option
    # A bot's reply: the knowledge-base passages its model call was given (the request's).
    knowledge: list[GivenPassage] = field(default_factory=list)


@dataclass(slots=True)
class Judgement:
    """The judge's verdict on one final answer. A failure is never a score."""

    score: float | None  # 0..1; None when the judge failed
    justification: str = ""
    covered: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    failure: str | None = None  # why no score: unparseable reply, model error
    raw: str = ""  # the judge's last reply as received
    # A knowledge scenario's: the share of the answer's claims about the operator that the
    # excerpts support or that it says the knowledge base does not cover (0..1).
    groundedness: float | None = None
    unsupported: list[str] = field(default_factory=list)  # the claims that are neither


@dataclass(slots=True)
class KnowledgeCheck:
    """The exact knowledge measures of one knowledge scenario's run
    (`evaluation.knowledge_metrics` says how each is counted)."""

    facts: int  # the facts the scenario needs
    retrieved: int  # of those, the ones whose passage the final answer's call was given
    stated: int  # of those, the ones the final answer states
    given: int  # passages the final answer's call was given
    cited: int  # labels the final answer cites ([K1, K3]: two)
    cited_with_fact: int  # of those, labels naming a given passage that holds a needed fact
    questions: int  # questions the clarifying rounds asked
    redundant: int  # of those, questions asking for a fact a passage given to that round held


@dataclass(slots=True)
class RunResult:
    """One scenario played once under one variant (e.g. "3 rounds" or "one-shot")."""

    scenario_id: str
    variant: str
    repeat: int  # 0-based index of the repetition
    transcript: list[SeenMessage] = field(default_factory=list)
    final_answer: str = ""
    rounds_used: int = 0
    max_rounds: int = 0
    early_finish: bool = False  # the bot finished before its last round
    # The scenario's `expect.early_finish`: True/False when it states one, None otherwise.
    expected_early_finish: bool | None = None
    final_now_pressed: bool = False
    model_ready: bool = False  # the final answer came because the model said it knew enough
    clarifying_rounds: int = 0  # the bot's replies that were not final
    structured_rounds: int = 0  # of those, the rounds asked as structured replies
    questions_asked: int = 0  # over every clarifying round
    # Questions with options in the structured rounds the user answered by writing (not by
    # pressing "final answer now"), and how many of them the user answered by an option.
    questions_with_options: int = 0
    answered_by_option: int = 0
    tokens_in: int = 0  # the bot model's prompt tokens over the whole consultation
    tokens_out: int = 0
    seconds: float = 0.0
    error: str | None = None  # the consultation could not finish (model error, …)
    judgement: Judgement | None = None
    knowledge: KnowledgeCheck | None = None  # a knowledge scenario's exact measures


@dataclass(slots=True)
class Pairwise:
    """The judge's choice between two variants' final answers for one scenario and repeat."""

    scenario_id: str
    repeat: int
    variant_a: str
    variant_b: str
    shown_first: Literal["a", "b"]  # which answer the judge saw first (randomised)
    winner: Literal["a", "b", "tie"] | None  # None when the judge failed
    justification: str = ""
    failure: str | None = None


@dataclass(slots=True)
class Report:
    """A whole evaluation run."""

    started_at: str  # ISO 8601, UTC
    seed: int
    models: dict[str, str]  # role ("bot", "user", "judge") -> model name (and base URL)
    variants: list[str]
    scenarios: list[str]  # scenario ids, in run order
    repeats: int
    results: list[RunResult] = field(default_factory=list)
    pairwise: list[Pairwise] = field(default_factory=list)
    # What each variant ran with (rounds, prompts, model, how questions were asked).
    variant_settings: dict[str, str] = field(default_factory=dict)
