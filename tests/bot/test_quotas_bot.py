"""Quotas in Telegram: a person over a limit reads one clear message in their language
(which limit, when it resets) and the model is not called; a consultation under way ends
with its final answer and says why; /usage shows what is left; /quota lets operators (in
ADMIN_USER_IDS, in a private chat) show, set, lift and remove a person's override, and
refuses everyone else and every malformed argument.

The real bot (python-telegram-bot) runs against the fake Bot API and the fake model
server, on a SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.domain.api_keys import person_key
from core.domain.quotas import QuotaOverride
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from fakes.transcription_server import (  # noqa: F401 - a fixture
    FakeTranscriptionServer,
    transcription_server,
)
from tests.bot_harness import (
    RunningBot,
    ask_private,
    post_in_group,
    sent,
    started_bot,
    wait_sent,
)

USER = 501
ADMIN = 900
EXEMPT = 800
LIMIT = 100
VOICE = b"OggS\x00\x02" + bytes(200)


pytestmark = pytest.mark.bot_settings(
    user_daily_token_limit=LIMIT, admin_user_ids=str(ADMIN), quota_exempt_user_ids=str(EXEMPT)
)


def spend(bot: RunningBot, tokens: int, text: str = "Answer.") -> None:
    bot.model.enqueue(text, usage={"prompt_tokens": tokens - 1, "completion_tokens": 1})


def tomorrow() -> str:
    """The next UTC midnight as the messages write it."""
    now = datetime.now(UTC)
    return (now + timedelta(days=1)).strftime("%Y-%m-%d") + " 00:00"


async def say(bot: RunningBot, chat: int, text: str, **kwargs: object) -> str:
    """Send `text` and return the one message it gets back."""
    before = len(sent(bot, chat))
    await bot.send(chat, text, **kwargs)
    return (await wait_sent(bot, chat, before + 1))[-1]


async def test_over_the_limit_the_consultation_ends_and_the_next_is_refused(
    bot: RunningBot,
) -> None:
    """The first round uses the whole limit: the next message is answered as the final
    answer, saying which limit and when it resets; a new question is then refused with
    one message, the model not called and nothing stored; the refusal is counted."""
    spend(bot, LIMIT, "Which load?")
    assert "Which load?" in (await ask_private(bot, USER, "Pick a database"))[0]
    spend(bot, 5, "Use PostgreSQL.")
    final = (await ask_private(bot, USER, "Heavy writes"))[0]
    assert "Use PostgreSQL." in final
    assert f"You have reached your daily token limit ({LIMIT})" in final
    assert "this is the final answer" in final and tomorrow() in final
    calls = len(bot.model.requests)
    refusal = await say(bot, USER, "A new question")
    assert refusal == (
        f"You have reached your daily token limit ({LIMIT}), so I did not send this to the "
        f"model and nothing was saved. It resets on {tomorrow()} UTC."
    )
    assert len(bot.model.requests) == calls
    latest = await bot.runtime.engine.history.latest(f"tg:{USER}")
    assert latest is not None and latest.initial_request == "Pick a database"
    metrics = bot.runtime.metrics.render()[0].decode()
    assert 'consult_quota_refusals_total{bot="0",limit="user_daily_tokens"} 1.0' in metrics


async def test_the_refusal_is_in_russian_for_a_russian_user(bot: RunningBot) -> None:
    """The same refusal, localized."""
    spend(bot, LIMIT)
    await ask_private(bot, USER, "Вопрос", language_code="ru")
    await say(bot, USER, "/reset", language_code="ru")
    text = await say(bot, USER, "Ещё вопрос", language_code="ru")
    assert f"дневной лимит токенов ({LIMIT})" in text and tomorrow() in text


async def test_usage_shows_what_is_left_and_exempt_people_have_no_limit(bot: RunningBot) -> None:
    """/usage adds the tokens left today; an exempt person (QUOTA_EXEMPT_USER_IDS) and an
    admin read that they have no limits, and are never refused."""
    assert f"Tokens left today: {LIMIT} of {LIMIT}" in await say(bot, USER, "/usage")
    spend(bot, 30)
    await ask_private(bot, USER, "Pick a database")
    assert f"Tokens left today: {LIMIT - 30} of {LIMIT}" in await say(bot, USER, "/usage")
    for person in (EXEMPT, ADMIN):
        spend(bot, LIMIT * 2)
        await ask_private(bot, person, "Pick a database")
        await say(bot, person, "/reset")
        spend(bot, 1, "Still answered.")
        assert "Still answered." in (await ask_private(bot, person, "Again"))[0]
        assert "You have no usage limits." in await say(bot, person, "/usage")


async def test_an_admin_sets_shows_lifts_and_removes_an_override(bot: RunningBot) -> None:
    """/quota <id> shows the limits and usage; a number sets the daily tokens, `off`
    exempts, `default` removes the override; each takes effect on the next turn."""
    spend(bot, LIMIT)
    await ask_private(bot, USER, "Pick a database")
    await say(bot, USER, "/reset")
    shown = await say(bot, ADMIN, f"/quota {USER}")
    assert f"User {USER}: daily tokens {LIMIT}" in shown and f"Today: {LIMIT} tokens" in shown
    assert await say(bot, ADMIN, f"/quota {USER} 150") == (
        f"User {USER}'s daily token limit is now 150."
    )
    assert "(set by an operator)" in await say(bot, ADMIN, f"/quota {USER}")
    spend(bot, 1, "Answered again.")
    assert "Answered again." in (await ask_private(bot, USER, "Another"))[0]
    assert "Tokens left today: 49 of 150" in await say(bot, USER, "/usage")
    await say(bot, USER, "/reset")
    assert await say(bot, ADMIN, f"/quota {USER} OFF") == (f"User {USER} now has no limits.")
    assert "You have no usage limits." in await say(bot, USER, "/usage")
    assert await say(bot, ADMIN, f"/quota {USER} default") == (
        f"User {USER} is back to the deployment's limits."
    )
    assert await say(bot, ADMIN, f"/quota {USER} default") == (
        f"User {USER} had no override: the deployment's limits apply."
    )
    assert "did not send this to the model" in await say(bot, USER, "Refused again")


async def test_an_admin_names_an_api_user_as_api_user_id(bot: RunningBot) -> None:
    """`/quota api:<userId>` names the HTTP API's user (the person `api:<userId>`): shown,
    limited, exempted and set back like a Telegram user."""
    person = "api:team.a@example.com"
    shown = await say(bot, ADMIN, f"/quota {person}")
    assert f"User {person}: daily tokens {LIMIT}" in shown
    assert await say(bot, ADMIN, f"/quota {person} 150") == (
        f"User {person}'s daily token limit is now 150."
    )
    assert await bot.runtime.store.load_quota_override(person) == QuotaOverride(person, 150)
    assert await say(bot, ADMIN, f"/quota {person} off") == f"User {person} now has no limits."
    quota = await bot.runtime.engine.quotas.of_person(person)
    assert quota.limits.exempt
    await say(bot, ADMIN, f"/quota {person} default")
    assert await bot.runtime.store.load_quota_override(person) is None


async def test_an_admin_names_a_stored_bots_api_user_as_api_n_user_id(bot: RunningBot) -> None:
    """`/quota api<n>:<userId>` names stored bot n's API user (`person_key(userId, n)`):
    limited and exempted apart from the deployment's `api:<userId>` and bot m's."""
    person = person_key("team.a@example.com", 7)
    assert person == "api7:team.a@example.com"
    assert await say(bot, ADMIN, f"/quota {person} 150") == (
        f"User {person}'s daily token limit is now 150."
    )
    assert await bot.runtime.store.load_quota_override(person) == QuotaOverride(person, 150)
    for other in ("api:team.a@example.com", "api70:team.a@example.com"):
        assert await bot.runtime.store.load_quota_override(other) is None
    assert await say(bot, ADMIN, f"/quota {person} off") == f"User {person} now has no limits."
    assert (await bot.runtime.engine.quotas.of_person(person)).limits.exempt
    shown = await say(bot, ADMIN, f"/quota {person}")
    assert shown.startswith(f"User {person}: ")
    assert await say(bot, ADMIN, f"/quota {person} default") == (
        f"User {person} is back to the deployment's limits."
    )
    assert await bot.runtime.store.load_quota_override(person) is None


@pytest.mark.parametrize(
    "args",
    [
        "",
        "abc",
        "api: 10",
        "api0:u-1 10",
        "api07:u-1 10",
        "api-7:u-1 10",
        "api7: 10",
        "api7x:u-1 10",
        "API7:u-1 10",
        "api\u0667:u-1 10",
        "api9223372036854775808:u-1 10",
        "api7:two!words 10",
        "api7:" + "u" * 65,
        "api:two!words 10",
        "API:u-1 10",
        "api:" + "u" * 65,
        "-5 10",
        "501 -1",
        "501 0",
        "501 1000000001",
        "501 99999999999999999999",
        "501 1e9",
        "501 ١٢٣",
        "501 10 extra",
        "99999999999999999999 10",
        "tg:501 10",
        "0 10",
        "501 of",
        "5" * 5000,
    ],
)
async def test_malformed_quota_arguments_get_the_usage_text_and_change_nothing(
    bot: RunningBot, args: str
) -> None:
    """Missing, negative, zero, huge, non-numeric, non-ASCII digits, extra words: the
    usage text, and no override stored."""
    text = await say(bot, ADMIN, f"/quota {args}".strip())
    assert text.startswith("/quota <user id>")
    assert text.endswith(
        "<user id>: a Telegram user's id, api:<userId> for an HTTP API user, or "
        "api<bot id>:<userId> for an API user of an added bot"
    )
    assert await bot.runtime.store.load_quota_override(f"tg:{USER}") is None
    for person in ("api0:u-1", "api07:u-1", "api7:u-1", "api:u-1"):
        assert await bot.runtime.store.load_quota_override(person) is None


async def test_quota_is_refused_to_others_and_in_groups(bot: RunningBot) -> None:
    """A person not in ADMIN_USER_IDS gets the not-allowed answer; an admin in a group is
    told to use a private chat; nothing is stored either way."""
    assert await say(bot, USER, f"/quota {USER} off") == "Sorry, this bot is not available here."
    assert await say(bot, EXEMPT, f"/quota {EXEMPT} off") == (
        "Sorry, this bot is not available here."
    )
    before = len(bot.api.calls_of("sendMessage"))
    await post_in_group(bot, f"/quota {USER} off", user=ADMIN, name="Op", addressed=None)
    await bot.api.wait_for(lambda c: c.method == "sendMessage", count=before + 1)
    assert bot.api.calls_of("sendMessage")[-1].params["text"] == (
        "Use /quota in a private chat with me."
    )
    assert await bot.runtime.store.load_quota_override(f"tg:{USER}") is None
    assert await bot.runtime.store.load_quota_override(f"tg:{EXEMPT}") is None


async def test_a_follow_up_over_the_limit_is_refused(bot: RunningBot) -> None:
    """After a final answer that used the limit, a follow-up (a reply to the answer) is
    refused with the same message; the model is not called."""
    await say(bot, USER, "/rounds 1")
    spend(bot, LIMIT, "Use PostgreSQL.")
    await ask_private(bot, USER, "Pick a database")
    answer = sent(bot, USER)[-1]
    calls = len(bot.model.requests)
    before = len(sent(bot, USER))
    await bot.send(USER, "And backups?", reply_to_message=answer.result["message_id"])
    text = (await wait_sent(bot, USER, before + 1))[-1]
    assert "did not send this to the model" in text
    assert len(bot.model.requests) == calls


@pytest.fixture
async def voice_bot(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
) -> AsyncIterator[RunningBot]:
    async with started_bot(
        tmp_path / "bot.sqlite3",
        bot_api,
        model_server,
        user_daily_token_limit=LIMIT,
        transcription_model="whisper-1",
        transcription_base_url=transcription_server.base_url,
    ) as running:
        yield running


async def test_a_voice_note_over_the_limit_is_refused_before_it_is_transcribed(
    voice_bot: RunningBot,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """A refused person's voice note is neither downloaded nor transcribed."""
    spend(voice_bot, LIMIT)
    await ask_private(voice_bot, USER, "Pick a database")
    await say(voice_bot, USER, "/reset")
    [text] = await ask_private(voice_bot, USER, None, media=voice_bot.api.voice(VOICE))
    assert "did not send this to the model" in text
    assert transcription_server.calls == []
    assert not [c for c in voice_bot.api.calls if c.method == "getFile"]
