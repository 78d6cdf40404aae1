"""A consultation as a document to keep: its parts in order, and their Markdown.

Invariants: `transcript_of` is pure and total — any consultation gives a transcript,
never an error; its parts follow the stored messages in order: the request (the first
user message), then each clarifying round (what the bot asked, then the user's answer, None
while unanswered), then the final answer, which only a COMPLETE consultation has (the
reply to its last round), then the follow-ups asked after it (each question, then its
answer, None while unanswered). A provider's sources are part of a reply's text when
the model wrote them there: the store keeps no provider citations, so nothing is added;
the knowledge-base passages the final answer and each follow-up's answer cite are kept
with them and listed under them (`knowledge_markdown`), and so are the tools each reply
used, each with its short arguments and its result (cut at
`core.domain.tool_uses.RESULT_CHARS`) or its error (`tools_markdown`). Labels
are the caller's `TranscriptLabels` (English unless an edge gives them in the reader's
language from its catalogs); the one date is ISO 8601 in UTC, the one kind of number a
round's or follow-up's ordinal, the same in every language. Each text is cut at
`MAX_PART_CHARS`, so a document costs at most a bounded amount whatever was stored, and
a lone surrogate becomes U+FFFD, so every text encodes as UTF-8. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from core.domain.clarifying import ClarifyingRound, option_lines
from core.domain.consultation import Consultation, Message, Role
from core.domain.knowledge_sources import KnowledgeSource
from core.domain.tool_uses import result_text, used_line
from core.domain.tools import ToolUse
from core.turns.follow_ups import FollowUpPart, final_index, follow_up_parts

MAX_TITLE_CHARS = 80
MAX_PART_CHARS = 100_000
"""Longest text a part keeps (a stored reply is far shorter: `max_answer_chars`)."""


@dataclass(frozen=True, slots=True)
class TranscriptLabels:
    """The words a document is labelled with, in one language; English by default. Core
    loads no catalog: an edge that has them builds these in the reader's language.
    `date` holds `{date}` (the start as `2025-06-15 14:26 UTC`, locale-neutral ISO 8601),
    `round` and `follow_up` hold `{number}`, `tool_failed` `{call}`."""

    date: str = "Date: {date}"
    request: str = "Request"
    round: str = "Clarifying round {number}"
    questions: str = "Questions"
    answer: str = "Answer"
    not_answered: str = "(not answered)"
    final: str = "Final answer"
    untitled: str = "Consultation"
    follow_ups: str = "Follow-up questions"
    follow_up: str = "Follow-up {number}"
    knowledge_sources: str = "Sources from the knowledge base"
    page: str = "page {page}"
    tools_used: str = "Looked up"
    tool_failed: str = "{call} — failed"

    def dated(self, at: datetime) -> str:
        return self.date.format(date=f"{at:%Y-%m-%d %H:%M} UTC")

    def round_of(self, number: int) -> str:
        return self.round.format(number=number)

    def follow_up_of(self, number: int) -> str:
        return self.follow_up.format(number=number)

    def page_of(self, page: int) -> str:
        return self.page.format(page=page)

    def failed(self, call: str) -> str:
        return self.tool_failed.format(call=call)


ENGLISH = TranscriptLabels()


@dataclass(frozen=True, slots=True)
class TranscriptLanguages:
    """The languages a document can be labelled in (codes such as `es`, `pt_BR`), English
    first, and its labels in each: what an edge without catalogs of its own is given."""

    codes: tuple[str, ...]
    labels: Callable[[str], TranscriptLabels]


_SPACE = re.compile(r"\s+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE_END = re.compile(r"\r\n|\r|\n")
_MARKDOWN_SIGN = re.compile(r"[\\`*_{}\[\]<>()#!|~&$]")
_BACKTICKS = re.compile("`+")


@dataclass(frozen=True, slots=True)
class RoundPart:
    """One clarifying round: what the bot asked (`questions` for a structured round),
    and the user's answer (None while unanswered); the tools it used before it asked."""

    asked: str
    questions: ClarifyingRound | None
    answer: str | None
    tools: tuple[ToolUse, ...] = ()


