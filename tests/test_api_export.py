"""`GET /api/sessions/{id}/export` over a real server, the fake model and real SQLite."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import docx
import pytest

from tests.api_harness import RunningApi
from tests.fakes.model_server import FakeModelServer
from tests.test_transcript import style_of

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
    text = await response.text()
    parts = ["# Помоги с весами", "## Запрос\n\nПомоги с весами", "Какой у вас опыт?",
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
