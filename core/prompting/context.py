"""The bounded context window sent to the model: what the user said is kept first.

Invariants of `build_model_messages`' result: the system message comes first; after it
the roles strictly alternate user/assistant starting with user (providers such as
Perplexity reject two user messages in a row). What the user said matters most to the
answer, so when the conversation is over the budget it gives up, in this order:
1. the model's older replies are shortened to their beginning and end (an excerpt note
   marks the cut), then its most recent reply too — never below `MIN_KEPT_CHARS`;
2. the reference material of the system message (`Reference`: the knowledge-base
   excerpts) is left out, its last (least relevant) item first, down to none;
3. the bodies of documents the user attached to later messages (not the original
   request, not the latest message) are replaced by their one-line reference by name,
   oldest first;
4. an outsized user message (a pasted document) is shortened alike, as long as no
   message is cut below `ORDINARY_MESSAGE_CHARS`;
5. the model's older replies are left out, oldest first (the user's messages around
   them are merged, in order);
6. the user's messages are shortened alike;
7. the user's older messages are left out, oldest first.
The original request (the first user message), the latest user message and the most
recent reply of the model (the most recent exchange) are never left out, and no user
message is left out while the rest would fit with it. Whatever of the conversation is
shortened or left out is said in an omission note at the end of the system message;
reference items left out are not (the model cannot ask for them), and the result says
how many were kept (`ContextWindow.references`), so what an answer cites is known.
Past all that (one huge message), every kept message is cut to a common share, never
below `MIN_KEPT_CHARS`: the size of a request is bounded whatever one message holds.

Documents of the original request (`documents_budget_chars`). A document is read into
the stored message whole up to MAX_DOCUMENT_CHARS, which is more than the whole history
budget; counted against it, a document sent with the request would squeeze out every
answer the user gave, and would itself be cut ever shorter as the consultation grows.
Yet it is the request: the answer is about it, in every round. So the document blocks
of the first user message have an allowance of their own on top of the history budget:
they stay in the context in every round, cut to their beginning and end only when
together they exceed it, while the rest of the conversation (the request's typed words
with a reference in place of each document) is fitted to the history budget as above.
They are put back where they were unless the typed words had to be shortened, when
they follow them. Documents sent later have no such allowance: they are part of the
history, and give way (step 2) before anything the user typed does.

Tools an earlier reply called (`Message.tool_uses`) are put before that reply, in its
message, as the `tool_uses_note` writes them (each result shortened to a line): part of
the reply, they count against the budget and give way with it. As text, not as `tool`
messages, so the roles still alternate and a server without tools reads them too.
Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from core.domain.attachments import DOCUMENT_BLOCK, document_names, without_document_bodies
from core.domain.consultation import Message, Role
from core.domain.tools import ToolUse
from core.prompting.excerpt import excerpt

SEPARATOR = "\n\n"
CHARS_PER_TOKEN = 4
MIN_KEPT_CHARS = 1000
"""A kept message is never cut below this, however small the budget: a message that
short is cheap, and cutting it further would lose its point."""
ORDINARY_MESSAGE_CHARS = 4000
"""User messages up to this long (MAX_INPUT_CHARS' default) are never shortened while a
reply of the model can be left out instead."""
CUT_NOTE_CHARS = 100
"""Room for the note a document's reader adds when it cut the text: the documents'
allowance counts their text, not their delimiters or that note."""


@dataclass(frozen=True, slots=True)
class Omissions:
    """What the window gave up, for the omission note."""

    replies: int = 0  # stored replies of the model left out
    messages: int = 0  # stored messages of the user left out
    shortened: int = 0  # chat messages (or documents) cut to their beginning and end
    documents: int = 0  # document bodies of later messages shown by name only

    @property
    def left_out(self) -> int:
        return self.replies + self.messages

    def __bool__(self) -> bool:
        return bool(self.left_out or self.shortened or self.documents)


@dataclass(frozen=True, slots=True)
class Reference:
    """Reference material for the system message, `count` items ranked best first:
    `render(n)` is the part holding the first `n` of them (1 ≤ n ≤ count), which
    follows the system prompt."""

    count: int
    render: Callable[[int], str]


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """The messages to send, and how many items of the `Reference` they hold."""

    messages: list[dict[str, str]]
    references: int = 0


@dataclass(slots=True)
class _MergedMessages:
    """Consecutive messages of one role merged into one chat message."""

    role: Role
    content: str
    sources: int  # how many stored messages it stands for
    named: str | None = None  # `content` with its document bodies replaced by references
    documents: int = 0  # how many document blocks `named` stands in for


@dataclass(frozen=True, slots=True)
class _Plan:
    """Which merged messages are kept, and which kept ones may be shortened to a common share."""

    kept: tuple[int, ...]
    shortenable: frozenset[int]
    min_share: int = MIN_KEPT_CHARS  # the plan fails rather than cut below this
    named: frozenset[int] = frozenset()  # merged messages whose document bodies are references
    references: int = 0  # the reference items the system message keeps


def build_model_messages(
    system_prompt: str,
    history: Sequence[Message],
    *,
    is_group: bool,
    budget_chars: int,
    omission_note: Callable[[Omissions], str],
    excerpt_note: Callable[[int], str],
    documents_budget_chars: int | None = None,
    reference: Reference | None = None,
    tool_uses_note: Callable[[Sequence[ToolUse]], str] | None = None,
) -> ContextWindow:
    """OpenAI chat messages for `history`, fitted to `budget_chars` characters of content.

    Consecutive user messages are merged (blank line between); in groups each user
    message is prefixed with ``"{author}: "``. The system message is `system_prompt`,
    then the `reference` part, which counts against the budget. If everything fits
    nothing changes; otherwise the first plan of `_plans` that fits is used (the last one
    when none does), its note (`omission_note`) appended to the system message.
    Assistant messages before the first user message have no request to answer and are
    not sent. With `documents_budget_chars`, the first user message's documents have
    that allowance of their own (see the module's docstring). With `tool_uses_note`, a
    reply's tool calls go before it, as that note writes them.
    """
    system_of = _SystemPrompts(system_prompt, reference)
    merged = _merge(history, is_group=is_group, tool_uses_note=tool_uses_note)
    if not merged:
        return system_of.window([], system_of.count)
    documents = _RequestDocuments.take(merged[0], documents_budget_chars, excerpt_note)
    size = system_of.size(system_of.count) + sum(len(entry.content) for entry in merged)
    if size <= budget_chars and not documents.cut:
        merged[0].content = documents.put_back(merged[0].content)
        chat = [{"role": t.role.value, "content": t.content} for t in merged]
        return system_of.window(chat, system_of.count)

    note_size = _NoteSizes(omission_note)
    for plan in _plans(merged, system_of.count):
        room = budget_chars - system_of.size(plan.references)
        share, omissions = _fit(merged, plan, room, note_size, documents.cut)
        if share is not None:
            break
    else:
        share = MIN_KEPT_CHARS  # what must be kept, cut this far: bounded, if over the budget
    note = omission_note(omissions) if omissions else ""
    messages: list[dict[str, str]] = []
    for index in plan.kept:
        entry = merged[index]
        content = _content(entry, index, plan)
        if index in plan.shortenable and share and len(content) > share:
            content = excerpt(content, share, excerpt_note)
        if index == 0:
            content = documents.put_back(content, shortened=content != entry.content)
        if messages and messages[-1]["role"] == entry.role.value:
            messages[-1]["content"] += SEPARATOR + content
        else:
            messages.append({"role": entry.role.value, "content": content})
    return system_of.window(messages, plan.references, note)


class _SystemPrompts:
    """The system message with the first `n` reference items, each rendered once."""

    __slots__ = ("_parts", "_prompt", "_reference", "count")

    def __init__(self, system_prompt: str, reference: Reference | None) -> None:
        self._prompt = system_prompt
        self._reference = reference
        self.count = reference.count if reference is not None else 0
        self._parts: dict[int, str] | None = None

    def text(self, n: int) -> str:
        if n <= 0 or self._reference is None:
            return self._prompt
        if self._parts is None:
            self._parts = {}
        if n not in self._parts:
            self._parts[n] = self._prompt + SEPARATOR + self._reference.render(n)
        return self._parts[n]

    def size(self, n: int) -> int:
        return len(self.text(n))

    def window(self, chat: list[dict[str, str]], references: int, note: str = "") -> ContextWindow:
        content = self.text(references)
        if note:
            content += SEPARATOR + note
        return ContextWindow([{"role": "system", "content": content}, *chat], references)


@dataclass(frozen=True, slots=True)
class _RequestDocuments:
    """The document blocks of the first user message, fitted to their own allowance, and the
    references standing for them in that message while the rest is fitted."""

    blocks: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    cut: int = 0  # how many blocks were shortened to fit the allowance

    @classmethod
    def take(
        cls, entry: _MergedMessages, budget: int | None, excerpt_note: Callable[[int], str]
    ) -> _RequestDocuments:
        """Take the blocks out of `entry` (leaving references); none without a budget."""
        found = [match.group(0) for match in DOCUMENT_BLOCK.finditer(entry.content)]
        if budget is None or not found:
            return cls()
        entry.content = without_document_bodies(entry.content)
        framing = sum(len(b) - len(b.split("\n", 1)[1].rsplit("\n", 1)[0]) for b in found)
        room = budget + framing + CUT_NOTE_CHARS * len(found)
        share = _common_share([len(block) for block in found], room)
        if share is not None:
            share = max(share, MIN_KEPT_CHARS)
        blocks = tuple(
            excerpt(block, share, excerpt_note) if share and len(block) > share else block
            for block in found
        )
        cut = sum(1 for block, whole in zip(blocks, found, strict=True) if block != whole)
        return cls(blocks, tuple(without_document_bodies(block) for block in found), cut)

    def put_back(self, content: str, *, shortened: bool = False) -> str:
        """`content` with each reference replaced by its block, in order; when the message was
        shortened (a reference may be cut), the blocks follow it instead."""
        if not self.blocks:
            return content
        if not shortened:
            parts, start = [], 0
            for reference, block in zip(self.references, self.blocks, strict=True):
                at = content.find(reference, start)
                if at < 0:
                    break
                parts += [content[start:at], block]
                start = at + len(reference)
            else:
                return "".join(parts) + content[start:]
        return SEPARATOR.join((content, *self.blocks))


def approx_tokens(text: str) -> int:
    """A rough token count: one token per 4 characters, rounded up.

    Good enough to compare rounds in the benchmark (English averages about 4
    characters a token with OpenAI tokenizers, Cyrillic fewer); never use it to
    enforce a provider's limit.
    """
    return -(-len(text) // CHARS_PER_TOKEN)


def _merge(
    history: Sequence[Message],
    *,
    is_group: bool,
    tool_uses_note: Callable[[Sequence[ToolUse]], str] | None = None,
) -> list[_MergedMessages]:
    """Fold the stored messages into alternating `_MergedMessages` that start with the user's."""
    merged: list[_MergedMessages] = []
    for message in history:
        if not merged and message.role is not Role.USER:
            continue
        text = message.text
        if is_group and message.role is Role.USER and message.author:
            text = f"{message.author}: {text}"
        if message.tool_uses and tool_uses_note is not None:
            text = tool_uses_note(message.tool_uses) + SEPARATOR + text
        if merged and merged[-1].role is message.role:
            merged[-1].content += SEPARATOR + text
            merged[-1].sources += 1
        else:
            merged.append(_MergedMessages(message.role, text, 1))
    users = [i for i, entry in enumerate(merged) if entry.role is Role.USER]
    for index in users[1:-1]:  # neither the original request nor the latest message
        if count := len(document_names(merged[index].content)):
            merged[index].named = without_document_bodies(merged[index].content)
            merged[index].documents = count
    return merged


def _content(entry: _MergedMessages, index: int, plan: _Plan) -> str:
    """The entry's text under `plan`: with its documents by name, if the plan says so."""
    return entry.named if index in plan.named and entry.named is not None else entry.content


def _plans(merged: list[_MergedMessages], references: int = 0) -> Iterator[_Plan]:
    """Ever more aggressive plans, in the order of the module's docstring (`references`:
    the reference items there are, kept by the first plans)."""
    every = tuple(range(len(merged)))
    users = [i for i in every if merged[i].role is Role.USER]
    replies = [i for i in every if merged[i].role is Role.ASSISTANT]
    last_user = users[-1]
    recent = replies[-1] if replies else None  # the most recent exchange's reply
    older_replies = [i for i in replies if i != recent]
    older_users = [i for i in users if i not in (0, last_user)]

    yield _Plan(every, frozenset(older_replies), references=references)
    yield _Plan(every, frozenset(replies), references=references)
    for kept_references in range(references - 1, -1, -1):
        yield _Plan(every, frozenset(replies), references=kept_references)
    named: frozenset[int] = frozenset()
    for index in (i for i in users if merged[i].named is not None):
        named |= {index}
        yield _Plan(every, frozenset(replies), named=named)
    yield _Plan(every, frozenset(every), min_share=ORDINARY_MESSAGE_CHARS, named=named)
    kept = list(every)
    for index in older_replies:
        kept.remove(index)
        yield _Plan(tuple(kept), frozenset(replies), named=named)
    yield _Plan(tuple(kept), frozenset(kept), named=named)
    for index in older_users:
        kept.remove(index)
        yield _Plan(tuple(kept), frozenset(kept), named=named)


def _fit(
    merged: list[_MergedMessages],
    plan: _Plan,
    room: int,
    note_size: Callable[[Omissions], int],
    cut_documents: int = 0,
) -> tuple[int | None, Omissions]:
    """The common share the plan's shortenable entries are cut to (0: none is cut), or None
    when the plan does not fit `room` even with them at `MIN_KEPT_CHARS`; and what the
    plan gives up (`cut_documents`: the request's documents cut to their allowance)."""
    kept = set(plan.kept)
    sizes = [len(_content(entry, i, plan)) for i, entry in enumerate(merged)]
    left_out = [i for i in range(len(merged)) if i not in kept]
    replies = sum(merged[i].sources for i in left_out if merged[i].role is Role.ASSISTANT)
    messages = sum(merged[i].sources for i in left_out if merged[i].role is Role.USER)
    named = sum(merged[i].documents for i in plan.named & kept)
    merges = sum(
        1
        for a, b in zip(plan.kept, plan.kept[1:], strict=False)
        if merged[a].role is merged[b].role
    )
    fixed = merges * len(SEPARATOR) + sum(sizes[i] for i in kept - plan.shortenable)
    cuttable = [sizes[i] for i in plan.kept if i in plan.shortenable]

    def omissions(shortened: int) -> Omissions:
        return Omissions(replies, messages, shortened + cut_documents, named)

    whole = omissions(0)
    if fixed + sum(cuttable) + note_size(whole) <= room:
        return 0, whole
    worst = omissions(len(cuttable))
    if not cuttable:
        return None, whole
    share = _common_share(cuttable, room - fixed - note_size(worst))
    if share is None:
        return 0, whole
    if share < plan.min_share:
        return None, omissions(sum(1 for s in cuttable if s > MIN_KEPT_CHARS))
    return share, omissions(sum(1 for size in cuttable if size > share))


class _NoteSizes:
    """The room an omission note takes, each shape of note rendered once: a template's
    output depends on a count only through whether it is zero and its text, whose length
    is its number of digits (the plans of one request give up similar counts)."""

    def __init__(self, omission_note: Callable[[Omissions], str]) -> None:
        self._note = omission_note
        self._sizes: dict[tuple[int, ...], int] = {}

    def __call__(self, omissions: Omissions) -> int:
        if not omissions:
            return 0
        counts = (
            omissions.replies,
            omissions.messages,
            omissions.shortened,
            omissions.left_out,
            omissions.documents,
        )
        shape = tuple(len(str(count)) if count else 0 for count in counts)
        if shape not in self._sizes:
            self._sizes[shape] = len(self._note(omissions)) + len(SEPARATOR)
        return self._sizes[shape]


def _common_share(sizes: list[int], room: int) -> int | None:
    """The size every longer message is cut to so that all fit `room` (None: they fit;
    0 or less: they cannot). Messages shorter than their fair share keep their size and
    leave the rest to the others."""
    if sum(sizes) <= room:
        return None
    left = room
    for count, size in enumerate(sorted(sizes)):
        share = left // (len(sizes) - count)
        if size > share:
            return share
        left -= size
    return None  # unreachable: the sizes were over `room`
