"""The frames a reader process and its pool speak: an 8-byte big-endian length, then
that many bytes.

Both sides import this module, so the pool (in the bot process) never imports the
reader's parsers (`media.parsers`) to speak to it.
"""

from __future__ import annotations

import struct
from typing import IO

LENGTH = struct.Struct(">Q")
MAX_HEADER_BYTES = 64_000


def frame(payload: bytes) -> bytes:
    """`payload` as a frame: its length, then itself."""
    return LENGTH.pack(len(payload)) + payload


def read_frame(source: IO[bytes], limit: int) -> bytes | None:
    """The next frame's bytes, None at the end of the input; raises ValueError for a
    frame over `limit` bytes or cut short."""
    head = source.read(LENGTH.size)
    if not head:
        return None
    if len(head) < LENGTH.size:
        raise ValueError("frame length cut short")
    (size,) = LENGTH.unpack(head)
    if size > limit:
        raise ValueError(f"frame of {size} bytes, over {limit}")
    payload = source.read(size)
    if len(payload) < size:
        raise ValueError("frame cut short")
    return payload
