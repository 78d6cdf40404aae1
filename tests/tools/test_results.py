"""A tool's result becomes bounded text: text blocks as they are, other content described,
cut at the limit with a line saying so, without copying what is cut away."""

from __future__ import annotations

import tracemalloc

from mcp import types

from tools.toolbox import result_text

MEGABYTE = 1_000_000


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_blocks_are_joined_by_newlines_and_kept_whole_under_the_limit() -> None:
    result = types.CallToolResult(content=[text("first"), text("second")])
    assert result_text(result, 100) == "first\nsecond"


def test_a_cut_result_ends_with_a_marker_and_stays_within_the_limit() -> None:
    result = types.CallToolResult(content=[text("a" * 300), text("b" * 300)])
    cut = result_text(result, 400)
    assert len(cut) <= 400
    assert cut.startswith("a" * 300 + "\nb")
    assert cut.endswith("[cut: the tool returned 601 characters; the first ones are shown]")


def test_structured_content_alone_is_sent_as_json() -> None:
    result = types.CallToolResult(content=[], structured_content={"temperature": 21})
    assert result_text(result, 100) == '{"temperature": 21}'


def test_embedded_resources_and_links_are_described() -> None:
    result = types.CallToolResult(
        content=[
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.txt", text="the text"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///a.bin", blob="AAAA", mime_type="application/octet-stream"
                ),
            ),
            types.ResourceLink(type="resource_link", uri="https://example.org/x", name="x"),
        ]
    )
    assert result_text(result, 500).splitlines() == [
        "the text",
        "[resource: file:///a.bin, application/octet-stream, not shown]",
        "[link: https://example.org/x]",
    ]


def test_cutting_a_megabyte_allocates_about_the_limit_not_the_megabyte() -> None:
    result = types.CallToolResult(content=[text("x" * MEGABYTE), text("y" * MEGABYTE)])
    tracemalloc.start()
    try:
        cut = result_text(result, 8000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(cut) <= 8000
    assert peak < 100_000  # a few copies of 8000 characters, never one of the megabytes
