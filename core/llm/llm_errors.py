"""What a model server's refusal means, read from its status code and its words.

Invariant: the wording rules live here, apart from the SDK's exception types, so each one
can be read next to the servers it was written for. A request with images that the server
refuses for them (a model that reads text only) is IMAGES_REJECTED whatever the status the
server chose for it, and never when the words are about the context; a context overflow
is CONTEXT_TOO_LONG whatever the provider's wording, with the context size when the
message gives one. Errors no retry can fix say which setting to look at:
HISTORY_BUDGET_CHARS for a context overflow, OPENAI_API_KEY for 401/403, OPENAI_BASE_URL
and LLM_MODEL for 404. A request offering tools that the server refuses for them (a server or
model without function calling) is told by `tools_refused`, and never when the words are
about the context. Knows nothing of the openai SDK: `core.llm.llm` maps its exceptions
onto these rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import CompletionRequest

LOWER_BUDGET = "lower HISTORY_BUDGET_CHARS (or use a model with a larger context)"

_CONTEXT_ERROR = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|exceeds? (?:the )?(?:available )?"
    r"context (?:size|window)|context window of|prompt is too long",
    re.IGNORECASE,
)
_CONTEXT_SIZE = re.compile(
    r"(?:maximum context length is|context window of|context size \(|context size of)\s*(\d+)",
    re.IGNORECASE,
)
_FORMAT_REFUSED = re.compile(r"response_format|json_schema", re.IGNORECASE)
# How servers refuse image parts for a model that reads text only. OpenAI: "Invalid
# content type. image_url is only supported by certain models."; llama.cpp without a
# projector (HTTP 500): "image input is not supported - hint: … provide the mmproj";
# vLLM: "<model> is not a multimodal model"; Groq: "'messages.1' : for 'role:user' the
# following must be satisfied[('messages.1.content' : value must be a string)]";
# DeepSeek: "messages[1]: unknown variant `image_url`, expected `text`"; Ollama and LM
# Studio: "… does not support images"; OpenRouter (404): "No endpoints found that
# support image input".
_IMAGES_REFUSED = re.compile(
    r"image_url|image input|images? (?:is |are )?(?:not supported|unsupported)|"
    r"(?:not|n't|cannot|unable to) (?:support|accept|process|handle) (?:images?|vision|multimodal)|"
    r"multimodal|vision|content' ?: value must be a string|content must be a string|"
    r"expected `text`|only 'text' content|missing data required for image",
    re.IGNORECASE,
)
_IMAGES_REFUSED_STATUS = frozenset({400, 404, 415, 422, 500})
# How servers refuse `tools` for a model or server without function calling. OpenAI:
# "'tools' is not supported with this model."; vLLM without a tool parser: '"auto" tool
# choice requires --enable-auto-tool-choice and --tool-call-parser to be set'; llama.cpp
# without --jinja: "tools param requires --jinja flag"; Ollama: "<model> does not support
# tools"; OpenRouter (404): "No endpoints found that support tool use"; a FastAPI server
# whose request model lacks them: pydantic's 422 naming the `tools` or `tool_choice` field.
_TOOLS_REFUSED = re.compile(
    r"\btools?\b|tool_choice|tool[ _-]?(?:use|call(?:ing|s)?)|function[ _-]?call(?:ing|s)?|"
    r"\bfunctions\b",
    re.IGNORECASE,
)
_TOOLS_REFUSED_STATUS = frozenset({400, 404, 422})


def has_images(request: CompletionRequest) -> bool:
    """Whether any message of `request` carries an image part."""
    return any(
        isinstance(part, dict) and part.get("type") == "image_url"
        for message in request.messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )


def images_refused(status: int, message: str) -> bool:
    """Whether a request with images failed for them (see `_IMAGES_REFUSED`)."""
    return (
        status in _IMAGES_REFUSED_STATUS
        and bool(_IMAGES_REFUSED.search(message))
        and not _CONTEXT_ERROR.search(message)
    )


def tools_refused(status: int, message: str) -> bool:
    """Whether a request offering tools failed for them (see `_TOOLS_REFUSED`)."""
    return (
        status in _TOOLS_REFUSED_STATUS
        and bool(_TOOLS_REFUSED.search(message))
        and not _CONTEXT_ERROR.search(message)
    )


def images_rejected(detail: str) -> ModelError:
    return ModelError(
        ModelErrorKind.IMAGES_REJECTED,
        f"the model refused the images (set LLM_VISION=false if it reads text only): {detail}",
    )


def context_overflow(code: str | None, detail: str) -> ModelError | None:
    """CONTEXT_TOO_LONG when the error code or the message says the prompt is over the
    model's context (with its size in tokens when the message names it); else None."""
    if code != "context_length_exceeded" and not _CONTEXT_ERROR.search(detail):
        return None
    size = _CONTEXT_SIZE.search(detail)
    tokens = int(size.group(1)) if size else None
    context = f" of {tokens} tokens" if tokens else ""
    return ModelError(
        ModelErrorKind.CONTEXT_TOO_LONG,
        f"the prompt is over the model's context{context}: {LOWER_BUDGET} ({detail})",
        context_tokens=tokens,
    )


