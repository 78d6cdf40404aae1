"""A chat's settings: its round limit, persona and model, what it may choose among, and
how a choice reaches the consultation under way.

Invariants:
- a choice is validated before anything is stored (`InvalidMaxRounds`, `UnknownRole`,
  `UnknownModel`: nothing changed) and written under the chat's lock, so it never lands in
  the middle of one of the chat's turns;
- a round limit applies to the active consultation too; a model applies from the chat's
  next model call, to its latest consultation while that is active or takes follow-ups
  (a turn reads the model with its consultation, never the chat's settings again); a
  persona applies to the chat's next consultations;
- a chat's model is one LLM_MODELS names: a choice the operator removed since reads as
  LLM_MODEL (`core.prompting.requests.model_of`); reading never waits for a running turn;
- a person whose active plan lists models may choose those too (`plan_models`, the
  plan's first being their default: `EngineConfig.for_plan`); when the plan ends, such a
  choice reads as the default again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from core.domain.consultation import ChatSettings, Status
from core.domain.errors import InvalidMaxRounds, UnknownModel, UnknownRole
from core.domain.outcomes import ChatModel, RoundsChange
from core.domain.ports import ChatLocks, ConsultationStore
from core.prompting.prompts import PromptLibrary, RoleInfo
from core.prompting.requests import EngineConfig, model_of
from core.prompting.rounds import validate_max_rounds
from core.turns.user_turns import UserTurns


class ChatSettingsKeeper:
    """Reads and changes a chat's settings (reached as `Engine.settings`)."""

    def __init__(
        self,
        store: ConsultationStore,
        prompts: PromptLibrary,
        config: EngineConfig,
        clock: Callable[[], float],
        *,
        locks: ChatLocks,
        user_turns: UserTurns,
    ) -> None:
        """`locks` are the service's: a change waits for the chat's running turn."""
        self._store = store
        self._prompts = prompts
        self._config = config
        self._clock = clock
        self._locks = locks
        self._user_turns = user_turns

    async def of(self, chat_key: str) -> ChatSettings:
        """The chat's settings as stored (defaults not filled in)."""
        return await self._store.load_chat_settings(chat_key)

    async def set_max_rounds(self, chat_key: str, value: int) -> RoundsChange:
        """Set the chat's round limit; it applies to the active consultation too."""
        limit = self._config.max_rounds_limit
        if not validate_max_rounds(value, limit=limit):
            raise InvalidMaxRounds(f"rounds must be between 1 and {limit}")
        async with self._locks.hold(chat_key):
            settings = await self._store.load_chat_settings(chat_key)
            await self._store.save_chat_settings(chat_key, _replace(settings, max_rounds=value))
            consultation, _ = await self._user_turns.active_or_none(chat_key, self._clock())
            if consultation is None:
                return RoundsChange(value, active=False, rounds_done=0, next_is_final=value == 1)
            await self._store.set_max_rounds(consultation.id, value)
            done = consultation.current_round
            return RoundsChange(
                value, active=True, rounds_done=done, next_is_final=done + 1 >= value
            )

    def roles(self) -> dict[str, RoleInfo]:
        """The personas a chat may choose, by key."""
        return self._prompts.roles()

    async def set_role(
        self, chat_key: str, role: str | None, system_prompt: str | None = None
    ) -> None:
        """Choose the persona (or a custom system prompt) for the chat's next consultations.

        Raises `UnknownRole` for a role the prompt library does not have."""
        if role is not None and role not in self._prompts.roles():
            raise UnknownRole(f"unknown role {role!r}")
        async with self._locks.hold(chat_key):
            settings = await self._store.load_chat_settings(chat_key)
            await self._store.save_chat_settings(
                chat_key, _replace(settings, role=role, system_prompt=system_prompt)
            )

    def models(self, plan_models: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The models a chat may choose (LLM_MODELS), in their configured order; with the
        chooser's plan's `plan_models` first."""
        return self._config.for_plan(plan_models).allowed_models

    async def set_model(self, chat_key: str, model: str, plan_models: tuple[str, ...] = ()) -> None:
        """Choose the chat's model (one of LLM_MODELS) from its next model call on: the
        calls of its latest consultation while it is active or takes follow-ups, and those
        of its next consultations (a turn reads the model with its consultation, so no
        turn reads the chat's settings again).

        Raises `UnknownModel` for a model the allow-list (with the chooser's plan's
        `plan_models`) does not name; nothing is stored."""
        if model not in self.models(plan_models):
            raise UnknownModel(f"unknown model {model!r}")
        async with self._locks.hold(chat_key):
            settings = await self._store.load_chat_settings(chat_key)
            await self._store.save_chat_settings(chat_key, _replace(settings, model=model))
            consultation = await self._store.load_latest(chat_key)
            if (
                consultation is not None
                and consultation.status in (Status.ACTIVE, Status.COMPLETE)
                and consultation.options.model != model
            ):
                options = dataclasses.replace(consultation.options, model=model)
                await self._store.set_options(consultation.id, options)

    async def chat_model(self, chat_key: str, plan_models: tuple[str, ...] = ()) -> ChatModel:
        """The model of the chat's next consultation (for a person whose plan lists
        `plan_models`), and the one it chose if the allow-list no longer names it (the
        operator removed it, or the plan that gave it ended)."""
        chosen = (await self._store.load_chat_settings(chat_key)).model
        model = model_of(chosen, self._config.for_plan(plan_models))
        return ChatModel(model, removed=chosen if chosen not in (None, model) else None)


def _replace(settings: ChatSettings, **changes: object) -> ChatSettings:
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]
