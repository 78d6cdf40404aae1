"""What a file's first bytes say it is, whatever its name and MIME type claim.

Invariant: `sniff` names a format only on its signature (magic bytes), never on a guess;
`looks_like_text` accepts bytes only when they carry a Unicode BOM or a prefix has no NUL
and (almost) no control characters, so programs and archives never pass for a text
document. Both read a bounded prefix (the ZIP check walks at most `MAX_ZIP_ENTRIES`
entries of the archive's directory), so they stay cheap on a 10 MB file.
"""

from __future__ import annotations

import codecs
import struct

SAMPLE_BYTES = 8192
PDF_HEADER_WINDOW = 1024  # the PDF header may follow some junk within the first KiB
DOCX_MAIN_PART = "word/document.xml"
MAX_ZIP_ENTRIES = 5000  # a DOCX has tens of parts; an archive with more is not one
_MAIN_PART = DOCX_MAIN_PART.encode()
_END_OF_DIRECTORY = b"PK\x05\x06"
_END_SEARCH = 22 + 65_535  # the end record and the longest archive comment
_DIRECTORY_ENTRY = b"PK\x01\x02"
IMAGE_MIMES = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}
AUDIO_FORMATS = frozenset({"ogg", "mp3", "wav", "m4a", "mp4", "webm", "flac"})
_TEXT_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE,
              codecs.BOM_UTF16_BE)  # fmt: skip
_MAX_CONTROL_SHARE = 0.02
_ALLOWED_CONTROLS = frozenset(b"\t\n\r\f\v\b\x1b")


def sniff(data: bytes) -> str | None:
    """The format named by `data`'s signature: "pdf", "docx", "zip", an image
    ("png", "jpeg", "gif", "webp"), audio ("ogg", "mp3", "wav", "m4a", "mp4", "webm",
    "flac"), or None for anything else (text included)."""
    head = data[:16]
    if data.startswith(_TEXT_BOMS):
        return None  # checked before MP3: a UTF-16 BOM looks like an MPEG frame sync
    if b"%PDF-" in data[:PDF_HEADER_WINDOW]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "docx" if is_docx(data) else "zip"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if head.startswith(b"RIFF") and head[8:12] in (b"WEBP", b"WAVE"):
        return "webp" if head[8:12] == b"WEBP" else "wav"
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"fLaC"):
        return "flac"
    if head.startswith(b"\x1aE\xdf\xa3"):
        return "webm"
    if head[4:8] == b"ftyp":
        return "m4a" if head[8:12] in (b"M4A ", b"M4B ") else "mp4"
    if head.startswith(b"ID3") or _mpeg_frame_sync(head):
        return "mp3"
    return None


def _mpeg_frame_sync(head: bytes) -> bool:
    """Eleven set bits, then a layer other than the reserved 00 (MP3 without an ID3 tag)."""
    return len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06 != 0


def is_docx(data: bytes) -> bool:
    """A ZIP archive holding a Word document's main part, by its central directory: at
    most `MAX_ZIP_ENTRIES` entries are looked at, without building the archive's index
    (which, for an archive of 10 MB of empty entries, takes a second and tens of MB)."""
    end = data.rfind(_END_OF_DIRECTORY, max(0, len(data) - _END_SEARCH))
    if end < 0:
        return False
    try:
        entries, _, position = struct.unpack_from("<HII", data, end + 10)
        if entries > MAX_ZIP_ENTRIES:
            return False
        for _ in range(entries):
            if data[position : position + 4] != _DIRECTORY_ENTRY:
                return False
            name, extra, comment = struct.unpack_from("<HHH", data, position + 28)
            if data[position + 46 : position + 46 + name] == _MAIN_PART:
                return True
            position += 46 + name + extra + comment
    except struct.error:  # a directory that runs past the data
        return False
    return False


def looks_like_text(data: bytes) -> bool:
    """True when `data` reads as text: a Unicode BOM, or a NUL-free prefix with few
    control characters (`media.text.decode_text` then finds the encoding)."""
    if data.startswith(_TEXT_BOMS):
        return True
    sample = data[:SAMPLE_BYTES]
    if b"\x00" in sample:
        return False
    controls = sum(1 for byte in sample if byte < 0x20 and byte not in _ALLOWED_CONTROLS)
    # UTF-8 or an 8-bit code page (which decodes any byte): the control characters decide.
    return controls <= _MAX_CONTROL_SHARE * len(sample)