@dataclass(frozen=True, slots=True)
class Transcript:
    """A consultation's parts in order, with the labels of the reader's language."""

    title: str
    started_at: datetime
    labels: TranscriptLabels
    request: str
    rounds: tuple[RoundPart, ...]
    final_answer: str | None
    follow_ups: tuple[FollowUpPart, ...] = ()
    final_sources: tuple[KnowledgeSource, ...] = ()  # the knowledge base's, the answer cites
    final_tools: tuple[ToolUse, ...] = ()  # the tools the final answer used


def transcript_of(consultation: Consultation, labels: TranscriptLabels = ENGLISH) -> Transcript:
    """The consultation's transcript, labelled with `labels`."""
    index = final_index(consultation)
    messages = consultation.messages if index is None else consultation.messages[: index + 1]
    joined = _joined_messages(messages)
    request = joined[0][1] if joined and joined[0][0] is Role.USER else consultation.initial_request
    replies = [
        (i, text, q, used)
        for i, (role, text, q, used) in enumerate(joined)
        if role is Role.ASSISTANT
    ]
    final: str | None = None
    final_tools: tuple[ToolUse, ...] = ()
    if index is not None and joined and joined[-1][0] is Role.ASSISTANT:
        final, final_tools = joined[-1][1], joined[-1][3]
        replies = replies[:-1]
    rounds = []
    for at, asked, questions, used in replies:
        following = joined[at + 1] if at + 1 < len(joined) else None
        answer = following[1] if following is not None and following[0] is Role.USER else None
        rounds.append(RoundPart(asked, questions, answer, used))
    follow_ups = tuple(
        FollowUpPart(
            _cut(part.question),
            None if part.answer is None else _cut(part.answer),
            part.sources,
            part.tools,
        )
        for part in follow_up_parts(consultation)
    )
    return Transcript(
        title=_cut(title_of(request)),
        started_at=datetime.fromtimestamp(consultation.created_at, UTC),
        labels=labels,
        request=_cut(request),
        rounds=tuple(rounds),
        final_answer=final,
        follow_ups=follow_ups,
        final_sources=()
        if final is None or index is None
        else consultation.messages[index].knowledge_sources,
        final_tools=final_tools,
    )


def title_of(request: str) -> str:
    """The request's first non-blank line, cut at a word within `MAX_TITLE_CHARS`
    (with "…"); empty for a blank request."""
    line = next((ln for ln in request.splitlines() if ln.strip()), "")
    line = _SPACE.sub(" ", line).strip().lstrip("#>*- ").strip()
    if len(line) <= MAX_TITLE_CHARS:
        return line
    cut = line[: MAX_TITLE_CHARS - 1]
    if " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:") + "…"


def render_markdown(transcript: Transcript) -> str:
    """The transcript as one Markdown document: title, date, request, rounds, final answer,
    follow-ups. The person's messages (the request, each answer, each follow-up question) are
    block quotes (`quoted`), so none can forge a section of the document."""
    t, labels = transcript, transcript.labels
    parts = [
        f"# {_one_line(t.title) or labels.untitled}",
        f"*{labels.dated(t.started_at)}*",
        f"## {labels.request}",
        quoted(t.request),
    ]
    for number, part in enumerate(t.rounds, 1):
        parts.append(f"## {labels.round_of(number)}")
        parts.append(f"### {labels.questions}")
        parts.append(round_markdown(part))
        if part.tools:
            parts.append(tools_markdown(part.tools, labels))
        parts.append(f"### {labels.answer}")
        parts.append(quoted(part.answer) if part.answer is not None else f"*{labels.not_answered}*")
    if t.final_answer is not None:
        parts.append(f"## {labels.final}")
        parts.append(t.final_answer)
        if t.final_sources:
            parts.append(knowledge_markdown(t.final_sources, labels))
        if t.final_tools:
            parts.append(tools_markdown(t.final_tools, labels))
    if t.follow_ups:
        parts.append(f"## {labels.follow_ups}")
    for number, follow_up in enumerate(t.follow_ups, 1):
        parts.append(f"### {labels.follow_up_of(number)}")
        parts.append(quoted(follow_up.question))
        parts.append(f"#### {labels.answer}")
        parts.append(
            follow_up.answer if follow_up.answer is not None else f"*{labels.not_answered}*"
        )
        if follow_up.sources:
            parts.append(knowledge_markdown(follow_up.sources, labels))
        if follow_up.tools:
            parts.append(tools_markdown(follow_up.tools, labels))
    return _SURROGATE.sub("\ufffd", "\n\n".join(p.strip("\n") for p in parts) + "\n")


