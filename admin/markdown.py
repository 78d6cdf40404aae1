"""Markdown from users and models as HTML that cannot act: markdown-it-py in safe mode.

Invariants: raw HTML in the text is shown as text (`html` off), never passed through;
a link is a link only to `http:`, `https:` or `mailto:` (anything else — `javascript:`,
`data:`, relative paths — stays text) and opens without the console as its referrer;
images are not rendered (no request leaves for a third party's server). Nesting is
bounded by the renderer's `maxNesting`, so any text renders in linear time.
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

_ALLOWED_LINK = re.compile(r"^(?:https?://|mailto:)", re.IGNORECASE)


def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable("image")
    md.validateLink = lambda url: bool(_ALLOWED_LINK.match(url.strip()))  # type: ignore[method-assign]

    def link_open(renderer: Any, tokens: Any, index: int, options: Any, env: Any) -> str:
        tokens[index].attrSet("rel", "noopener noreferrer nofollow")
        return str(renderer.renderToken(tokens, index, options, env))

    md.add_render_rule("link_open", link_open)
    return md


_MD = _renderer()


def render(text: str) -> Markup:
    """`text` (Markdown) as HTML safe to put in a page."""
    return Markup(_MD.render(text))
