"""The exact knowledge measures of a knowledge scenario's run, from what the run recorded:
the passages each of the bot's model calls was given and the texts it wrote.

Definitions (each an exact check, no model asked):
- a passage *holds* a fact when it comes from the fact's document and holds its
  `passage` literal; a text *states* a fact when it holds one of its `answer` literals.
  Literals are compared case-blind, with whitespace and Markdown's emphasis marks
  (`*`, `_`, `` ` ``) ignored and ё read as е ("1 990 ₽" matches "1990 ₽", "**24**
  months" matches "24 months");
- *retrieved*: the needed facts held by a passage the final answer's call was given
  (hit rate at k = retrieved / facts, k being KNOWLEDGE_TOP_K, the passages asked for);
- *cited*: the distinct labels the final answer cites (`[K1, K3]`: two), read as the
  engine reads them (`core.domain.knowledge_sources.cited_labels`); *cited with a fact*:
  those naming a passage the call was given that holds a needed fact — a label naming
  no given passage (`[K9]` with six) counts as cited, never as holding one (citation
  precision = cited with a fact / cited);
- *redundant*: the clarifying rounds' questions (a structured round's each, a text
  round's each sentence ending in "?") holding an `asked_as` phrase of a fact that a
  passage given to that round's call holds — a question the material already answered.
  It counts only the questions the scenario foresees, so it is a floor.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.domain.knowledge_sources import cited_labels
from evaluation.results import GivenPassage, KnowledgeCheck, RunResult, SeenMessage
from evaluation.scenarios import Fact, KnowledgeNeeds
from evaluation.simulated_user import BOT

_IGNORED = re.compile(r"[\s*_`]+")
_TEXT_QUESTION = re.compile(r"[^.!?？\n]*[?？]+")


def plain(text: str) -> str:
    """`text` as literals are compared (see the module)."""
    return _IGNORED.sub("", text.casefold().replace("ё", "е"))


def holds(text: str, literal: str) -> bool:
    return plain(literal) in plain(text)


def holds_fact(passage: GivenPassage, fact: Fact) -> bool:
    return passage.document == fact.document and holds(passage.text, fact.passage)


def final_passages(result: RunResult) -> list[GivenPassage]:
    """The passages the final answer's call was given (none without a final answer)."""
    replies = [seen for seen in result.transcript if seen.speaker == BOT]
    return replies[-1].knowledge if replies and result.final_answer else []


def check_knowledge(needs: KnowledgeNeeds, result: RunResult) -> KnowledgeCheck:
    """The run's measures; a run without a final answer counts nothing retrieved or cited."""
    replies = [seen for seen in result.transcript if seen.speaker == BOT]
    final = final_passages(result)
    answer = result.final_answer
    labels = cited_labels(answer)
    rounds = replies[:-1] if result.final_answer else replies  # the clarifying rounds
    return KnowledgeCheck(
        facts=len(needs.facts),
        retrieved=sum(1 for fact in needs.facts if any(holds_fact(p, fact) for p in final)),
        stated=sum(1 for fact in needs.facts if any(holds(answer, a) for a in fact.answer)),
        given=len(final),
        cited=len(labels),
        cited_with_fact=sum(1 for n in labels if _holds_any(final, n, needs.facts)),
        questions=sum(seen.asked for seen in rounds),
        redundant=sum(redundant_questions(seen, needs.facts) for seen in rounds),
    )


def _holds_any(passages: Sequence[GivenPassage], number: int, facts: Sequence[Fact]) -> bool:
    if not 1 <= number <= len(passages):
        return False
    return any(holds_fact(passages[number - 1], fact) for fact in facts)


def questions_of(seen: SeenMessage) -> list[str]:
    """A clarifying round's questions: a structured round's, else its sentences ending
    in a question mark."""
    if seen.questions:
        return [question.text for question in seen.questions]
    return [match.group(0) for match in _TEXT_QUESTION.finditer(seen.text)]


def redundant_questions(seen: SeenMessage, facts: Sequence[Fact]) -> int:
    """The round's questions asking for a fact one of its given passages holds."""
    answered = [f for f in facts if any(holds_fact(p, f) for p in seen.knowledge)]
    phrases = [phrase for fact in answered for phrase in fact.asked_as]
    return sum(1 for q in questions_of(seen) if any(holds(q, phrase) for phrase in phrases))
