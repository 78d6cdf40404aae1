"""Files in `POST /api/chat` and `/api/chat/stream`: a real aiohttp server over the production
runtime (real SQLite, real media intake), the real openai SDK against the fake model server and,
for voice, against the fake transcription server."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fpdf import FPDF
from jsonschema import Draft202012Validator
from openai._streaming import SSEDecoder
from PIL import Image as PILImage

from api import attachments as api_attachments
from core.domain.usage import ScopeKind, day_of
from fakes.hostile_documents import DOCX_MIME, costly_pages_pdf, million_cell_docx
from fakes.model_server import FakeModelServer, image_parts, text_of
from fakes.transcription_server import (  # noqa: F401 - a fixture
    FakeTranscriptionServer,
    transcription_server,
)
from tests.api_harness import RunningApi, api_settings, running_api


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def file(name: str, data: bytes, mime: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"name": name, "data": b64(data)}
    if mime is not None:
        item["mimeType"] = mime
    return item


async def post(api: RunningApi, body: Any, path: str = "/api/chat") -> tuple[int, Any]:
    response = await api.client.post(path, json=body)
    return response.status, await response.json()


def last_user(model: FakeModelServer, index: int = -1) -> dict[str, Any]:
    messages = model.requests[index]["messages"]
    return next(m for m in reversed(messages) if m["role"] == "user")


def stored_sessions(tmp_path: Path) -> int:
    with contextlib.closing(sqlite3.connect(tmp_path / "api.sqlite3")) as db:
        return int(db.execute("SELECT count(*) FROM consultations").fetchone()[0])


def pdf_with(text: str) -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def png() -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (4, 4), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


async def test_a_text_document_reaches_the_model_in_its_delimited_block(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The document's text goes to the model with its name; the session stores it too."""
    notes = "Budget: 1200 EUR\nUse: video editing\n"
    status, body = await post(
        api, {"message": "Which laptop?", "attachments": [file("notes.txt", notes.encode())]}
    )
    assert status == 200, body
    sent = text_of(last_user(model_server)["content"])
    assert "Which laptop?" in sent
    assert '<document name="notes.txt">\nBudget: 1200 EUR\nUse: video editing\n</document>' in sent
    assert "transcript" not in body and "attachmentsCut" not in body
    view = await (await api.client.get(f"/api/sessions/{body['sessionId']}")).json()
    assert 'name="notes.txt"' in view["messages"][0]["text"]


