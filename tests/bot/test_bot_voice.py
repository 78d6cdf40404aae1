"""Voice notes in Telegram end to end: downloaded from the fake Bot API, transcribed by the
real openai SDK against the fake transcription server, shown to the user, answered.

What the user sees (the transcript before the answer, refusals in their language) and
what the services were sent (the file's name and language, the model's user message
with its [voice] marker) are asserted; a refusal stores nothing and uses no round.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.commands.file_turns import excerpt
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from fakes.transcription_server import (  # noqa: F401 - a fixture
    FakeTranscriptionServer,
    transcription_server,
)
from tests.app.test_entrypoint import USER as PROCESS_USER
from tests.app.test_entrypoint import BotProcess, answered, fakes_env
from tests.app.test_workers_e2e import PATH as WEBHOOK_PATH
from tests.app.test_workers_e2e import SECRET as WEBHOOK_SECRET
from tests.app.test_workers_e2e import free_port, post
from tests.bot_harness import (
    ALICE,
    GROUP,
    RunningBot,
    ask_private,
    conversation,
    group_answer,
    group_said,
    mention,
    started_bot,
)
from tests.postgres import postgres_url  # noqa: F401 - a fixture

USER = 701
VOICE = b"OggS\x00\x02" + bytes(200)


def voice_settings(server: FakeTranscriptionServer) -> dict[str, Any]:
    return {"transcription_model": "whisper-1", "transcription_base_url": server.base_url}


@pytest.fixture
async def voice_bot(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
) -> AsyncIterator[RunningBot]:
    """A bot whose transcription model is the fake server."""
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, **voice_settings(transcription_server)
    ) as running:
        yield running


def file_calls(bot: RunningBot) -> list[str]:
    return [c.method for c in bot.api.calls if c.method in ("getFile", "download")]


async def test_a_voice_note_is_transcribed_shown_and_answered(
    voice_bot: RunningBot,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """The user sees what was heard, then the answer; the model got it as their words."""
    transcription_server.script("Help me plan my week")
    heard, reply = await ask_private(
        voice_bot, USER, None, media=voice_bot.api.voice(VOICE), parts=2
    )
    assert heard == "🎤 “Help me plan my week”"
    assert reply == "Reply to: [voice] Help me plan my week\n\nRound 1 of 3"
    assert conversation(voice_bot.model.requests[0]) == ["[voice] Help me plan my week"]
    [call] = transcription_server.calls
    assert (call.filename, call.model, call.language) == ("voice.ogg", "whisper-1", "en")
    assert call.data == VOICE
    assert file_calls(voice_bot) == ["getFile", "download"]


async def test_a_russian_voice_note_with_a_caption(
    voice_bot: RunningBot,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """The caption is typed words next to the transcript; the language goes to the service."""
    transcription_server.script("Составь план на неделю")
    heard, _reply = await ask_private(
        voice_bot,
        USER,
        None,
        media=voice_bot.api.voice(VOICE),
        caption="Коротко, пожалуйста",
        language_code="ru",
        parts=2,
    )
    assert heard == "🎤 «Составь план на неделю»"
    assert conversation(voice_bot.model.requests[0]) == [
        "[voice] Составь план на неделю\n\nКоротко, пожалуйста"
    ]
    assert transcription_server.calls[0].language == "ru"


@pytest.mark.parametrize(
    ("build", "filename"),
    [
        (lambda api: api.video_note(VOICE), "video_note.mp4"),
        (lambda api: api.audio(VOICE, name="meeting.m4a", mime="audio/mp4"), "meeting.m4a"),
        (lambda api: api.audio(VOICE, mime="audio/mp4"), "audio.m4a"),
    ],
)
async def test_video_notes_and_audio_files_are_transcribed_under_their_names(
    voice_bot: RunningBot,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
    build: Any,
    filename: str,
) -> None:
    transcription_server.script("What should I cook tonight")
    await ask_private(voice_bot, USER, None, media=build(voice_bot.api), parts=2)
    assert transcription_server.calls[0].filename == filename
    assert conversation(voice_bot.model.requests[0]) == ["[voice] What should I cook tonight"]


async def test_a_transcription_is_charged_to_its_sender_by_the_minute(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """A voice note's 90 seconds at $0.006 a minute count for its sender beside the
    round's tokens, in /usage and in /metrics, as a transcription; silence (refused, no
    turn) counts nothing."""
    transcription_server.usage = {"type": "duration", "seconds": 90}
    prices = '{"whisper-1": {"per_minute": 0.006}, "test-model": {"input": 0, "output": 0}}'
    async with started_bot(
        tmp_path / "bot.sqlite3",
        bot_api,
        model_server,
        model_prices=prices,
        **voice_settings(transcription_server),
    ) as bot:
        transcription_server.script("   ")
        await ask_private(bot, USER, None, media=bot.api.voice(VOICE))
        [empty] = await ask_private(bot, USER, "/usage")
        assert "Today: 0 tokens in, 0 out, $0.0000" in empty
        transcription_server.script("Plan my week")
        await ask_private(bot, USER, None, media=bot.api.voice(VOICE), parts=2)
        [usage] = await ask_private(bot, USER, "/usage")
        metrics = bot.runtime.metrics.render()[0].decode()
    assert "$0.0090" in usage.split("\n")[1]  # today's line
    assert 'consult_usage_cost_total{kind="transcription",model="whisper-1"} 0.009' in metrics


async def test_a_voice_note_over_the_limit_is_refused_before_any_download(
    voice_bot: RunningBot,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """25 MB announced: refused with the limit; no getFile, no transcription, no model call."""
    media = voice_bot.api.voice(VOICE, size=25_000_000)
    [text] = await ask_private(voice_bot, USER, None, media=media)
    assert text == "This file is too large: I can take files up to 20 MB."
    assert file_calls(voice_bot) == []
    assert transcription_server.calls == [] and voice_bot.model.requests == []


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("en", "I can't listen to voice messages here. Please type your question instead."),
        ("ru", "Здесь я не могу слушать голосовые сообщения. Пожалуйста, напишите вопрос текстом."),
    ],
)
async def test_voice_off_is_said_without_a_download(
    bot: RunningBot, language: str, expected: str
) -> None:
    """Without a transcription model a voice note is refused in the user's language."""
    media = bot.api.voice(VOICE)
    [text] = await ask_private(bot, USER, None, media=media, language_code=language)
    assert text == expected
    assert file_calls(bot) == [] and bot.model.requests == []


