"""One turn's model calls with tools: the model asks, the toolbox runs, the model reads.

`ToolLoop` is a `core.domain.ports.Completer` made for one turn around the engine's
completer (each of its calls reserved and settled in the turn's quota hold, and stoppable
by a reset, as any). A request offering tools (`CompletionRequest.tools`) is answered so:

- the model is called with the tools; a reply asking for tool calls gets the assistant
  message holding them and one `tool` message per call (the result, or "error: …" in
  words the model reads) appended, the calls run through the `Toolbox` (those of one
  reply at once, at most `ToolLimits.parallel` at a time, `on_tool` called as each
  starts), and the model is called again;
- at most `ToolLimits.max_calls` tool calls run per turn (across all its calls): calls
  asked past that are answered "not run" and the model is called once more without
  tools, told to answer with what it has (`answer_now`);
- the completion returned is the last call's, its text every call's text joined (what
  the person saw stream), its usage the sum of every call's: the turn is charged for all;
- a reply whose whole text is a call written as text (`<tool_call>{…}</tool_call>`, or a
  JSON object naming an offered tool with its arguments: a server that does not parse
  its model's calls) is taken as that call; its text is held back while it may be one,
  so the person never sees it;
- a request with a response format (a clarifying round's required schema, a session's
  JSON answer) is asked with the tools and without the format; its reply, once it asks
  for no more calls, is the answer when it is a JSON object, else the request is asked
  again in its format, without tools, with the results in its messages (servers such as
  llama.cpp's take a grammar or tools, not both);
- the exchange (the assistant and tool messages) is kept for the turn: a later call of
  the same turn on the same messages (the round asked in another form, in text, or
  continued) is sent it, so no tool runs twice for one question;
- a TOOLS_REFUSED answer (a refusal naming them, or a stream that ended before anything:
  llama-cpp-python's server cannot stream tool calls) is asked again without tools, and
  once that is answered the model is remembered as lacking them for the process's life
  (`ToolSupport`, logged once): later requests go without tools. A retry that fails too
  (a prompt over the context) remembers nothing.
A request without tools (and no exchange to carry) goes straight through: a deployment
without tools pays nothing per call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.domain.consultation import Usage
from core.domain.errors import ModelError, ModelErrorKind
from core.domain.json_answer import strip_fences
from core.domain.ports import Completer, Completion, CompletionRequest, OnDelta
from core.domain.tools import OnToolStart, Toolbox, ToolCall, ToolFailure, ToolSpec, ToolUse
from core.llm.collect_stream import StreamStopped
from core.llm.llm_stream import MAX_ARGUMENT_CHARS

log = logging.getLogger(__name__)

MAX_TOOL_MESSAGE_CHARS = 64_000
"""A `tool` message is cut here whatever a toolbox returned (its own bound is smaller)."""
WRITTEN_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
"""A call written as text, as Hermes- and Qwen-style templates have the model write it."""
_OPENINGS = ("<tool_call>", "{")
"""How a reply that may be a call written as text starts: held back until it is known."""
PARTS_SEPARATOR = "\n\n"
"""Between the texts of two calls of one answer (a reply written before its tool calls)."""


@dataclass(frozen=True, slots=True)
class ToolLimits:
    """TOOLS_MAX_CALLS and TOOL_PARALLEL."""

    max_calls: int = 6  # tool calls run per turn, in all
    parallel: int = 3  # tool calls of one turn running at once


class ToolSupport:
    """The models whose endpoint refused tools, for the life of the process (like
    `core.domain.llm_format.StructuredFormats` for structured replies): each is logged
    once, and its requests go without tools."""

    def __init__(self) -> None:
        self._lacking: set[str] = set()

    def lacks(self, model: str) -> bool:
        return model in self._lacking

    def refused(self, model: str, detail: str) -> None:
        if model in self._lacking:
            return
        self._lacking.add(model)
        log.warning(
            "the model endpoint refused tools for %s; this process asks it without them: %s",
            model,
            " ".join(detail.split())[:300],
        )


class ToolLoop:
    """One turn's `Completer` offering tools (see the module); `uses` are the tool calls
    run, in the order they ran."""

    def __init__(
        self,
        inner: Completer,
        toolbox: Toolbox,
        *,
        limits: ToolLimits,
        support: ToolSupport,
        answer_now: str,
        on_tool: OnToolStart | None = None,
    ) -> None:
        """`answer_now`: the note added to the system message of the call made without
        tools once the turn's calls are spent."""
        self._inner = inner
        self._toolbox = toolbox
        self._limits = limits
        self._support = support
        self._answer_now = answer_now
        self._on_tool = on_tool
        self._semaphore = asyncio.Semaphore(max(limits.parallel, 1))
        self._calls = 0  # tool calls run (or refused as over the limit) this turn
        self._base: list[dict[str, Any]] = []  # the messages the exchange answers
        self._exchange: list[dict[str, Any]] = []  # assistant tool_calls + tool messages
        self._settled = False  # the model asked for no more calls on this question
        self.uses: list[ToolUse] = []

    async def complete(
        self, request: CompletionRequest, on_delta: OnDelta | None = None
    ) -> Completion:
        messages, tail = self._carried(request.messages)
        if not request.tools:
            if messages is not request.messages:
                request = dataclasses.replace(request, messages=[*messages, *tail])
            return await self._inner.complete(request, on_delta)
        if self._support.lacks(request.model):
            return await self._inner.complete(_plain(request), on_delta)
        if messages is request.messages:  # a new question: a new exchange
            self._base, self._exchange, self._settled = list(request.messages), [], False
        return await self._loop(request, [*tail], on_delta)

    async def _loop(
        self, request: CompletionRequest, tail: list[dict[str, Any]], on_delta: OnDelta | None
    ) -> Completion:
        made: list[Usage] = []  # each call's usage, in the order they were made
        try:
            return await self._calls_for(request, tail, on_delta, made)
        except StreamStopped as stop:  # the answer was closed: charged for every call
            stop.spent = sum(made, stop.spent)
            raise

    async def _calls_for(
        self,
        request: CompletionRequest,
        tail: list[dict[str, Any]],
        on_delta: OnDelta | None,
        made: list[Usage],
    ) -> Completion:
        """The loop of `_loop`; the usage of each call made is appended to `made`, and
        the completion returned carries the sum of them all."""
        texts: list[str] = []
        formatted = request.json_mode
        asked = _unformatted(request) if formatted else request
        # A format asked again (its form refused) after the model settled: no tool phase.
        while self._calls < self._limits.max_calls and not (formatted and self._settled):
            sent = dataclasses.replace(asked, messages=[*self._base, *self._exchange, *tail])
            shown = _Shown(on_delta, texts) if on_delta is not None and not formatted else None
            try:
                completion = await self._inner.complete(sent, shown.feed if shown else None)
            except ModelError as exc:
                if exc.kind is not ModelErrorKind.TOOLS_REFUSED:
                    raise
                plain = await self._inner.complete(_plain(request), on_delta)
                self._support.refused(request.model, exc.detail)  # answered without: it lacks them
                return _summed(plain, (), made)
            made.append(completion.usage)
            calls = completion.tool_calls or written_calls(completion.text, request.tools)
            if not calls:
                self._settled = True
                if shown is not None:
                    await shown.release()
                if not formatted or _json_object(completion):
                    if formatted and on_delta is not None:
                        await on_delta(completion.text)
                    return _summed(completion, texts, made[:-1])
                break  # asked in its format below, with the results
            said = completion.text if completion.tool_calls else ""  # a written call: none
            if said.strip() and not formatted:  # words before the calls: part of the answer
                if shown is not None:
                    await shown.release()
                texts.append(said)
            self._exchange += await self._run(calls, said, request.tools)
        messages = [*self._base, *self._exchange, *tail]
        if self._calls >= self._limits.max_calls:
            messages = _noted(messages, self._answer_now)
        last = dataclasses.replace(request, messages=messages, tools=())
        if texts and on_delta is not None and not formatted:
            await on_delta(PARTS_SEPARATOR)
        final = await self._inner.complete(last, on_delta)
        return _summed(final, [] if formatted else texts, made)

    def _carried(
        self, messages: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The messages of the exchange a call carries on (the same question, or one
        continuing its answer: the messages after it), with those after; else the
        request's own messages (the same list) and nothing after."""
        base = self._base
        if base and messages[: len(base)] == base:
            return [*base, *self._exchange], messages[len(base) :]
        return messages, []

    async def _run(
        self, calls: Sequence[ToolCall], text: str, offered: Sequence[ToolSpec]
    ) -> list[dict[str, Any]]:
        """Run the calls (those past the turn's limit are not run) and return the
        assistant message holding them and one `tool` message per call."""
        specs = {spec.name: spec for spec in offered}
        room = max(self._limits.max_calls - self._calls, 0)
        self._calls += len(calls)
        run = calls[:room]
        used = await asyncio.gather(*(self._one(call, specs.get(call.name)) for call in run))
        self.uses += used
        results = [_tool_content(use) for use in used]
        results += [
            f"error: not run: this turn has used its {self._limits.max_calls} tool calls"
        ] * (len(calls) - len(run))
        assistant = {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in calls
            ],
        }
        answers = [
            {"role": "tool", "tool_call_id": call.id, "content": result}
            for call, result in zip(calls, results, strict=True)
        ]
        return [assistant, *answers]

    async def _one(self, call: ToolCall, spec: ToolSpec | None) -> ToolUse:
        """One call run, or why it was not: never raises for the tool's failure."""
        if spec is None:
            return _failed(call, None, ToolFailure.UNKNOWN_TOOL, f"no tool named {call.name!r}")
        problem = _arguments_problem(call.arguments)
        if problem is not None:
            return _failed(call, spec, ToolFailure.INVALID_ARGUMENTS, problem)
        async with self._semaphore:
            if self._on_tool is not None:
                await self._on_tool(spec)
            started = time.monotonic()
            try:
                return await self._toolbox.call(call)
            except Exception as exc:  # a toolbox's own failure is the model's to read
                log.warning("tool %s failed: %s: %s", call.name, type(exc).__name__, exc)
                ms = int((time.monotonic() - started) * 1000)
                failed = _failed(call, spec, ToolFailure.FAILED, "the tool failed")
                return dataclasses.replace(failed, ms=ms)


