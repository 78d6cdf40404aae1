"""The shipped example knowledge base (examples/knowledge) and the knowledge scenarios that
rely on it: every document loads through the loader `knowledge add` uses, and each fact a
scenario needs lives in exactly one passage, of the document the scenario names."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import load_settings
from app.stores import open_store
from evaluation.knowledge_loading import load_documents
from evaluation.knowledge_metrics import holds
from evaluation.scenarios import Scenario, load_scenarios

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "knowledge"
WHOLE_BASE = 500  # more passages than either folder has: a search returns every match


def knowledge_scenarios() -> list[Scenario]:
    return [s for s in load_scenarios() if s.knowledge is not None]


def test_six_knowledge_scenarios_in_each_language_on_the_example_folders() -> None:
    """Each language's knowledge scenarios read its own folder, and at least one in each
    asks what the knowledge base does not cover and one expects no question at all."""
    for language in ("en", "ru"):
        found = [s for s in knowledge_scenarios() if s.language == language]
        assert len(found) >= 6, language
        assert {s.knowledge.documents for s in found if s.knowledge} == {EXAMPLES / language}
        assert any(s.knowledge and s.knowledge.not_covered for s in found), language
        assert any(s.expect.early_finish for s in found), language
        asked = [f for s in found if s.knowledge for f in s.knowledge.facts if f.asked_as]
        assert len(asked) >= 3, language


@pytest.mark.parametrize("language", ["en", "ru"])
async def test_each_needed_fact_is_in_exactly_one_passage_of_its_document(
    tmp_path: Path, language: str
) -> None:
    settings = load_settings(
        _env_file=None, openai_api_key="k", db_path=tmp_path / "kb.sqlite3", database_url=None
    )
    store = await open_store(settings)
    try:
        documents = await load_documents(settings, store.knowledge, EXAMPLES / language)
        assert len(documents) >= 12
        assert await store.knowledge.count() < WHOLE_BASE
        kinds = {Path(name).suffix for name in documents.values()}
        if language == "en":
            assert {".md", ".html", ".docx"} <= kinds
        for scenario in knowledge_scenarios():
            if scenario.language != language or scenario.knowledge is None:
                continue
            for fact in scenario.knowledge.facts:
                assert fact.document in documents.values(), (scenario.id, fact.document)
                found = await store.knowledge.search(fact.passage, role=None, limit=WHOLE_BASE)
                holding = [p for p in found or [] if holds(p.text, fact.passage)]
                assert len(holding) == 1, (scenario.id, fact.passage, len(holding))
                assert documents[holding[0].document_id] == fact.document, scenario.id
    finally:
        await store.close()


async def test_the_html_and_docx_documents_are_cut_by_their_headings(tmp_path: Path) -> None:
    settings = load_settings(
        _env_file=None, openai_api_key="k", db_path=tmp_path / "kb.sqlite3", database_url=None
    )
    store = await open_store(settings)
    try:
        await load_documents(settings, store.knowledge, EXAMPLES / "en")
        [brampton] = await store.knowledge.search("Station Road Brampton", role=None, limit=1)
        # Its <title> is its H1, the heading over all its text: shown once, as the title.
        assert (brampton.title, brampton.heading_path) == ("Service centres", "Brampton")
        [terms] = await store.knowledge.search("laundrette", role=None, limit=1)
        assert terms.title == "Warranty terms and conditions"  # the DOCX's one top heading
        assert terms.heading_path == "What the warranty does not cover"
    finally:
        await store.close()
