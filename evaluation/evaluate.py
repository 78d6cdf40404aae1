"""A whole evaluation: every scenario under every variant, `repeats` times, judged.

Each variant gets its own runtime (`app.runtime.open_runtime`, no background jobs) on
a throwaway SQLite file in `workdir` (never the deployment's DATABASE_URL), with the
simulated user and the judge as extra named model clients; each run uses its own chat
key. A variant that loads knowledge gets one more runtime per knowledge folder its
scenarios name, whose store holds that folder's documents alone
(`evaluation.knowledge_loading`), so no scenario reads another's knowledge base; the
bot model's client records each request (`evaluation.recording`), and a knowledge
scenario's run is measured from them (`evaluation.knowledge_metrics`) and judged with
the excerpts its final answer was given. At most `concurrency` runs or
pairwise judgements are in flight at once. Results come back in a fixed order —
scenario, variant, repeat — whatever order they finish in, and the pairwise order
comes from the seed, so two evaluations with the same seed ask the same questions.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.runtime import open_runtime
from app.settings import Settings
from core.llm.llm import ModelEndpoint
from evaluation.judge import JudgeModel, judge_answer
from evaluation.knowledge_loading import load_documents
from evaluation.knowledge_metrics import check_knowledge, final_passages
from evaluation.pairwise import judge_pair, order_rng
from evaluation.recording import RecordingCompleter
from evaluation.results import Pairwise, Report, RunResult
from evaluation.runner import Bot, play
from evaluation.scenarios import Scenario
from evaluation.settings import ModelRoles
from evaluation.simulated_user import UserModel
from evaluation.variants import QUESTION_MODES, Variant, variant_pairs

Store = tuple[int, Path | None]
"""A runtime's key: the variant's index and the knowledge folder its store holds (None:
an empty knowledge base)."""


@dataclass(frozen=True, slots=True)
class Plan:
    scenarios: list[Scenario]
    variants: list[Variant]
    repeats: int = 1
    seed: int = 0
    concurrency: int = 2

    def steps(self) -> int:
        """Runs plus pairwise judgements: what a progress bar counts."""
        per_repeat = len(self.variants) + len(variant_pairs(self.variants))
        return len(self.scenarios) * self.repeats * per_repeat

    def store_for(self, index: int, scenario: Scenario) -> Store:
        """The runtime a scenario runs on under the variant at `index`."""
        loads = scenario.knowledge is not None and self.variants[index].loads_knowledge
        return (index, scenario.knowledge.documents if loads and scenario.knowledge else None)

    def stores(self) -> list[Store]:
        """Every runtime the plan needs, each variant's in scenario order, once."""
        keys = (self.store_for(i, s) for i in range(len(self.variants)) for s in self.scenarios)
        return list(dict.fromkeys(keys))