def ended_before_text(*, tools: bool = False) -> ModelError:
    """A stream that ended before any text and without a finish_reason: how llama.cpp's
    server answers a prompt over its context. With `tools` offered it is TOOLS_REFUSED:
    llama-cpp-python's server so answers a streamed request with tools it cannot stream
    (chatml-function-calling); asked again without them, a prompt over the context ends
    so again and is CONTEXT_TOO_LONG then."""
    if tools:
        return ModelError(
            ModelErrorKind.TOOLS_REFUSED,
            "the stream ended before any answer while tools were offered (a server that "
            "cannot stream tool calls, such as llama-cpp-python's)",
        )
    return ModelError(
        ModelErrorKind.CONTEXT_TOO_LONG,
        "the stream ended before any text and without a finish_reason, as servers "
        f"such as llama.cpp's do for a prompt over the model's context: {LOWER_BUDGET}",
    )


def status_error(status: int, detail: str, url: object) -> ModelError:
    """The kind of an HTTP error status left after retries (`url`: the request's)."""
    if status in (401, 403):
        return ModelError(
            ModelErrorKind.MISCONFIGURED, f"HTTP {status}: check OPENAI_API_KEY ({detail})"
        )
    if status == 404:
        return ModelError(
            ModelErrorKind.MISCONFIGURED,
            f"HTTP 404 at {url}: check OPENAI_BASE_URL (usually ending in /v1) "
            f"and LLM_MODEL ({detail})",
        )
    if status == 408:
        return ModelError(ModelErrorKind.TIMEOUT, detail)
    if status >= 500 or status == 409:
        return ModelError(ModelErrorKind.UNAVAILABLE, f"HTTP {status}: {detail}")
    return ModelError(ModelErrorKind.REJECTED, f"HTTP {status}: {detail}")


def format_refused(message: str) -> bool:
    """Whether an error status's message names the response format (and not the context)."""
    return bool(_FORMAT_REFUSED.search(message)) and not _CONTEXT_ERROR.search(message)


_HANG_UPS = frozenset({"RemoteProtocolError", "ServerDisconnectedError"})
"""httpx's and aiohttp's names for a server that closed the connection without an answer."""


def hung_up(exc: BaseException) -> bool:
    """Whether the server closed the connection without answering behind `exc` (the
    aiohttp transport reports that as a timeout, so the cause tells)."""
    return any(type(cause).__name__ in _HANG_UPS for cause in _causes(exc))


def refused(exc: BaseException) -> bool:
    """Whether an OS-level connection failure (not a timeout) is behind `exc`."""
    return any(isinstance(c, OSError) and not isinstance(c, TimeoutError) for c in _causes(exc))


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """What `exc` was raised from, nearest first."""
    seen = exc
    for _ in range(8):  # causes form a short chain; the bound guards against cycles
        cause = seen.__cause__ or seen.__context__
        if cause is None:
            return
        yield cause
        seen = cause
