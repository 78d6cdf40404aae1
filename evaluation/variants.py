"""What is compared: variants of the bot (round limit, prompts folder, model, how
clarifying questions are asked) and the pairs.

Without options there are two variants: "N-round" (each scenario's own round limit)
and the "one-shot" baseline (one round: the first message answered at once, with the
first variant's prompts and model). `--rounds`, `--prompts` and `--bot-model` given
more than once multiply into one variant per combination, named by what differs.
`--questions structured|text` (once or twice) multiplies the same way and always names
its variants (`questions:structured`): structured is LLM_STRUCTURED_QUESTIONS=on, text
is off; without it the deployment's setting holds. `--knowledge on|off` multiplies and
names them the same way (`knowledge:off`): on loads each knowledge scenario's documents
into the variant's store before the runs, off runs them with an empty knowledge base;
without it they are loaded, as with on. Every variant is compared pairwise with the
baseline, and the first variant with each other one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from evaluation.scenarios import Scenario

BASELINE = "one-shot"
DEFAULT = "N-round"
QUESTION_MODES = {"structured": "on", "text": "off"}
"""`--questions` value -> the LLM_STRUCTURED_QUESTIONS it runs the bot with."""
KNOWLEDGE_MODES = ("on", "off")
"""`--knowledge`: a knowledge scenario's documents loaded, or an empty knowledge base."""


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    max_rounds: int | None = None  # None: the scenario's own
    prompts_dir: Path | None = None  # None: the deployment's PROMPTS_DIR
    bot_model: str | None = None  # None: the deployment's LLM_MODEL
    baseline: bool = False
    questions: str | None = None  # a key of QUESTION_MODES; None: the deployment's setting
    knowledge: str | None = None  # one of KNOWLEDGE_MODES; None: as on, unnamed

    @property
    def loads_knowledge(self) -> bool:
        """Whether a knowledge scenario runs with its documents loaded."""
        return self.knowledge != "off"

    def rounds_for(self, scenario: Scenario) -> int:
        if self.baseline:
            return 1
        return self.max_rounds or scenario.max_rounds


def build_variants(
    rounds: list[int],
    prompts: list[Path],
    bot_models: list[str],
    *,
    baseline: bool = True,
    questions: list[str] | None = None,
    knowledge: list[str] | None = None,
) -> list[Variant]:
    """The variants, in a fixed order: the combinations as given, then the baseline."""
    labels = _labels(prompts)
    variants = []
    folders: list[Path | None] = [*prompts] or [None]
    models: list[str | None] = [*bot_models] or [None]
    modes: list[str | None] = [*dict.fromkeys(questions or [])] or [None]
    bases: list[str | None] = [*dict.fromkeys(knowledge or [])] or [None]
    limits: list[int | None] = [*rounds] or [None]
    for folder, model, mode, base, limit in itertools.product(
        folders, models, modes, bases, limits
    ):
        parts = []
        if len(prompts) > 1 and folder is not None:
            parts.append(f"prompts:{labels[folder]}")
        if len(bot_models) > 1:
            parts.append(f"model:{model}")
        if mode is not None:
            parts.append(f"questions:{mode}")
        if base is not None:
            parts.append(f"knowledge:{base}")
        if limit is not None and (len(rounds) > 1 or not parts):
            parts.append(f"{limit}-round")
        variants.append(
            Variant(
                " ".join(parts) or DEFAULT, limit, folder, model, questions=mode, knowledge=base
            )
        )
    if baseline:
        first = variants[0]
        variants.append(
            Variant(
                BASELINE,
                1,
                first.prompts_dir,
                first.bot_model,
                baseline=True,
                questions=first.questions,
                knowledge=first.knowledge,
            )
        )
    return variants


def variant_pairs(variants: list[Variant]) -> list[tuple[Variant, Variant]]:
    """The pairs the pairwise judge compares: each variant against the baseline, and the
    first variant against each other one."""
    compared = [v for v in variants if not v.baseline]
    baselines = [v for v in variants if v.baseline]
    pairs = [(v, base) for v in compared for base in baselines]
    pairs += [(compared[0], other) for other in compared[1:]]
    return pairs


def _labels(folders: list[Path]) -> dict[Path, str]:
    """A short label per folder: its name, or the whole path when two names are equal."""
    names = [folder.name or str(folder) for folder in folders]
    return {
        folder: name if names.count(name) == 1 else str(folder)
        for folder, name in zip(folders, names, strict=True)
    }
