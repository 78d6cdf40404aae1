"""/model end to end through the real PTB application and the fake servers: what the user
sees, who may choose in a group, forged and stale presses, and the `model` field of the
next request as the fake model server received it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.commands.model_choice import list_tag
from fakes.bot_api import Call, FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import (
    ALICE,
    BOB,
    CAROL,
    GROUP,
    NOT_ADMIN,
    RunningBot,
    ask_private,
    buttons,
    group_answer,
    group_said,
    group_texts,
    post_in_group,
    press,
    sent,
    started_bot,
)

USER = 611
MODELS = ("test-model", "sonar", "sonar-pro")
TAG = list_tag(MODELS)


@asynccontextmanager
async def models_bot(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    models: tuple[str, ...] = MODELS,
    **overrides: Any,
) -> AsyncIterator[RunningBot]:
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, llm_models=models, **overrides
    ) as bot:
        yield bot


async def pressed(bot: RunningBot, chat: int, user: int, data: str, message_id: int) -> Call:
    """Press a button as `user`; return the bot's answer to that press."""
    update = bot.api.push_update(bot.api.callback_query(chat, user, data, message_id))
    query_id = update["callback_query"]["id"]
    return await bot.api.wait_for(
        lambda c: c.method == "answerCallbackQuery" and c.params["callback_query_id"] == query_id
    )


def labels(call: Call) -> list[str]:
    markup = call.params.get("reply_markup") or {}
    return [b["text"] for row in markup.get("inline_keyboard", []) for b in row]