def knowledge_markdown(sources: Sequence[KnowledgeSource], labels: TranscriptLabels) -> str:
    """The knowledge-base passages an answer cites, under its bold heading, one list item
    each: "[K1] title › heading path, page 3". Titles and headings are the documents'
    text, escaped, so nothing in them reads as Markdown."""
    lines = [f"**{_escaped(labels.knowledge_sources)}**", ""]
    for source in sources:
        where = source.title + (f" › {source.section}" if source.section else "")
        if source.page is not None:
            where += ", " + labels.page_of(source.page)
        lines.append(f"- {_escaped(f'[{source.ref}] {where}')}")
    return "\n".join(lines)


def tools_markdown(uses: Sequence[ToolUse], labels: TranscriptLabels) -> str:
    """The tools a reply used, under their bold heading: each call on a line of its own
    ("time · get_current_time (timezone=UTC)", escaped, so nothing in it reads as
    Markdown), then its result as a code block (a fence longer than any run of backticks
    in it, so no result can close it), or, for a failed call, its mark and its error."""
    lines = [f"**{_escaped(labels.tools_used)}**"]
    for use in uses:
        call = used_line(use)
        if use.ok:
            lines += ["", _escaped(call)]
            result = _SURROGATE.sub("\ufffd", result_text(use))
            if result.strip():
                fence = "`" * max(3, _longest_backticks(result) + 1)
                lines += ["", fence, result, fence]
        else:
            lines += ["", _escaped(f"{labels.failed(call)}: {result_text(use)}")]
    return "\n".join(lines)


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def _escaped(text: str) -> str:
    """`text` on one line with every character inline Markdown reads as a sign
    backslash-escaped, so it shows as it is (the line opens with "[", never a marker)."""
    return _MARKDOWN_SIGN.sub(lambda found: "\\" + found.group(0), _one_line(text))


def quoted(text: str) -> str:
    """`text` as a Markdown block quote, every line behind `>`: what a person wrote (a
    heading such as "## Final answer", a fence, a rule) stays inside the quote, below the
    document's own headings, and the quote cannot be closed from within it. Lines are split
    where CommonMark ends them (LF, CR LF, CR), so no line escapes the marker."""
    lines = _LINE_END.split(text.strip("\r\n"))
    return "\n".join(f"> {line}" if line.strip() else ">" for line in lines)


def round_markdown(part: RoundPart) -> str:
    """What the bot asked in a round: a structured round's preamble, then its questions as
    a numbered list with their options (`1a) …`) under each; the text of any other."""
    found = part.questions
    if found is None or not found.questions:
        return part.asked
    lines = [found.preamble, ""] if found.preamble else []
    for number, question in enumerate(found.questions, 1):
        lines.append(f"{number}. {question.text}")
        offered = [list(q.options) if n == number else [] for n, q in enumerate(found.questions, 1)]
        lines.extend(f"   - {line}" for line in option_lines(offered))
    return "\n".join(lines)


_Joined = tuple[Role, str, ClarifyingRound | None, tuple[ToolUse, ...]]


def _joined_messages(messages: list[Message]) -> list[_Joined]:
    """Consecutive user messages joined into one message; each assistant message its own,
    with its questions and the tools it used."""
    joined: list[_Joined] = []
    for message in messages:
        text = _cut(message.text)
        if message.role is Role.USER and joined and joined[-1][0] is Role.USER:
            joined[-1] = (Role.USER, _cut(joined[-1][1] + "\n\n" + text), None, ())
        else:
            joined.append((message.role, text, message.questions, message.tool_uses))
    return joined


def _cut(text: str) -> str:
    """At most `MAX_PART_CHARS` characters, a lone surrogate (no character) replaced."""
    text = text if len(text) <= MAX_PART_CHARS else text[: MAX_PART_CHARS - 1] + "…"
    return _SURROGATE.sub("\ufffd", text)


def _one_line(text: str) -> str:
    return _SPACE.sub(" ", text).strip()
