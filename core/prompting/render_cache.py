"""Rendered templates kept by the values they read, so a turn re-renders only what changed.

A system prompt is rendered from a handful of templates every model call, most of them
reading only settings and round numbers (a pystache render cost tens of microseconds a
template). A template's text is a function of the values its tags name (sections,
partials and dotted names included, by their first part), so it is kept under those
values alone.

Invariants: a template whose names cannot be read for certain (the whole context `.` at
its top, a set-delimiter tag, a partial that is missing or includes itself, a pystache
internal that changed) is never kept; nor is a render whose values include one that
cannot be a key (a list, a dict); a render that failed is never kept; at most
`MAX_KEPT` renders are kept, the oldest forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from pystache.parsed import ParsedTemplate

MAX_KEPT = 1024

_ABSENT = object()


def template_names(
    parsed: ParsedTemplate, partial: Callable[[str], ParsedTemplate | None]
) -> frozenset[str] | None:
    """The top-level names `parsed` reads (through its partials, by `partial(name)`), or
    None when they cannot be known for certain."""
    try:
        return _names(parsed._parse_tree, partial, top=True, open_partials=frozenset())
    except (AttributeError, TypeError):
        return None


def _names(
    nodes: Any,
    partial: Callable[[str], ParsedTemplate | None],
    *,
    top: bool,
    open_partials: frozenset[str],
) -> frozenset[str] | None:
    names: set[str] = set()
    for node in getattr(nodes, "_parse_tree", nodes):  # a section's body is a ParsedTemplate
        kind = type(node).__name__
        if isinstance(node, str) or kind == "_CommentNode":
            continue
        key = node.key
        if kind == "_PartialNode":
            included = partial(key)
            if included is None or key in open_partials:
                return None
            inner = _names(
                included._parse_tree, partial, top=top, open_partials=open_partials | {key}
            )
        elif kind in ("_EscapeNode", "_LiteralNode"):
            if key == "." and top:
                return None
            inner = frozenset() if key == "." else frozenset({key.split(".")[0]})
        elif kind == "_SectionNode":
            inner = _names(node.parsed, partial, top=False, open_partials=open_partials)
        elif kind == "_InvertedNode":
            inner = _names(node.parsed_section, partial, top=False, open_partials=open_partials)
        else:  # a node this reading does not know (a set-delimiter change, a new kind)
            return None
        if inner is None:
            return None
        names |= inner
        if kind in ("_SectionNode", "_InvertedNode"):
            names.add(key.split(".")[0])
    return frozenset(names)


class RenderCache:
    """Renders kept by template and by the values it reads (see the module)."""

    def __init__(self, max_kept: int = MAX_KEPT) -> None:
        self._kept: OrderedDict[Hashable, str] = OrderedDict()
        self._max_kept = max_kept

    def key(self, name: str, names: frozenset[str] | None, values: Mapping[str, Any]) -> Hashable:
        """The key of rendering `name` with `values`, or None when it is not to be kept."""
        if names is None:
            return None
        # The type too: 1, 1.0 and True are equal keys but render as different text.
        read = tuple(sorted((n, type(v), v) for n in names for v in (values.get(n, _ABSENT),)))
        try:
            hash(read)
        except TypeError:
            return None
        return (name, read)

    def get(self, key: Hashable) -> str | None:
        return None if key is None else self._kept.get(key)

    def keep(self, key: Hashable, text: str) -> None:
        if key is None:
            return
        self._kept[key] = text
        if len(self._kept) > self._max_kept:
            self._kept.popitem(last=False)