async def test_model_shows_the_current_model_with_a_button_per_allowed_model(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """/model names LLM_MODEL before any choice, ✓ on it; each button carries an index and
    the list's tag, never a name; no model is called."""
    async with models_bot(tmp_path, bot_api, model_server) as bot:
        [text] = await ask_private(bot, USER, "/model")
        assert text.startswith("Model: test-model.")
        menu = sent(bot, USER)[-1]
        assert buttons(menu) == [f"md:{n}:{TAG}" for n in range(3)]
        assert labels(menu) == ["✓ test-model", "sonar", "sonar-pro"]
        assert bot.model.requests == []


async def test_a_pressed_model_answers_the_next_call_and_status_shows_it(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Mid-consultation, a press on "sonar" makes the very next call name it; /status and
    /model say so."""
    async with models_bot(tmp_path, bot_api, model_server) as bot:
        await ask_private(bot, USER, "Help me choose a laptop")
        await ask_private(bot, USER, "/model")
        text = await press(bot, USER, f"md:1:{TAG}", sent(bot, USER)[-1].result["message_id"])
        assert text == "Model set to sonar. It applies from the next answer."
        await ask_private(bot, USER, "For video editing")
        assert [r["model"] for r in bot.model.requests] == ["test-model", "sonar"]
        [status] = await ask_private(bot, USER, "/status")
        assert "Model: sonar." in status
        await ask_private(bot, USER, "/model")
        assert labels(sent(bot, USER)[-1]) == ["test-model", "✓ sonar", "sonar-pro"]


async def test_model_by_name_applies_to_the_next_consultations(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """`/model sonar-pro` before a consultation: its calls name sonar-pro; idle /status
    shows it."""
    async with models_bot(tmp_path, bot_api, model_server) as bot:
        [text] = await ask_private(bot, USER, "/model sonar-pro")
        assert text.startswith("Model set to sonar-pro.")
        [status] = await ask_private(bot, USER, "/status")
        assert status.startswith("No active consultation.") and "Model: sonar-pro." in status
        await ask_private(bot, USER, "Plan my trip")
        await ask_private(bot, USER, "/reset")
        await ask_private(bot, USER, "Another question")
        assert [r["model"] for r in bot.model.requests] == ["sonar-pro", "sonar-pro"]


@pytest.mark.parametrize("name", ["gpt-4-32k", "SONAR", "0", "sonar " + "x" * 300])
async def test_a_model_outside_the_list_is_refused_and_nothing_changes(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer, name: str
) -> None:
    """A name LLM_MODELS does not list (another case, an index, a long one) gets the list
    and leaves the chat's model as it was."""
    async with models_bot(tmp_path, bot_api, model_server) as bot:
        [text] = await ask_private(bot, USER, f"/model {name}")
        assert text.startswith(f"Unknown model “{name[:40]}”. Available: test-model, sonar")
        assert len(text) < 200
        await ask_private(bot, USER, "Question")
        assert bot.model.requests[-1]["model"] == "test-model"
        settings = await bot.runtime.engine.settings.of(f"tg:{USER}")
        assert settings.model is None


@pytest.mark.parametrize(
    "data",
    [
        "md:sonar",
        "md:1",
        f"md:3:{TAG}",
        f"md:99:{TAG}",
        f"md:-1:{TAG}",
        f"md:01:{TAG}",
        f"md:1:{TAG}:x",
        f"md:1:{TAG}0",
        f"md:1:{TAG[:7]}",
        "md:",
        "md:1:" + "a" * 60,
    ],
)
async def test_forged_model_presses_are_ignored(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer, data: str
) -> None:
    """Data no /model button carries (a name, no tag, out of range, malformed, oversized):
    answered without text, nothing said, nothing stored."""
    async with models_bot(tmp_path, bot_api, model_server) as bot:
        await ask_private(bot, USER, "/model")
        before = len(sent(bot, USER))
        answer = await pressed(bot, USER, USER, data, sent(bot, USER)[-1].result["message_id"])
        assert not answer.params.get("text")
        assert len(sent(bot, USER)) == before
        assert (await bot.runtime.engine.settings.of(f"tg:{USER}")).model is None


async def test_a_button_of_a_changed_list_is_refused_and_a_removed_model_falls_back(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The operator removes the chat's model: /model says so and the next call uses
    LLM_MODEL; a button sent before the change (the same index now names another model)
    is refused in its popup and changes nothing."""
    async with models_bot(tmp_path, bot_api, model_server) as bot:
        await ask_private(bot, USER, "/model sonar-pro")
        await ask_private(bot, USER, "/model")
        old_menu = sent(bot, USER)[-1].result["message_id"]
    async with models_bot(tmp_path, bot_api, model_server, models=("test-model", "sonar")) as bot:
        [text] = await ask_private(bot, USER, "/model")
        assert "“sonar-pro” chosen here is no longer available: test-model is used" in text
        assert labels(sent(bot, USER)[-1]) == ["✓ test-model", "sonar"]
        before = len(sent(bot, USER))
        answer = await pressed(bot, USER, USER, f"md:1:{TAG}", old_menu)
        assert answer.params.get("text") == "The list of models has changed: send /model again."
        assert len(sent(bot, USER)) == before
        await ask_private(bot, USER, "Question")
        assert bot.model.requests[-1]["model"] == "test-model"
        [status] = await ask_private(bot, USER, "/status")
        assert "Model: test-model." in status


async def test_in_groups_only_admins_and_the_starter_choose_the_model(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A plain member may look but not choose (a message for the command, a popup for a
    press); the starter and an admin may; the group's next call names their choice."""
    bot_api.member_status[CAROL] = "administrator"
    async with models_bot(tmp_path, bot_api, model_server) as bot:
        await post_in_group(bot, "@consult_bot plan a trip")  # Alice starts it
        await group_answer(bot, 1)
        await post_in_group(bot, "/model", user=BOB, name="Bob")
        menu = await group_said(bot, "Model: test-model.")
        message_id = int(menu.result["message_id"])

        await post_in_group(bot, "/model sonar", user=BOB, name="Bob")
        await group_said(bot, NOT_ADMIN)
        answer = await pressed(bot, GROUP, BOB, f"md:2:{TAG}", message_id)
        assert answer.params.get("text") == (
            "Only group admins or the member who started the consultation can do that."
        )
        assert (await bot.runtime.engine.settings.chat_model(f"tg:{GROUP}")).model == "test-model"

        await pressed(bot, GROUP, CAROL, f"md:2:{TAG}", message_id)
        await group_said(bot, "Model set to sonar-pro.")
        await post_in_group(bot, "/model sonar", user=ALICE)
        await group_said(bot, "Model set to sonar.")
        await post_in_group(bot, "@consult_bot by train", user=BOB, name="Bob")
        await group_answer(bot, 2)
        assert [r["model"] for r in bot.model.requests] == ["test-model", "sonar"]
        assert len([t for t in group_texts(bot) if NOT_ADMIN in t]) == 1


async def test_anyone_in_a_group_chooses_when_the_operator_allows(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """With GROUP_CONFIG_ADMINS_ONLY=false a plain member's choice is taken, no admin check."""
    async with models_bot(tmp_path, bot_api, model_server, group_config_admins_only=False) as bot:
        await post_in_group(bot, "/model sonar", user=BOB, name="Bob")
        await group_said(bot, "Model set to sonar.")
        assert bot.api.calls_of("getChatMember") == []