class _Shown:
    """A call's text passed on as it streams, after the texts of the calls before it;
    held back while it may still be a call written as text (`_OPENINGS`), and no longer
    than a written call may be (`MAX_ARGUMENT_CHARS`): past that it is text, and goes on
    (to the caller's own bound)."""

    def __init__(self, on_delta: OnDelta, before: Sequence[str]) -> None:
        self._on_delta = on_delta
        self._held: list[str] | None = []  # None once passing through
        self._size = 0
        self._opened = False  # it starts as a written call would: held to the end
        self._before = bool(before)

    async def feed(self, piece: str) -> None:
        if self._held is None:
            await self._on_delta(piece)
            return
        self._held.append(piece)
        self._size += len(piece)
        if self._size > MAX_ARGUMENT_CHARS:
            await self.release()
            return
        if self._opened:
            return
        start = "".join(self._held).lstrip()
        if start.startswith(_OPENINGS):
            self._opened = True
            return
        if not start or any(opening.startswith(start) for opening in _OPENINGS):
            return  # may still open a written call
        await self.release()

    async def release(self) -> None:
        """Pass on what was held, and all after it."""
        held, self._held = self._held, None
        if held:
            if self._before:
                await self._on_delta(PARTS_SEPARATOR)
            await self._on_delta("".join(held))


