"""Which reader an attachment goes to: "voice", "document", "photo" or "unsupported".

Invariant: the first source with an opinion decides — the edge's hint, then the MIME
type, then the file name's extension, then the bytes' signature, and last a look at
whether the bytes are text. Vague MIME types (application/octet-stream, a ZIP that may
be a DOCX) and unknown extensions have no opinion, so the bytes decide those.
"""

from __future__ import annotations

from pathlib import PurePath

from core.domain.attachments import Attachment
from media.sniff import AUDIO_FORMATS, IMAGE_MIMES, looks_like_text, sniff

VOICE = "voice"
DOCUMENT = "document"
PHOTO = "photo"
UNSUPPORTED = "unsupported"
KINDS = (VOICE, DOCUMENT, PHOTO, UNSUPPORTED)
PDF_MIME = "application/pdf"
DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

VOICE_EXTENSIONS = frozenset(
    {".ogg", ".oga", ".opus", ".mp3", ".mpga", ".m4a", ".wav", ".webm", ".flac"}
)
PHOTO_EXTENSIONS = frozenset(
    {".jpg", ".jpeg", ".jpe", ".png", ".gif", ".webp", ".heic", ".heif", ".bmp", ".tif", ".tiff"}
)
DOCUMENT_EXTENSIONS = frozenset({
    ".pdf", ".docx", ".txt", ".text", ".md", ".markdown", ".rst", ".adoc", ".org", ".tex",
    ".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".ipynb", ".geojson", ".yaml", ".yml", ".toml",
    ".ini", ".cfg", ".conf", ".properties", ".env", ".xml", ".xsd", ".svg", ".html", ".htm",
    ".xhtml", ".css", ".scss", ".less", ".log", ".out", ".srt", ".vtt", ".diff", ".patch", ".py",
    ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".vue", ".svelte", ".java", ".kt",
    ".kts", ".scala", ".groovy", ".gradle", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh",
    ".cs", ".fs", ".go", ".rs", ".rb", ".php", ".pl", ".pm", ".swift", ".m", ".mm", ".dart",
    ".lua", ".r", ".jl", ".ex", ".exs", ".erl", ".hrl", ".hs", ".clj", ".elm", ".ml", ".sh",
    ".bash", ".zsh", ".fish", ".ps1", ".bat", ".cmd", ".sql", ".graphql", ".proto", ".tf",
    ".hcl", ".nix", ".dockerfile", ".makefile", ".cmake", ".asm", ".s", ".v", ".sv", ".vhd",
    ".sol"
})  # fmt: skip
UNSUPPORTED_EXTENSIONS = frozenset({
    ".zip", ".rar", ".7z", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".exe", ".dll", ".msi",
    ".so", ".dylib", ".bin", ".apk", ".ipa", ".dmg", ".iso", ".img", ".jar", ".class", ".pyc",
    ".o", ".a", ".doc", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".pages",
    ".epub", ".mp4", ".mov", ".avi", ".mkv", ".wmv", ".flv", ".m4v", ".3gp", ".aac", ".wma",
    ".amr", ".mid", ".midi", ".psd", ".ai", ".sqlite", ".db", ".ttf", ".otf", ".woff", ".woff2"
})  # fmt: skip
DOCUMENT_MIMES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/x-ndjson",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/x-javascript",
        "application/typescript",
        "application/x-sh",
        "application/x-shellscript",
        "application/sql",
        "application/x-python",
        "application/x-httpd-php",
        "application/x-tex",
        "application/x-subrip",
        "image/svg+xml",
        PDF_MIME,
        DOCX_MIME,
    }
)
VOICE_MIMES = frozenset({
    "application/ogg", "audio/ogg", "audio/opus", "audio/mpeg", "audio/mp3", "audio/mpga",
    "audio/mp4", "audio/m4a", "audio/x-m4a", "audio/wav", "audio/x-wav", "audio/wave",
    "audio/vnd.wave", "audio/webm", "audio/flac", "audio/x-flac"
})  # fmt: skip
VAGUE_MIMES = frozenset(
    {
        "",
        "application/octet-stream",
        "binary/octet-stream",
        "application/zip",  # some clients send a DOCX so
        "application/x-zip-compressed",
        "video/mp2t",  # what a .ts file (TypeScript, usually) is often sent as
    }
)


def kind_of(attachment: Attachment) -> str:
    """The reader `attachment` goes to (see the module's invariant)."""
    if attachment.kind_hint in KINDS:
        return attachment.kind_hint
    return (
        _by_mime(attachment.mime)
        or _by_extension(attachment.name)
        or _by_signature(attachment.data)
    )


def declared_kind(name: str, mime: str | None) -> str | None:
    """The kind the name and MIME type alone tell, before any byte is read (None: only
    the bytes can tell)."""
    return _by_mime(mime) or _by_extension(name)


def mime_type(mime: str | None) -> str:
    """The bare type of a declared MIME type, lower-case: "text/plain; charset=utf-8" ->
    "text/plain" ("" for None)."""
    return (mime or "").split(";")[0].strip().lower()


def _by_mime(mime: str | None) -> str | None:
    declared = mime_type(mime)
    if declared in VAGUE_MIMES:
        return None
    if declared.startswith("text/") or declared in DOCUMENT_MIMES:
        return DOCUMENT
    if declared.endswith(("+json", "+xml")):
        return DOCUMENT
    if declared.startswith("image/"):
        return PHOTO
    if declared in VOICE_MIMES:
        return VOICE
    if declared.startswith(("audio/", "video/")):
        return UNSUPPORTED
    return None  # application/x-whatever: the name and the bytes tell more


def _by_extension(name: str) -> str | None:
    path = PurePath(name.lower())
    suffix = path.suffix or (f".{path.name}" if path.name in ("dockerfile", "makefile") else "")
    if suffix in DOCUMENT_EXTENSIONS:
        return DOCUMENT
    if suffix in PHOTO_EXTENSIONS:
        return PHOTO
    if suffix in VOICE_EXTENSIONS:
        return VOICE
    if suffix in UNSUPPORTED_EXTENSIONS:
        return UNSUPPORTED
    return None


def _by_signature(data: bytes) -> str:
    found = sniff(data)
    if found in ("pdf", "docx"):
        return DOCUMENT
    if found in IMAGE_MIMES:
        return PHOTO
    if found in AUDIO_FORMATS and found != "mp4":  # an MP4 is a video unless the edge says
        return VOICE
    if found is None and looks_like_text(data):
        return DOCUMENT
    return UNSUPPORTED
