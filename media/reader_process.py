"""A reader process: reads one document at a time for the bot, inside hard limits.

`python -m media.reader_process MEMORY_MB PARENT_PID` first ties its life to its parent's
(`media.parent_death`: it never outlives PARENT_PID, even one killed with SIGKILL, and
exits at once if that is no longer its parent), limits its own address space to MEMORY_MB
(`RLIMIT_AS`) before it reads anything, says it is ready with an empty frame, then
answers requests on stdin/stdout until stdin closes. Each request may use `cpu_seconds`
more CPU time (`RLIMIT_CPU`; past it the kernel ends the process). A request is two
frames (a JSON header, then the document's bytes); the answer is one JSON frame:
{"text", "complete"} (with "pages" and "title" when the request asks for the "outline")
or {"problem", "detail"}. A frame is an 8-byte big-endian length
and that many bytes. Output of the libraries goes to stderr: stdout carries frames only.
After running out of memory the process answers once and exits, so the next document
meets a fresh one.
"""

from __future__ import annotations

import json
import logging
import math
import os
import resource
import signal
import sys
from typing import Any

# pypdf imports `cryptography` when it is installed (the MCP SDK brings it) to decrypt AES
# PDFs; its Rust library adds about 12 MB of address space, counted against this process's
# RLIMIT_AS before any document is read. Marked absent, pypdf takes its own fallback: an
# AES-encrypted PDF is refused as encrypted, as before that package was installed.
sys.modules.setdefault("cryptography", None)  # type: ignore[arg-type]

from core.domain.errors import AttachmentProblem, AttachmentRefused  # noqa: E402
from media.frames import MAX_HEADER_BYTES, frame, read_frame  # noqa: E402
from media.parent_death import die_with_parent  # noqa: E402
from media.parsers import read_document  # noqa: E402


def answer(request: dict[str, Any], data: bytes) -> dict[str, Any]:
    """The answer to one request: the document's text, or why there is none."""
    try:
        found = read_document(
            data,
            name=request["name"],
            mime=request["mime"],
            max_bytes=request["max_bytes"],
            max_chars=request["max_chars"],
            outline=bool(request.get("outline")),
        )
    except AttachmentRefused as refused:
        return {"problem": refused.problem.value, "detail": refused.detail}
    # What the bot can use of it: one more character than the budget says it was cut.
    limit = request["max_chars"] + 1
    complete = found.complete and len(found.text) < limit
    reply: dict[str, Any] = {"text": found.text[:limit], "complete": complete}
    if request.get("outline"):
        reply |= {"pages": [list(start) for start in found.pages], "title": found.title}
    return reply


def _limit_cpu(seconds: float) -> None:
    """Let the next request use `seconds` more CPU time than spent so far."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(spent + seconds)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def serve(memory_mb: int, parent: int) -> None:
    wire_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # a stray print from a library lands on stderr, not in a frame
    die_with_parent(parent, wire_out.fileno())
    wire_in = sys.stdin.buffer
    memory = memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)  # past the CPU limit: the process ends
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    wire_out.write(frame(b""))  # ready: imported and limited
    while True:
        header = read_frame(wire_in, MAX_HEADER_BYTES)
        if header is None:
            return
        request = json.loads(header)
        data = read_frame(wire_in, int(request["size"]))
        if data is None:
            return
        _limit_cpu(float(request["cpu_seconds"]))
        try:
            reply = answer(request, data)
        except MemoryError:
            del data
            wire_out.write(frame(_too_costly(f"over {memory_mb} MB of memory")))
            return
        wire_out.write(frame(json.dumps(reply).encode()))


def _too_costly(detail: str) -> bytes:
    return json.dumps({"problem": AttachmentProblem.TOO_COSTLY.value, "detail": detail}).encode()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