def written_calls(text: str, offered: Sequence[ToolSpec]) -> tuple[ToolCall, ...]:
    """The calls a reply's whole text writes as text, naming offered tools; () for any
    other text (a reply that merely holds JSON somewhere is an answer)."""
    stripped = text.strip()
    if not stripped.startswith(_OPENINGS) or len(stripped) > MAX_ARGUMENT_CHARS:
        return ()
    names = {spec.name for spec in offered}
    if stripped.startswith("<tool_call>"):
        bodies = WRITTEN_CALL.findall(stripped)
        if WRITTEN_CALL.sub("", stripped).strip():
            return ()  # text besides the calls: an answer
    else:
        bodies = [strip_fences(stripped)]
    calls: list[ToolCall] = []
    for n, body in enumerate(bodies, 1):
        try:
            value = json.loads(body)
        except ValueError:
            return ()
        if not isinstance(value, dict) or value.get("name") not in names:
            return ()
        arguments = value.get("arguments", value.get("parameters", {}))
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            return ()
        calls.append(ToolCall(f"call_text_{n}", value["name"], arguments))
    return tuple(calls)


def _arguments_problem(arguments: str) -> str | None:
    """What is wrong with a call's arguments before its tool is asked; None: a JSON object."""
    if len(arguments) >= MAX_ARGUMENT_CHARS:
        return f"invalid arguments: longer than {MAX_ARGUMENT_CHARS} characters"
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return f"invalid arguments: not JSON ({exc.msg} at character {exc.pos})"
    except ValueError:  # a number too long to convert, …
        return "invalid arguments: not JSON"
    if not isinstance(value, dict):
        return "invalid arguments: not a JSON object"
    return None


def _failed(call: ToolCall, spec: ToolSpec | None, failure: ToolFailure, error: str) -> ToolUse:
    return ToolUse(
        name=call.name[:64],
        server=spec.server if spec is not None else "",
        tool=spec.tool if spec is not None else call.name[:64],
        arguments=call.arguments[:2000],
        error=error,
        failure=failure,
    )


def _tool_content(use: ToolUse) -> str:
    """What the model reads of one call: its result, or its error."""
    if use.error is not None:
        return f"error: {use.error}"
    return use.result[:MAX_TOOL_MESSAGE_CHARS]


def _unformatted(request: CompletionRequest) -> CompletionRequest:
    """`request` without its response format (its tool-calling part)."""
    return dataclasses.replace(request, json_mode=False, json_schema=None, schema_required=False)


def _plain(request: CompletionRequest) -> CompletionRequest:
    """`request` without tools, for an endpoint without them (its messages are the
    conversation's: earlier replies' tools are text in them, `core.prompting.context`)."""
    return dataclasses.replace(request, tools=())


def _noted(messages: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """`messages` with `note` at the end of the system message."""
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first['content']}{PARTS_SEPARATOR}{note}"}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def _json_object(completion: Completion) -> bool:
    """Whether a reply is a whole JSON object (a format's answer written without it)."""
    if completion.finish_reason not in ("stop", "tool_calls"):
        return False
    try:
        return isinstance(json.loads(strip_fences(completion.text)), dict)
    except ValueError:
        return False


def _summed(completion: Completion, texts: Sequence[str], earlier: Sequence[Usage]) -> Completion:
    """The last call's completion with the earlier calls' texts before its own and
    their usage (`earlier`) added to its."""
    text = PARTS_SEPARATOR.join([*texts, completion.text]) if texts else completion.text
    return dataclasses.replace(completion, text=text, usage=sum(earlier, completion.usage))