async def test_a_pdf_document_and_no_message_at_all(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A PDF's text layer is read; a document alone (message empty or left out) is a question."""
    status, body = await post(
        api,
        {"message": "", "attachments": [file("plan.pdf", pdf_with("Quarterly plan: hire two"))]},
    )
    assert status == 200, body
    assert "Quarterly plan: hire two" in text_of(last_user(model_server)["content"])
    status, body = await post(api, {"attachments": [file("a.md", b"# Title\nbody")]})
    assert status == 200, body
    assert "# Title\nbody" in text_of(last_user(model_server)["content"])


async def test_a_blank_message_without_files_is_still_refused(api: RunningApi) -> None:
    for request, wanted in (
        ({"message": " "}, "message: must not be blank"),
        ({"message": "", "attachments": []}, "message: must not be blank"),
        ({}, "message: is required"),
    ):
        status, body = await post(api, request)
        assert (status, body) == (400, {"error": wanted, "code": "VALIDATION_ERROR"})


@pytest.mark.api_settings(llm_vision=True)
async def test_a_photo_goes_to_a_vision_model_as_an_image_part(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    image = png()
    status, body = await post(
        api, {"message": "What is this?", "attachments": [file("shot", image)]}
    )
    assert status == 200, body
    user = last_user(model_server)
    parts = image_parts(user)
    assert [p["image_url"]["url"] for p in parts] == [f"data:image/png;base64,{b64(image)}"]
    assert "[photo]" in text_of(user["content"]) and "What is this?" in text_of(user["content"])
    assert "imagesNotSeen" not in body


@pytest.mark.api_settings(llm_vision=True)
async def test_a_model_that_refuses_the_photo_answers_without_it(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    model_server.reject_images = "openai"
    status, body = await post(
        api, {"message": "What is this?", "attachments": [file("x.png", png())]}
    )
    assert status == 200, body
    assert body["imagesNotSeen"] is True
    assert image_parts(last_user(model_server)) == []


async def test_a_photo_without_vision_is_refused_and_nothing_is_stored(
    tmp_path: Path, api: RunningApi, model_server: FakeModelServer
) -> None:
    status, body = await post(
        api, {"message": "What is this?", "attachments": [file("cat.png", png())]}
    )
    assert status == 422
    assert body["code"] == "ATTACHMENT_REFUSED" and body["problem"] == "vision_off"
    assert body["name"] == "cat.png" and "cat.png" in body["error"]
    assert model_server.requests == []
    assert stored_sessions(tmp_path) == 0


async def test_a_voice_note_is_transcribed_for_the_model_and_the_client(
    tmp_path: Path,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    transcription_server.script("how many sets should I do")
    settings = api_settings(
        tmp_path / "api.sqlite3",
        model_server.base_url,
        transcription_model="whisper-1",
        transcription_base_url=transcription_server.base_url,
    )
    audio = b"OggS" + b"\x00" * 400
    async with running_api(settings) as api:
        status, body = await post(api, {"attachments": [file("voice.ogg", audio, "audio/ogg")]})
    assert status == 200, body
    assert body["transcript"] == "how many sets should I do"
    assert "[voice] how many sets should I do" in text_of(last_user(model_server)["content"])
    call = transcription_server.calls[0]
    assert (call.filename, call.model, call.size) == ("voice.ogg", "whisper-1", len(audio))


async def test_a_voice_notes_transcription_is_charged_to_the_session_and_user(
    tmp_path: Path,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """The tokens the service reports for a transcription count for the session and the
    `userId`, under the transcription model."""
    transcription_server.script("how many sets should I do")
    transcription_server.usage = {
        "type": "tokens",
        "input_tokens": 300,
        "output_tokens": 7,
        "total_tokens": 307,
    }
    settings = api_settings(
        tmp_path / "api.sqlite3",
        model_server.base_url,
        transcription_model="gpt-4o-transcribe",
        transcription_base_url=transcription_server.base_url,
    )
    audio = b"OggS" + b"\x00" * 400
    body = {"attachments": [file("voice.ogg", audio, "audio/ogg")], "userId": "u-7"}
    async with running_api(settings) as api:
        status, answer = await post(api, body)
        assert status == 200, answer
        day = day_of(time.time())
        by_person = await api.store.usage_of(
            ScopeKind.PERSON, "api:u-7", since_day=day, until_day=day
        )
        by_session = await api.store.usage_of(
            ScopeKind.CHAT, f"api:{answer['sessionId']}", since_day=day, until_day=day
        )
    for totals in (by_person, by_session):
        heard = next(t for t in totals if t.model == "gpt-4o-transcribe")
        assert (heard.prompt_tokens, heard.completion_tokens, heard.calls) == (300, 7, 1)


async def test_a_voice_note_without_a_transcription_model_is_refused(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    status, body = await post(api, {"attachments": [file("v.ogg", b"OggS" + bytes(100))]})
    assert (status, body["code"], body["problem"]) == (422, "ATTACHMENT_REFUSED", "voice_off")
    assert model_server.requests == []


async def test_data_that_is_not_base64_is_a_validation_error(api: RunningApi) -> None:
    for data in ("aGVsbG8=\n", "aGVsbG8", "aGV!bG8=", "aGVsbG8=aGVsbG8="):
        status, body = await post(api, {"message": "Hi", "attachments": [
            {"name": "a.txt", "data": data}]})  # fmt: skip
        assert status == 400, data
        assert body["code"] == "VALIDATION_ERROR"
        assert body["error"].startswith("attachments[0].data: not valid base64"), body


@pytest.mark.api_settings(max_document_bytes=2000)
async def test_an_oversized_file_is_refused_by_its_size_before_it_is_decoded(
    tmp_path: Path, api: RunningApi, model_server: FakeModelServer
) -> None:
    """Its base64 length is over MAX_DOCUMENT_BYTES: TOO_LARGE with the limit, although the
    data past its first bytes is not even base64 (so it was never decoded)."""
    head = b64(b"%PDF-1.4\n" + b"x" * 4000)[:4096]
    data = head + "!" * 4000
    status, body = await post(
        api, {"message": "Hi", "attachments": [{"name": "big.pdf", "data": data}]}
    )
    assert status == 422, body
    assert (body["code"], body["problem"], body["limit"]) == (
        "ATTACHMENT_REFUSED", "too_large", 2000)  # fmt: skip
    assert model_server.requests == []
    assert stored_sessions(tmp_path) == 0


@pytest.mark.api_settings(api_max_body_bytes=4096, max_document_bytes=20_000)
async def test_the_chat_body_limit_admits_a_file_at_its_limit_and_no_more(
    api: RunningApi,
) -> None:
    """API_MAX_BODY_BYTES is 4096 here, the document limit 20,000 bytes: a 19,000-byte
    document (25,336 base64 characters) is answered; a body past both is 413."""
    document = ("line of text\n" * 1462)[:19_000].encode()
    status, body = await post(
        api, {"message": "Sum up", "attachments": [file("long.txt", document)]}
    )
    assert status == 200, body
    huge = [file(f"{n}.txt", document) for n in range(2)]
    status, body = await post(api, {"message": "Sum up", "attachments": huge})
    assert (status, body["code"]) == (413, "PAYLOAD_TOO_LARGE")
    response = await api.client.get("/api/openapi.json")
    document_text = json.dumps(await response.json())
    assert "At most 30764 bytes" in document_text  # 4096 + base64 of 20,000 bytes


async def test_an_unsupported_file_is_refused_by_name(
    tmp_path: Path, api: RunningApi, model_server: FakeModelServer
) -> None:
    archive = b"PK\x03\x04" + bytes(200)
    status, body = await post(api, {"message": "Look", "attachments": [file("a.zip", archive)]})
    assert (status, body["code"], body["problem"], body["name"]) == (
        422, "ATTACHMENT_REFUSED", "unsupported", "a.zip")  # fmt: skip
    assert "PDF" in body["error"]
    assert model_server.requests == [] and stored_sessions(tmp_path) == 0


async def test_a_refused_file_on_a_continuing_session_uses_no_round(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    status, first = await post(api, {"message": "Start", "maxRounds": 3})
    assert status == 200
    session = first["sessionId"]
    program = [file("x.exe", b"MZ" + bytes(100))]
    status, body = await post(
        api, {"message": "More", "sessionId": session, "attachments": program}
    )
    assert (status, body["problem"]) == (422, "unsupported")
    view = await (await api.client.get(f"/api/sessions/{session}")).json()
    assert view["round"] == 1 and len(view["messages"]) == 2
    status, body = await post(api, {"message": "More", "sessionId": session})
    assert (status, body["round"]) == (200, 2)


@pytest.mark.api_settings(max_document_chars=500)
async def test_documents_over_the_character_budget_are_cut_and_the_response_says_so(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    text = "word " * 400  # 2000 characters
    status, body = await post(api, {"attachments": [file("long.txt", text.encode())]})
    assert status == 200, body
    assert 1400 <= body["attachmentsCut"] <= 1600
    sent = text_of(last_user(model_server)["content"])
    assert f"[… {body['attachmentsCut']} more characters of this document were cut]" in sent


async def test_the_stream_takes_attachments_and_refuses_files_as_plain_json(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    model_server.enqueue("Streamed answer about the notes", chunk_size=4)
    response = await api.client.post(
        "/api/chat/stream",
        json={"message": "Read this", "attachments": [file("n.txt", b"secret sauce")]},
    )
    assert response.status == 200
    events = [e async for e in SSEDecoder().aiter_bytes(response.content.iter_any())]
    assert events[0].event == "session" and events[-1].event == "done"
    assert events[-1].json()["content"] == "Streamed answer about the notes"
    assert '<document name="n.txt">\nsecret sauce\n</document>' in text_of(
        last_user(model_server)["content"]
    )
    refused = await api.client.post(
        "/api/chat/stream", json={"message": "x", "attachments": [file("p.png", png())]}
    )
    assert refused.status == 422 and refused.content_type == "application/json"
    assert (await refused.json())["problem"] == "vision_off"


async def test_the_openapi_document_describes_files_and_their_refusals(
    tmp_path: Path,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """Requests with files, the reply with a transcript and the refusal validate against the
    document; the document and the parser agree on the file bodies."""
    settings = api_settings(
        tmp_path / "api.sqlite3",
        model_server.base_url,
        transcription_model="whisper-1",
        transcription_base_url=transcription_server.base_url,
    )
    async with running_api(settings) as api:
        document = await (await api.client.get("/api/openapi.json")).json()
        components = {"components": document["components"]}
        request = Draft202012Validator({"$ref": "#/components/schemas/ChatRequest", **components})
        responses = document["paths"]["/api/chat"]["post"]["responses"]

        def check(status: int, body: Any) -> None:
            schema = responses[str(status)]["content"]["application/json"]["schema"]
            Draft202012Validator({**schema, **components}).validate(body)

        voice = {"attachments": [file("v.ogg", b"OggS" + bytes(50), "audio/ogg")]}
        status, body = await post(api, voice)
        assert status == 200 and "transcript" in body
        check(200, body)
        status, body = await post(api, {"attachments": [file("c.png", png())]})
        assert status == 422
        check(422, body)
        bodies: list[dict[str, Any]] = [
            voice, {"message": "", "attachments": []}, {"attachments": [file("a.txt", b"hi")]},
            {"message": "Hi", "attachments": [{"name": "a.txt", "data": "aGk"}]},
            {"message": "Hi", "attachments": [{"name": "a.txt", "data": "aGk=\n"}]},
            {"message": "Hi", "attachments": [{"name": "", "data": "aGk="}]},
            {"message": "Hi", "attachments": [file(f"{n}.txt", b"hi") for n in range(11)]},
        ]  # fmt: skip
        for body in bodies:
            response = await api.client.post("/api/chat", json=body)
            assert (response.status == 200) is request.is_valid(body), (
                body, await response.json())  # fmt: skip
    assert "ATTACHMENT_REFUSED" in responses["422"]["description"]
    described = document["paths"]["/api/chat"]["post"]["requestBody"]["description"]
    assert "API_MAX_BODY_BYTES" in described


async def test_a_large_file_is_decoded_off_the_event_loop(
    api: RunningApi, model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoding megabytes of base64 takes tens of milliseconds: a large file is decoded in a
    worker thread, a small one where it is (the thread switch would cost more)."""
    threads: list[int] = []
    decode = api_attachments.decode_attachments

    names: list[str] = []

    def recording(*args: Any) -> Any:
        threads.append(threading.get_ident())
        names.append(threading.current_thread().name)
        return decode(*args)

    monkeypatch.setattr(api_attachments, "decode_attachments", recording)
    loop_thread = threading.get_ident()
    big = ("a line of the report\n" * 30_000).encode()  # 630 KB, 840,000 base64 characters
    for name, data in (("small.txt", b"Budget: 1200 EUR\n"), ("big.txt", big)):
        status, body = await post(api, {"message": "Sum up", "attachments": [file(name, data)]})
        assert status == 200, body
    assert threads[0] == loop_thread and threads[1] != loop_thread
    assert names[1].startswith("base64")  # its own threads, not the loop's default executor
    assert "a line of the report" in last_user(model_server)["content"]


async def test_control_characters_are_stripped_from_a_file_name(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """NUL, line breaks and escapes in a file's name never reach the block, the model or the
    store (PostgreSQL refuses NUL in text; SQLite would keep it): they are dropped."""
    status, body = await post(
        api,
        {"message": "Read it", "attachments": [file("no\x00te\r\n\x1b[31ms.txt", b"Budget: 9\n")]},
    )
    assert status == 200, body
    sent = text_of(last_user(model_server)["content"])
    assert '<document name="note[31ms.txt">\nBudget: 9\n</document>' in sent
    view = await (await api.client.get(f"/api/sessions/{body['sessionId']}")).json()
    assert 'name="note[31ms.txt"' in view["messages"][0]["text"]
    status, error = await post(
        api, {"message": "Read it", "attachments": [file("\x00\x07", b"Budget: 9\n")]}
    )
    assert (status, error["code"]) == (400, "VALIDATION_ERROR"), error


@pytest.mark.api_settings(document_read_timeout_seconds=2)
async def test_a_file_too_costly_to_read_is_refused_and_nothing_is_stored(
    tmp_path: Path, api: RunningApi, model_server: FakeModelServer
) -> None:
    """A PDF of pages that each take seconds to read, past a 2 s deadline."""
    status, body = await post(
        api, {"message": "Sum up", "attachments": [file("pages.pdf", costly_pages_pdf())]}
    )
    assert status == 422
    assert (body["code"], body["problem"], body["name"]) == (
        "ATTACHMENT_REFUSED",
        "too_costly",
        "pages.pdf",
    )
    assert body["error"] == (
        "pages.pdf: reading the file took too long or too much memory: send a smaller or "
        "simpler file, or the text itself"
    )
    assert model_server.requests == []
    assert stored_sessions(tmp_path) == 0


@pytest.mark.api_settings(max_document_chars=1000)
async def test_a_document_not_read_to_its_end_is_cut_and_the_response_says_so(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    status, body = await post(
        api, {"attachments": [file("cells.docx", million_cell_docx(), DOCX_MIME)]}
    )
    assert status == 200, body
    assert body["attachmentsIncomplete"] is True
    sent = text_of(last_user(model_server)["content"])
    assert sent.endswith(
        "[… the rest of this document was cut: it is longer than could be read]\n</document>"
    )


@pytest.mark.api_settings(document_readers=2, document_read_timeout_seconds=2)
async def test_one_end_user_s_costly_pdfs_do_not_hold_up_another_user_of_the_same_client(
    api: RunningApi,
) -> None:
    """Alice and Mallory are two `userId`s of one API client: Mallory's four costly PDFs
    take both readers while no one else waits, but Alice's one-page PDF gets the first
    reader to come free and is answered while Mallory's last one is still pending."""
    pdf = costly_pages_pdf()
    costly = {"message": "Read it", "userId": "mallory"}
    mallory = [
        asyncio.create_task(post(api, costly | {"attachments": [file(f"m{n}.pdf", pdf)]}))
        for n in range(4)
    ]
    await api.arrivals.wait(4)
    await asyncio.sleep(0.5)  # their reads are queued before Alice's
    alice = {"message": "Sum it up", "userId": "alice"}
    status, answer = await post(api, alice | {"attachments": [file("a.pdf", pdf_with("Plan"))]})

    assert status == 200, answer
    assert not mallory[-1].done()
    for task in mallory:
        status, refused = await task
        assert (status, refused["problem"]) == (422, "too_costly")