async def test_a_failed_transcription_stores_nothing_and_a_resend_works(
    voice_bot: RunningBot,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """The service fails (500 through the SDK's retry): the user is told to try again or
    type it; nothing is stored (no consultation); sending it again is round 1."""
    transcription_server.fail(500, times=2)
    [text] = await ask_private(voice_bot, USER, None, media=voice_bot.api.voice(VOICE))
    assert text == (
        "I couldn't transcribe your voice message just now. Nothing was saved: please try "
        "again, or type it."
    )
    [status] = await ask_private(voice_bot, USER, "/status")
    assert status.startswith("No active consultation.")
    transcription_server.script("Plan my week")
    _heard, reply = await ask_private(
        voice_bot, USER, None, media=voice_bot.api.voice(VOICE), parts=2
    )
    assert reply.endswith("Round 1 of 3")
    assert len(voice_bot.model.requests) == 1
    assert conversation(voice_bot.model.requests[0]) == ["[voice] Plan my week"]


async def test_silence_is_no_text(
    voice_bot: RunningBot,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    transcription_server.script("   ")
    [text] = await ask_private(voice_bot, USER, None, media=voice_bot.api.voice(VOICE))
    assert text.startswith("I found no text to read in this file")
    assert voice_bot.model.requests == []


async def test_a_failed_download_is_said_and_nothing_stored(
    voice_bot: RunningBot,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    voice_bot.api.fail_next("download", status=404, description="Not Found")
    [text] = await ask_private(voice_bot, USER, None, media=voice_bot.api.voice(VOICE))
    assert text == (
        "I couldn't download your file from Telegram. Nothing was saved; please send it again."
    )
    assert transcription_server.calls == [] and voice_bot.model.requests == []


async def test_in_a_group_only_a_voice_note_addressed_to_the_bot_counts(
    voice_bot: RunningBot,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """A member's voice note to the group is ignored (nothing downloaded); one whose
    caption mentions the bot is heard and answered with the member's name."""
    await voice_bot.send(
        GROUP, None, user_id=ALICE, chat_type="supergroup", media=voice_bot.api.voice(VOICE)
    )
    transcription_server.script("Where do we meet")
    caption = "@consult_bot"
    await voice_bot.send(
        GROUP,
        None,
        user_id=ALICE,
        chat_type="supergroup",
        media=voice_bot.api.voice(VOICE),
        caption=caption,
        entities=mention(caption),
    )
    await group_said(voice_bot, "🎤 “Where do we meet”")
    await group_answer(voice_bot, 1)
    assert len(transcription_server.calls) == 1
    assert file_calls(voice_bot) == ["getFile", "download"]  # the second note's only
    assert conversation(voice_bot.model.requests[0]) == ["Alice: [voice] Where do we meet"]


def test_the_shown_transcript_is_cut_at_a_word() -> None:
    long = "word " * 100
    shown = excerpt(long)
    assert shown.endswith("…") and len(shown) <= 201
    assert shown[:-1].split() == ["word"] * len(shown[:-1].split())
    assert excerpt("  two\nlines ") == "two lines"


StartProcess = Callable[..., Awaitable[BotProcess]]


@pytest.fixture
async def start_process(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> AsyncIterator[StartProcess]:
    """Start `python -m bot` with voice on against the fakes (extra settings as keywords);
    processes still running at the end are killed."""
    started: list[BotProcess] = []

    async def start(**settings: str) -> BotProcess:
        env = fakes_env(
            tmp_path,
            bot_api,
            model_server,
            TRANSCRIPTION_MODEL="whisper-1",
            TRANSCRIPTION_BASE_URL=transcription_server.base_url,
            DB_PATH=str(tmp_path / "bot.sqlite3"),
            USER_RATE_LIMIT_PER_MINUTE="0",
            **settings,
        )
        started.append(await BotProcess.launch(env, tmp_path / f"bot{len(started)}.log", tmp_path))
        return started[-1]

    yield start
    for bot in started:
        if bot.process.returncode is None:
            bot.process.kill()
            await bot.process.wait()


async def test_a_process_killed_after_a_voice_note_was_stored_answers_it_after_restart(
    start_process: StartProcess,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """kill -9 while the model answers a voice note: the transcript was stored first, so
    after a restart it is the open turn and /retry answers it (no new transcription)."""
    first = await start_process()
    model_server.enqueue("too late", hold=asyncio.Event())
    transcription_server.script("Help me pick weights")
    voice = bot_api.voice(VOICE)
    bot_api.push_update(bot_api.text_message(PROCESS_USER, None, user_id=PROCESS_USER, media=voice))
    await answered(bot_api, "🎤 “Help me pick weights”")
    await first.asked(model_server, 1)
    assert await first.stop(signal.SIGKILL) == -signal.SIGKILL

    second = await start_process()
    bot_api.push_update(bot_api.text_message(PROCESS_USER, "/retry", user_id=PROCESS_USER))
    text = await answered(bot_api, "Reply to: [voice] Help me pick weights")
    assert text.endswith("Round 1 of 3")
    assert conversation(model_server.requests[-1]) == ["[voice] Help me pick weights"]
    assert len(transcription_server.calls) == 1
    assert not any("too late" in t for t in bot_api.sent_texts(PROCESS_USER))
    assert await second.stop() == 0


async def test_a_voice_note_through_the_postgresql_inbox(
    start_process: StartProcess,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """A worker on PostgreSQL (webhook into the shared inbox) hears and answers a voice note
    the same way; the webhook's redelivery of it is not transcribed again."""
    port = free_port()
    worker = await start_process(
        DATABASE_URL=postgres_url,
        WEBHOOK_URL="https://bot.example.com" + WEBHOOK_PATH,
        WEBHOOK_SECRET=WEBHOOK_SECRET,
        API_HOST="127.0.0.1",
        API_PORT=str(port),
    )
    await worker.logged("is running")
    transcription_server.script("Plan a trip to Rome")
    update = bot_api.text_message(
        PROCESS_USER, None, user_id=PROCESS_USER, media=bot_api.voice(VOICE)
    )
    assert await post(port, update) == 200
    text = await answered(bot_api, "Reply to: [voice] Plan a trip to Rome")
    assert text.endswith("Round 1 of 3")
    assert bot_api.sent_texts(PROCESS_USER)[0] == "🎤 “Plan a trip to Rome”"
    assert await post(port, update) == 200  # a redelivery: accepted once, so dropped
    assert await worker.stop() == 0  # the updates being handled finish first
    assert len(transcription_server.calls) == 1
    assert len(model_server.requests) == 1
