"""A clarifying round's reply shown while it streams.

Invariants:
- a reply that starts as JSON (`{`, or a code fence) is shown as its preamble and
  questions grow: parsed with jiter's partial mode, at every piece while nothing is shown
  within its first `FIRST_WORDS_CHARS` characters, then at most once per
  `PARSE_EVERY_CHARS` new characters, so a reply of any length costs linear time in all;
- a reply that starts as prose (a server that ignores `response_format`) is shown as it
  grows, as a text round is (`core.prompting.early_finish.MarkerFilter`), up to where a JSON object
  starts, if one does: no JSON is ever shown;
- only growth is forwarded; a JSON round's text is shown as a `RoundText`, carrying the
  round it shows.
Pure: no I/O.
"""

from __future__ import annotations

from core.domain.clarifying import JSON_START, ClarifyingRound, partial_json, read_round
from core.domain.json_answer import strip_fences
from core.domain.ports import OnText
from core.prompting.early_finish import MarkerFilter

PARSE_EVERY_CHARS = 64
"""New characters of a streamed reply between two partial parses."""
FIRST_WORDS_CHARS = 512
"""A streamed reply this short that shows nothing yet is parsed at every piece."""
_JSON_START_CHARS = 16
"""Characters of a reply already scanned that are scanned again: a JSON start cut
between two pieces (`{`, spaces, `"`) is still found."""


def partial_round(text: str) -> ClarifyingRound | None:
    """The round so far in the start of a streamed reply (the last string may be cut)."""
    return read_round(partial_json(strip_fences(text), "trailing-strings"), partial=True)


class RoundText(str):
    """A streamed round's text (`ClarifyingRound.text`) that also carries the round read
    so far: every surface may use it as the plain text it is; one that lays a round out
    itself (the terminal lists each question's options under it) reads `round`."""

    round: ClarifyingRound

    def __new__(cls, round_: ClarifyingRound) -> RoundText:
        text = super().__new__(cls, round_.text)
        text.round = round_
        return text


class RoundStream:
    """Wraps an `on_text` callback; feeds of a streamed reply become the round's text so
    far (see the module)."""

    def __init__(self, on_text: OnText) -> None:
        self._on_text = on_text
        self._parsed_at = 0
        self._shown = ""
        self._prose: MarkerFilter | None = None  # set once the reply starts as prose
        self._json_at: int | None = None  # in prose: where a JSON object starts
        self._scanned = 0

    async def feed(self, text: str) -> None:
        if self._prose is None and not self._parsed_at:
            head = text.lstrip()
            if not head:
                return
            if not head.startswith(("{", "`")):
                self._prose = MarkerFilter(self._on_text)
        if self._prose is not None:
            await self._feed_prose(self._prose, text)
            return
        grown = len(text) - self._parsed_at
        # Until the first words are shown a short reply is read at every piece, so the
        # first words appear as soon as they arrive; after that, once per step.
        early = not self._shown and len(text) <= FIRST_WORDS_CHARS
        if grown <= 0 or (grown < PARSE_EVERY_CHARS and not early):
            return
        self._parsed_at = len(text)
        found = partial_round(text)
        if found is not None:
            await self.flush(found)

    async def _feed_prose(self, prose: MarkerFilter, text: str) -> None:
        if self._json_at is None:
            found = JSON_START.search(text, max(0, self._scanned - _JSON_START_CHARS))
            self._scanned = len(text)
            if found is not None:
                self._json_at = found.start()
        await prose.feed(text if self._json_at is None else text[: self._json_at])

    async def flush(self, found: ClarifyingRound) -> None:
        """Show `found` (the round read so far, or the whole reply's) if it shows more."""
        shown = RoundText(found)
        if shown and shown != self._shown:
            self._shown = shown
            await self._on_text(shown)
