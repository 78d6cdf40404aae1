"""One scenario played once through the real consultation engine.

The first message is the scenario's; after each reply that is not final the simulated
user writes the next message (or presses "final answer now" after the round the
scenario names, with the scenario's language), until the service hands back its final
reply — after the chat's round limit at the latest — or something fails. After a round
asked with options, the options the user's message chooses (`evaluation.choices`) are
sent as answers to that round (`Answer(question, option=…)` with its `RoundRef`), the
rest of the message as typed text. A failure is recorded on the result (`error`), never
raised: one broken run does not stop an evaluation. Tokens are the bot model's own,
summed over every reply; the round counts are the ones the reports' question metrics
are made of. The bot model's requests are recorded (`evaluation.recording`), and each
reply keeps the knowledge-base passages of the last request its turn sent — the call
that wrote it — with the file each came from.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from core.domain.asking import RoundRef, UserMessage
from core.domain.clarifying import ClarifyingRound
from core.domain.knowledge_sources import label
from core.domain.outcomes import Reply
from core.domain.ports import CompletionRequest
from core.prompting.final_now import request_text
from core.prompting.prompts import PromptLibrary
from core.turns.engine import Engine
from evaluation.choices import read_choices
from evaluation.recording import recording
from evaluation.results import AskedQuestion, GivenPassage, Pick, RunResult, SeenMessage
from evaluation.scenarios import Scenario
from evaluation.simulated_user import BOT, USER, UserModel, next_message, speaker_for

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Bot:
    """The engine under test, as a runtime opened it."""

    engine: Engine
    prompts: PromptLibrary
    # The knowledge base's documents by id: the file each was loaded from, relative to
    # its folder (empty without a knowledge base).
    documents: Mapping[int, str] = field(default_factory=dict)


async def play(
    bot: Bot,
    user: UserModel,
    scenario: Scenario,
    *,
    variant: str,
    repeat: int,
    max_rounds: int,
    chat_key: str,
) -> RunResult:
    result = RunResult(scenario.id, variant, repeat, max_rounds=max_rounds)
    started = time.perf_counter()
    try:
        with recording() as calls:
            await _consult(bot, user, scenario, result, chat_key, calls)
    except Exception as exc:  # any failure ends this run only, and says why
        log.debug("run %s/%s/%d failed", scenario.id, variant, repeat, exc_info=True)
        result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = time.perf_counter() - started
    return result


async def _consult(
    bot: Bot,
    user: UserModel,
    scenario: Scenario,
    result: RunResult,
    key: str,
    calls: list[CompletionRequest],
) -> None:
    engine = bot.engine
    group = scenario.is_group
    await engine.settings.set_role(key, scenario.role)
    await engine.settings.set_max_rounds(key, result.max_rounds)
    name = _name(scenario, 0)
    result.transcript.append(SeenMessage(name, scenario.first_message))
    author, author_id = _author(scenario, name)
    reply = await engine.turns.ask(
        UserMessage(key, scenario.first_message, author=author, author_id=author_id, is_group=group)
    )
    replies = 1
    sent = 0  # the calls before the reply's turn
    while True:
        _record(result, reply, _given(calls[sent:], bot.documents))
        sent = len(calls)
        if reply.is_final:
            break
        if replies > result.max_rounds:  # the service's last round is final: never here
            raise RuntimeError(f"no final answer after {replies} replies")
        if scenario.behaviour.press_final_now_after_round == reply.round:
            name = _name(scenario, reply.round)
            text = request_text(bot.prompts, scenario.language)
            result.transcript.append(SeenMessage(name, text, final_now=True))
            result.final_now_pressed = True
            reply = await engine.turns.answer_now(
                key, author=_author(scenario, name)[0], is_group=group, language=scenario.language
            )
        else:
            name, text = await next_message(user, scenario, result.transcript, reply.round)
            reply = await _answer(engine, key, reply, result, name, text, scenario)
        replies += 1
    result.final_answer = reply.text
    result.rounds_used = reply.round
    result.early_finish = reply.early_finish and not result.final_now_pressed
    result.model_ready = reply.model_ready


async def _answer(
    engine: Engine,
    key: str,
    asked: Reply,
    result: RunResult,
    name: str,
    text: str,
    scenario: Scenario,
) -> Reply:
    """Send the user's message after `asked`: its choices among the round's options as
    answers to that round, the rest typed; a message without choices as it is."""
    author, author_id = _author(scenario, name)
    group = scenario.is_group
    found = asked.questions
    if found is None or not found.has_options:
        result.transcript.append(SeenMessage(name, text))
        return await engine.turns.ask(
            UserMessage(key, text, author=author, author_id=author_id, is_group=group)
        )
    result.questions_with_options += sum(1 for q in found.questions if q.options)
    choices = read_choices(text, found)
    picks = [_pick(found, a.question, a.option) for a in choices.answers if a.option is not None]
    result.transcript.append(SeenMessage(name, text, picks=picks))
    result.answered_by_option += len(picks)
    return await engine.turns.ask(
        UserMessage(
            key,
            choices.typed,
            author=author,
            author_id=author_id,
            is_group=group,
            answers=choices.answers,
            ref=RoundRef(asked.consultation_id, asked.round) if picks else None,
        )
    )


def _pick(found: ClarifyingRound, question: int, option: int) -> Pick:
    """The choice as the bot receives it: the `question — option` line."""
    asked = found.questions[question - 1]
    return Pick(question, option, f"{asked.text} — {asked.options[option - 1]}")


def _given(turn: Sequence[CompletionRequest], documents: Mapping[int, str]) -> list[GivenPassage]:
    """The passages the turn's last call was given (the one whose reply the turn kept)."""
    if not turn:
        return []
    return [
        GivenPassage(
            label(position),
            documents.get(passage.document_id, ""),
            passage.title,
            passage.section,
            passage.text,
        )
        for position, passage in enumerate(turn[-1].knowledge, 1)
    ]


def _record(result: RunResult, reply: Reply, given: list[GivenPassage]) -> None:
    seen = SeenMessage(
        BOT, reply.text, round=reply.round, model_ready=reply.model_ready, knowledge=given
    )
    if not reply.is_final:
        found = reply.questions
        seen.questions = (
            [AskedQuestion(q.text, list(q.options)) for q in found.questions] if found else []
        )
        seen.asked = len(found.questions) if found else asked_in_text(reply.text)
        result.clarifying_rounds += 1
        result.structured_rounds += int(found is not None)
        result.questions_asked += seen.asked
    result.transcript.append(seen)
    result.tokens_in += reply.usage.prompt_tokens
    result.tokens_out += reply.usage.completion_tokens


def asked_in_text(text: str) -> int:
    """How many questions a round asked in text asks: its question marks (a run of them
    counts once), at least one."""
    return max(1, len(_QUESTION_MARKS.findall(text)))


_QUESTION_MARKS = re.compile(r"[?？]+")


def _name(scenario: Scenario, message_index: int) -> str:
    speaker = speaker_for(scenario, message_index)
    return speaker.name if speaker is not None else USER


def _author(scenario: Scenario, name: str) -> tuple[str | None, int | None]:
    """The author and author id a group member's messages carry; none in a private chat."""
    for index, speaker in enumerate(scenario.speakers):
        if speaker.name == name:
            return name, 1000 + index
    return None, None
