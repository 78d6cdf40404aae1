"""`GET /api/sessions/{id}/export` over a real server, the fake model and real SQLite."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import docx
import pytest
from jsonschema import Draft202012Validator

from fakes.model_server import FakeModelServer
from i18n.languages import LANGUAGES
from i18n.translate import FSI, PDI
from tests.api_harness import RunningApi
from tests.core.test_transcript import style_of

pytestmark = pytest.mark.api_settings(max_rounds_limit=10)

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


async def post(api: RunningApi, body: Any) -> Any:
    response = await api.client.post(
        "/api/chat", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    assert response.status == 200
    return await response.json()


async def finished_session(api: RunningApi, model_server: FakeModelServer) -> str:
    model_server.enqueue("Какой у вас опыт?")
    model_server.enqueue("## План\n\n- Хаммер: 3×12\n\n| День | Вес |\n|---|---|\n| Пн | 20 |\n")
    first = await post(api, {"message": "Помоги с весами для хаммера", "maxRounds": 2})
    await post(api, {"message": "Новичок", "sessionId": first["sessionId"]})
    return str(first["sessionId"])


async def test_a_session_exports_as_markdown(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The Markdown attachment holds the request, the round, its answer and the final answer."""
    session = await finished_session(api, model_server)
    response = await api.client.get(f"/api/sessions/{session}/export?format=md")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/markdown")
    disposition = response.headers["Content-Disposition"]
    assert disposition.startswith('attachment; filename="consultation.md"')
    assert "filename*=UTF-8''" in disposition
    assert response.headers["Content-Language"] == "ru"  # no other signal: as it is written
    text = await response.text()
    parts = ["# Помоги с весами", "## Запрос\n\n> Помоги с весами", "Какой у вас опыт?",
             "Новичок", "## Итоговый ответ", "- Хаммер: 3×12"]  # fmt: skip
    positions = [text.index(part) for part in parts]
    assert positions == sorted(positions)


async def test_a_session_exports_as_docx(api: RunningApi, model_server: FakeModelServer) -> None:
    """The DOCX export opens with python-docx and holds the final answer's list and table."""
    session = await finished_session(api, model_server)
    response = await api.client.get(f"/api/sessions/{session}/export?format=docx")
    assert (response.status, response.headers["Content-Type"]) == (200, DOCX)
    assert 'filename="consultation.docx"' in response.headers["Content-Disposition"]
    document = docx.Document(io.BytesIO(await response.read()))
    bullets = [p.text for p in document.paragraphs if style_of(p) == "List Bullet"]
    assert bullets == ["Хаммер: 3×12"]
    assert document.tables[0].cell(1, 1).text == "20"


async def test_an_english_title_names_the_file(api: RunningApi) -> None:
    """The file name is the title's safe characters: letters, digits and underscores."""
    first = await post(api, {"message": 'What is 2+2? "quoted"/../name'})
    response = await api.client.get(f"/api/sessions/{first['sessionId']}/export?format=md")
    disposition = response.headers["Content-Disposition"]
    assert disposition.startswith('attachment; filename="What_is_2_2_quoted_.._name.md"')


async def test_an_unknown_format_or_session_is_refused(api: RunningApi) -> None:
    """An unknown format is VALIDATION_ERROR; an unknown or malformed id SESSION_NOT_FOUND."""
    first = await post(api, {"message": "What is 2+2?"})
    response = await api.client.get(f"/api/sessions/{first['sessionId']}/export?format=pdf")
    assert (response.status, (await response.json())["code"]) == (400, "VALIDATION_ERROR")
    for session in (str(uuid.uuid4()), "not-a-uuid"):
        response = await api.client.get(f"/api/sessions/{session}/export?format=md")
        assert (response.status, (await response.json())["code"]) == (404, "SESSION_NOT_FOUND")


async def markdown_of(api: RunningApi, session: str, query: str = "", **headers: str) -> Any:
    response = await api.client.get(
        f"/api/sessions/{session}/export?format=md{query}", headers=headers
    )
    assert response.status == 200, await response.text()
    return response.headers["Content-Language"], await response.text()