async def evaluate(
    settings: Settings,
    roles: ModelRoles,
    plan: Plan,
    workdir: Path,
    *,
    on_step: Callable[[], None] = lambda: None,
) -> Report:
    report = Report(
        started_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        seed=plan.seed,
        models={name: _describe(e) for name, e in _named(roles)},
        variants=[v.name for v in plan.variants],
        scenarios=[s.id for s in plan.scenarios],
        repeats=plan.repeats,
    )
    stores = plan.stores()
    configured = {
        key: _variant_settings(
            settings, roles, plan.variants[key[0]], workdir / f"store-{n}.sqlite3"
        )
        for n, key in enumerate(stores)
    }
    report.variant_settings = {
        v.name: describe_variant(v, _variant_settings(settings, roles, v, workdir))
        for v in plan.variants
    }
    gate = asyncio.Semaphore(plan.concurrency)
    async with contextlib.AsyncExitStack() as stack:
        runtimes = {}
        bots = {}
        for key in stores:
            runtime = await stack.enter_async_context(
                open_runtime(
                    configured[key],
                    extra_models=[roles.user, roles.judge],
                    background=False,
                    wrap_bot_model=RecordingCompleter,
                )
            )
            folder = key[1]
            documents = (
                {}
                if folder is None
                else await load_documents(configured[key], runtime.store.knowledge, folder)
            )
            runtimes[key] = runtime
            bots[key] = Bot(runtime.engine, runtime.prompts, documents)
        first = runtimes[stores[0]]
        judge = JudgeModel(first.models["judge"], roles.judge.model, roles.judge_max_tokens)

        async def run(scenario: Scenario, index: int, repeat: int) -> RunResult:
            variant, key = plan.variants[index], plan.store_for(index, scenario)
            runtime = runtimes[key]
            user = UserModel(runtime.models["user"], roles.user.model, roles.user_max_tokens)
            async with gate:
                result = await play(
                    bots[key],
                    user,
                    scenario,
                    variant=variant.name,
                    repeat=repeat,
                    max_rounds=variant.rounds_for(scenario),
                    chat_key=f"eval:{scenario.id}:{repeat}",
                )
                result.expected_early_finish = scenario.expect.early_finish
                if scenario.knowledge is not None:
                    result.knowledge = check_knowledge(scenario.knowledge, result)
                if result.error is None:
                    result.judgement = await judge_answer(
                        judge, scenario, result.final_answer, excerpts=final_passages(result)
                    )
            on_step()
            return result

        async def scenario_repeat(
            scenario: Scenario, repeat: int
        ) -> tuple[list[RunResult], list[Pairwise]]:
            results = await asyncio.gather(
                *(run(scenario, i, repeat) for i in range(len(plan.variants)))
            )
            answers = {r.variant: (r.final_answer if r.error is None else None) for r in results}
            rng = order_rng(plan.seed, scenario.id, repeat)
            pairs = []
            for a, b in variant_pairs(plan.variants):
                async with gate:
                    pairs.append(
                        await judge_pair(
                            judge,
                            scenario,
                            repeat,
                            (a.name, answers[a.name]),
                            (b.name, answers[b.name]),
                            rng,
                        )
                    )
                on_step()
            return list(results), pairs

        done = await asyncio.gather(
            *(scenario_repeat(s, r) for s in plan.scenarios for r in range(plan.repeats))
        )
    order = {v.name: i for i, v in enumerate(plan.variants)}
    position = {s.id: i for i, s in enumerate(plan.scenarios)}
    results = [result for found, _ in done for result in found]
    results.sort(key=lambda r: (position[r.scenario_id], order[r.variant], r.repeat))
    report.results = results
    report.pairwise = [pair for _, pairs in done for pair in pairs]
    report.pairwise.sort(key=lambda p: (position[p.scenario_id], p.repeat))
    return report


def _variant_settings(
    settings: Settings, roles: ModelRoles, variant: Variant, db_path: Path
) -> Settings:
    """The deployment's settings with the variant's prompts, model, round limit and way of
    asking clarifying questions, on the throwaway SQLite file `db_path`."""
    update: dict[str, object] = {
        "db_path": db_path,
        "database_url": None,  # the evaluator's stores are its own, never the deployment's
        "max_rounds_limit": max(settings.max_rounds_limit, variant.max_rounds or 0, 10),
    }
    if variant.prompts_dir is not None:
        update["prompts_dir"] = variant.prompts_dir
    if variant.bot_model is not None:
        update["llm_model"] = variant.bot_model
    if variant.questions is not None:
        update["llm_structured_questions"] = QUESTION_MODES[variant.questions]
    if roles.bot.temperature is not None:  # the bot's client reads it from the extra body
        update["llm_extra_body"] = {**settings.llm_extra_body, "temperature": roles.bot.temperature}
    return settings.model_copy(update=update)


def describe_variant(variant: Variant, settings: Settings) -> str:
    """What a variant runs with, in one line of the report."""
    if variant.baseline:
        rounds = "1 round (the baseline)"
    elif variant.max_rounds is not None:
        rounds = f"{variant.max_rounds} rounds"
    else:
        rounds = "each scenario's own rounds"
    prompts = settings.prompts_dir if settings.prompts_dir is not None else "built-in"
    mode = settings.llm_structured_questions
    asked = {"on": "structured", "off": "text"}.get(mode, "structured while the model gives them")
    knowledge = f"on (top {settings.knowledge_top_k})" if variant.loads_knowledge else "off (empty)"
    return (
        f"{rounds}; prompts: {prompts}; model: {settings.llm_model}; "
        f"questions: {asked} (LLM_STRUCTURED_QUESTIONS={mode}); "
        f"knowledge scenarios: {knowledge}"
    )


def _named(roles: ModelRoles) -> list[tuple[str, ModelEndpoint]]:
    return [("bot", roles.bot), ("user", roles.user), ("judge", roles.judge)]


def _describe(endpoint: ModelEndpoint) -> str:
    where = endpoint.base_url or "the provider's default URL"
    temperature = "" if endpoint.temperature is None else f", temperature {endpoint.temperature:g}"
    return f"{endpoint.model} at {where}{temperature}"
