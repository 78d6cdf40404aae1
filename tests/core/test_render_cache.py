"""`core.prompting.render_cache`: a render is kept by the values its template reads, and
only when those can be known for certain."""

from __future__ import annotations

from pathlib import Path

import pystache
import pytest

from core.prompting.prompts import PromptError, PromptLibrary
from core.prompting.render_cache import RenderCache, template_names


def names(source: str, **partials: str) -> frozenset[str] | None:
    parsed = {name: pystache.parse(text) for name, text in partials.items()}
    return template_names(pystache.parse(source), parsed.get)


def test_names_are_read_through_sections_partials_and_dotted_names() -> None:
    """Every tag's first name part counts, inside sections and included partials too."""
    source = "{{! a comment }}{{a}} {{{b}}} {{&c}} {{#d}}{{e.f}}{{.}}{{/d}} {{^g}}{{h}}{{/g}}{{>p}}"
    assert names(source, p="{{i}}{{#j}}{{k}}{{/j}}") == frozenset("abcdeghijk")


@pytest.mark.parametrize(
    "source",
    [
        "{{.}}",  # the whole context
        "{{=<% %>=}}<% a %>",  # delimiters changed
        "{{>missing}}",
        "{{>self}}",
    ],
)
def test_templates_whose_names_are_uncertain_are_never_kept(source: str) -> None:
    """A top-level `.`, a set-delimiter tag, a missing or self-including partial: no names."""
    assert names(source, self="{{>self}}") is None


def test_a_key_holds_only_the_read_values_and_their_types() -> None:
    """Unread values do not change the key; equal values of other types do (1, 1.0, True)."""
    cache = RenderCache()
    read = frozenset({"round"})
    key = cache.key("t", read, {"round": 1, "initial_request": "tea"})
    assert key == cache.key("t", read, {"round": 1, "initial_request": "coffee"})
    others = [cache.key("t", read, {"round": v}) for v in (1.0, True, 2, "1")]
    assert key not in others and len(set(others)) == 4
    assert cache.key("t", read, {}) != key  # an absent value is a value of its own


def test_unhashable_values_and_unknown_names_are_not_kept() -> None:
    """A list among the read values, or names not known: no key, nothing kept."""
    cache = RenderCache()
    assert cache.key("t", frozenset({"facts"}), {"facts": ["a"]}) is None
    assert cache.key("t", None, {}) is None
    cache.keep(None, "text")
    assert cache.get(None) is None


def test_the_cache_forgets_the_oldest_past_its_bound() -> None:
    """Past its bound the cache forgets its oldest render first."""
    cache = RenderCache(max_kept=2)
    keys = [cache.key("t", frozenset({"n"}), {"n": n}) for n in range(3)]
    for n, key in enumerate(keys):
        cache.keep(key, str(n))
    assert [cache.get(key) for key in keys] == [None, "1", "2"]


def test_the_library_renders_a_template_once_per_read_values(tmp_path: Path) -> None:
    """The same round numbers give the same text whatever the request, a new round number a
    new text, and an operator's template over the default is read for its own names."""
    library = PromptLibrary()
    values = {
        "round": 1,
        "max_rounds": 3,
        "remaining": 2,
        "max_questions": 4,
        "max_options": 4,
        "max_option_chars": 40,
    }
    first = library.render("round_questions", **values, initial_request="tea")
    assert library.render("round_questions", **values, initial_request="coffee") is first
    later = library.render("round_questions", **{**values, "round": 2, "remaining": 1})
    assert later != first and "2" in later

    (tmp_path / "round_context.mustache").write_text("Round {{round}} for {{initial_request}}")
    operator = PromptLibrary(tmp_path)
    shown = {"round": 1, "max_rounds": 3, "remaining": 2}
    assert operator.render("round_context", **shown, initial_request="tea") == "Round 1 for tea"
    assert operator.render("round_context", **shown, initial_request="cake") == "Round 1 for cake"


def test_a_failed_render_is_not_kept() -> None:
    """A missing value fails every time, never once and then from a kept text."""
    library = PromptLibrary()
    for _ in range(2):
        with pytest.raises(PromptError):
            library.render("round_context", round=1)
