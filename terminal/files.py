"""The terminal's `/file PATH`: local files queued for the next message.

Invariants: a path is opened without blocking (a named pipe or a device would otherwise
wait for a writer for good) and refused at once unless it is a regular file; a file is
then checked (kind, size) from its size on disk and its first bytes before it is read
whole, so a huge file is refused without being read. A refusal is one line naming the
file and the reason; nothing is queued.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from core.domain.attachments import Attachment
from core.domain.errors import AttachmentProblem, AttachmentRefused
from media.documents import SUPPORTED_DOCUMENTS
from media.intake import Intake

HEAD_BYTES = 4096
"""Bytes read before the size check, to tell a file's kind by its magic bytes."""


class NotRegularFile(OSError):
    """The path names a folder, a named pipe, a device or a socket."""


class TerminalFiles:
    """Local files queued for the next message, checked before they are read whole."""

    def __init__(self, intake: Intake) -> None:
        self.intake = intake
        self.queued: list[Attachment] = []

    def command(self, argument: str) -> None:
        """`/file PATH` queues a file; `/file` alone lists the queue."""
        if not argument:
            names = ", ".join(f.name for f in self.queued) or "none"
            print(f"[attached: {names}]")
            return
        try:
            attachment = self._load(Path(_unquoted(argument)).expanduser())
        except AttachmentRefused as exc:
            print(f"[{refusal(exc, self.intake)}; not attached]")
            return
        except OSError as exc:
            print(f"[cannot read {argument}: {exc.strerror or exc}]")
            return
        self.queued.append(attachment)
        print(
            f"[attached {attachment.name} ({size_text(len(attachment.data))}); it goes with "
            "your next message, or an empty line sends it alone]"
        )

    def _load(self, path: Path) -> Attachment:
        # O_NONBLOCK: opening a named pipe for reading would otherwise wait for a writer.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise NotRegularFile(0, f"not a regular file ({_file_type(info.st_mode)})")
            head = file.read(HEAD_BYTES)
            self.intake.check_head(Attachment(path.name, None, head), info.st_size)
            rest = file.read(max(0, info.st_size - len(head)))
        whole = Attachment(path.name, None, head + rest)
        self.intake.check_size(self.intake.kind_of(whole), len(whole.data), name=path.name)
        return whole


def refusal(exc: AttachmentRefused, intake: Intake) -> str:
    """Why a file was refused, naming the setting when one would change it."""
    kinds = [SUPPORTED_DOCUMENTS]
    if intake.transcriber is not None:
        kinds.append("voice recordings")
    if intake.config.vision:
        kinds.append("photos")
    reasons = {
        AttachmentProblem.TOO_LARGE: f"over the limit of {size_text(exc.limit or 0)}",
        AttachmentProblem.UNSUPPORTED: f"not a kind of file I read ({', '.join(kinds)})",
        AttachmentProblem.VOICE_OFF: "voice is off: set TRANSCRIPTION_MODEL to transcribe it",
        AttachmentProblem.VISION_OFF: "photos are off: set LLM_VISION=true for a model that "
        "sees images",
        AttachmentProblem.UNREADABLE: "cannot be read (broken or encrypted)",
        AttachmentProblem.NO_TEXT: "has no text to read (a scan, or silence)",
        AttachmentProblem.TRANSCRIPTION_FAILED: "the transcription failed; try again",
        AttachmentProblem.TOO_COSTLY: "took too long or too much memory to read",
    }
    return f"{exc.name or 'file'}: {reasons[exc.problem]}"


def size_text(count: int) -> str:
    return f"{count / 1_000_000:.1f} MB" if count >= 100_000 else f"{count} bytes"


def _file_type(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def _unquoted(path: str) -> str:
    """A path as a terminal's drag and drop may paste it: in quotes."""
    if len(path) >= 2 and path[0] == path[-1] and path[0] in "'\"":
        return path[1:-1]
    return path
