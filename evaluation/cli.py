"""`python -m evaluation`: run scenarios, print and write the report.

Settings come from the environment and `.env` like the bot's (OPENAI_*, LLM_MODEL, …)
plus EVAL_USER_* and EVAL_JUDGE_* for the other two roles. Anything that cannot work
as configured — a missing key, a bad value, an unknown scenario, a prompts folder that
does not load — ends the process before any model call with one line
"Configuration error: …" and exit code 2. `--list` needs no settings at all.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from app.cli import EXIT_CONFIG
from app.logs import configure_logging, secrets_of
from app.settings import Settings, load_settings
from core.domain.errors import ConfigError
from core.prompting.prompts import PromptError, PromptLibrary
from evaluation.evaluate import Plan, evaluate
from evaluation.report_html import write_html
from evaluation.report_json import write_json
from evaluation.report_table import print_table
from evaluation.results import Report
from evaluation.scenarios import DEFAULT_SCENARIOS_DIR, Scenario, ScenarioError, load_scenarios
from evaluation.settings import ModelRoles, load_eval_settings, model_roles
from evaluation.summary import summarise
from evaluation.variants import KNOWLEDGE_MODES, QUESTION_MODES, build_variants

PIPED_WIDTH = 160


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation",
        description="Measure the consultation's final answers: simulated users play "
        "scenarios through the real service, a judge scores the answers.",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument(
        "--scenario", action="append", default=[], metavar="ID", help="run only these (repeat)"
    )
    parser.add_argument(
        "--rounds", action="append", type=_positive, default=[], metavar="N",
        help="round limit instead of each scenario's own; twice to compare two limits",
    )  # fmt: skip
    parser.add_argument(
        "--prompts", action="append", type=Path, default=[], metavar="DIR",
        help="a prompts folder for the bot; twice to compare two folders",
    )  # fmt: skip
    parser.add_argument(
        "--bot-model", action="append", default=[], metavar="NAME",
        help="the bot's model instead of LLM_MODEL; twice to compare two models",
    )  # fmt: skip
    parser.add_argument(
        "--questions", action="append", choices=sorted(QUESTION_MODES), default=[],
        help="ask clarifying questions as structured replies with options "
        "(LLM_STRUCTURED_QUESTIONS=on) or in text (off); twice to compare both",
    )  # fmt: skip
    parser.add_argument(
        "--knowledge", action="append", choices=KNOWLEDGE_MODES, default=[],
        help="knowledge scenarios with their documents loaded (on) or an empty knowledge "
        "base (off); twice to compare both",
    )  # fmt: skip
    parser.add_argument("--repeat", type=_positive, default=1, metavar="K", help="runs each")
    parser.add_argument(
        "--concurrency", type=_positive, default=2, metavar="C", help="runs at once (2)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the pairwise order (0)")
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR",
        help="where report.json and report.html go (EVAL_REPORTS_DIR/<time>/)",
    )  # fmt: skip
    parser.add_argument(
        "--scenarios-dir", type=Path, default=DEFAULT_SCENARIOS_DIR, metavar="DIR",
        help="scenario files to use instead of the shipped ones",
    )  # fmt: skip
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the one-shot baseline and its pairs"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    except SystemExit as exc:  # --help, or a usage error argparse has printed
        return exc.code if isinstance(exc.code, int) else EXIT_CONFIG
    try:
        scenarios = load_scenarios(args.scenarios_dir)
        if args.list:
            _print_list(scenarios)
            return 0
        scenarios = _selected(scenarios, args.scenario)
        settings = load_settings()
        roles = model_roles(settings, load_eval_settings())
        _check_prompts(settings, args.prompts)
        configure_logging(settings.log_level, _secrets(settings, roles), floor="WARNING")
    except (ConfigError, ScenarioError, PromptError) as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    plan = Plan(
        scenarios=scenarios,
        variants=build_variants(
            args.rounds,
            args.prompts,
            args.bot_model,
            baseline=not args.no_baseline,
            questions=args.questions,
            knowledge=args.knowledge,
        ),
        repeats=args.repeat,
        seed=args.seed,
        concurrency=args.concurrency,
    )
    missing = _missing_knowledge(plan)
    if missing is not None:
        print(
            f"Configuration error: knowledge documents: {missing} is not a folder", file=sys.stderr
        )
        return EXIT_CONFIG
    out = args.out or settings.eval_reports_dir / datetime.datetime.now(datetime.UTC).strftime(
        "%Y%m%d-%H%M%S"
    )
    try:
        report = asyncio.run(_evaluate(settings, roles, plan))
    except KeyboardInterrupt:
        return 130
    except ConfigError as exc:  # a knowledge base that does not load, before any model call
        print(f"Configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    summary = summarise(report)
    out.mkdir(parents=True, exist_ok=True)
    write_json(report, out / "report.json", summary=summary)
    write_html(report, out / "report.html", summary=summary)
    # Piped to a file or a CI log, the table keeps its columns instead of rich's 80.
    console = Console(width=None if sys.stdout.isatty() else PIPED_WIDTH)
    print_table(report, console, summary=summary)
    console.print(f"Report: {out / 'report.json'} and {out / 'report.html'}")
    return 0


async def _evaluate(settings: Settings, roles: ModelRoles, plan: Plan) -> Report:
    """The evaluation, with a progress bar on stderr; the store files are thrown away."""
    progress = Progress(
        TextColumn("evaluating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )
    with tempfile.TemporaryDirectory(prefix="evaluation-") as work, progress:
        task = progress.add_task("evaluating", total=plan.steps())
        return await evaluate(
            settings, roles, plan, Path(work), on_step=lambda: progress.advance(task)
        )


def _print_list(scenarios: list[Scenario]) -> None:
    width = max(len(s.id) for s in scenarios)
    for scenario in scenarios:
        print(f"{scenario.id:<{width}}  {scenario.language}  {scenario.role}")


def _selected(scenarios: list[Scenario], ids: list[str]) -> list[Scenario]:
    """The scenarios named by `--scenario` (all without one), in id order."""
    known = {s.id for s in scenarios}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ConfigError(f"--scenario: no scenario {unknown[0]!r} (--list shows them)")
    return [s for s in scenarios if not ids or s.id in ids]


def _missing_knowledge(plan: Plan) -> Path | None:
    """The first knowledge folder the plan loads that is not a folder, if any."""
    for _, folder in plan.stores():
        if folder is not None and not folder.is_dir():
            return folder
    return None


def _check_prompts(settings: Settings, folders: list[Path]) -> None:
    """Every prompts folder loads and renders (the roles come from the defaults at least)."""
    chosen: list[Path | None] = [*folders] or [settings.prompts_dir]
    for folder in chosen:
        PromptLibrary(folder).check()


def _secrets(settings: Settings, roles: ModelRoles) -> list[str | None]:
    return [*secrets_of(settings), roles.user.api_key, roles.judge.api_key]


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {number}")
    return number