async def test_the_language_parameter_or_accept_language_labels_the_document(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A Russian session reads in Spanish with `language=es`, in Japanese for an
    Accept-Language that prefers it, in Arabic (date and numbers isolated) for the first
    offered language by weight; the parameter wins over the header, and a header naming no
    offered language leaves the language the session is written in."""
    session = await finished_session(api, model_server)

    language, spanish = await markdown_of(api, session, "&language=es", **{"Accept-Language": "ja"})
    assert language == "es"
    for part in ("*Fecha: ", "## Solicitud", "## Ronda de aclaración 1", "### Preguntas",
                 "### Respuesta", "## Respuesta final"):  # fmt: skip
        assert part in spanish, part
    assert "Запрос" not in spanish

    language, japanese = await markdown_of(api, session, **{"Accept-Language": "ja-JP,en;q=0.8"})
    assert language == "ja"
    assert "*日付：" in japanese and "## ご依頼" in japanese and "## 確認ラウンド 1" in japanese
    assert "## 最終回答" in japanese

    weighted = "nl;q=1, en;q=0, ar-EG;q=0.7, de;q=0.5, fa;q=abc"
    language, arabic = await markdown_of(api, session, **{"Accept-Language": weighted})
    assert language == "ar"
    assert "## الطلب" in arabic and f"## الجولة التوضيحية {FSI}1{PDI}" in arabic
    assert f"*التاريخ: {FSI}20" in arabic and f" UTC{PDI}*" in arabic
    assert "## الإجابة النهائية" in arabic

    language, written = await markdown_of(api, session, **{"Accept-Language": "nl, *"})
    assert language == "ru" and "## Запрос" in written
    language, brazilian = await markdown_of(api, session, "&language=pt")
    assert language == "pt-BR" and "## Pedido" in brazilian


async def test_a_session_with_no_language_signal_reads_in_english(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Nothing asked and nothing to tell the writing by (a few words of German): English,
    in the DOCX as in the Markdown."""
    first = await post(api, {"message": "Wie plane ich Urlaub?", "maxRounds": 2})
    language, markdown = await markdown_of(api, first["sessionId"])
    assert language == "en"
    assert "## Request" in markdown and "## Clarifying round 1" in markdown
    response = await api.client.get(f"/api/sessions/{first['sessionId']}/export")
    headings = [p.text for p in docx.Document(io.BytesIO(await response.read())).paragraphs]
    assert "Request" in headings and "Clarifying round 1" in headings


async def test_the_document_declares_the_languages_and_the_endpoint_keeps_to_them(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The OpenAPI document lists `language` and Accept-Language for the export; every
    offered code it gives as an example is served, a tag it allows but no language
    matches is 400 VALIDATION_ERROR with the error schema, as is a value it forbids."""
    document = await (await api.client.get("/api/openapi.json")).json()
    operation = document["paths"]["/api/sessions/{sessionId}/export"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["Accept-Language"]["in"] == "header"
    assert "Content-Language" in operation["responses"]["200"]["headers"]
    schema = parameters["language"]["schema"]
    assert schema["examples"] == list(LANGUAGES)
    session = await finished_session(api, model_server)
    for code in LANGUAGES:
        assert Draft202012Validator(schema).is_valid(code)
        language, _ = await markdown_of(api, session, f"&language={code}")
        assert language == code.replace("_", "-")
    error = {**operation["responses"]["400"]["content"]["application/json"]["schema"]}
    for value, allowed in (("nl", True), ("zz-Hans", True), ("", False), ("1", False)):
        assert Draft202012Validator(schema).is_valid(value) is allowed
        response = await api.client.get(f"/api/sessions/{session}/export?language={value}")
        body = await response.json()
        assert (response.status, body["code"]) == (400, "VALIDATION_ERROR")
        Draft202012Validator({**error, "components": document["components"]}).validate(body)
