"""/model in Telegram: the chat's model, shown with a button per allowed model, and chosen.

Invariants:
- a button carries `md:<index>:<list tag>`, never a model's name: the index into
  LLM_MODELS as configured when the button was sent, and a tag of that whole list. It is
  read back strictly: forged or out-of-range data is ignored, and a tag of another list
  (the operator changed LLM_MODELS since) is refused in the press's popup; neither
  changes anything;
- in groups, choosing is for admins and the consultation's starter when
  GROUP_CONFIG_ADMINS_ONLY (the rule of /rounds and /role); anyone may look;
- a model chosen here that LLM_MODELS no longer names is said, and LLM_MODEL is used;
- a person whose active plan lists models sees and may choose them first (the list, and
  so its tag, is the presser's own: `ChatSettingsKeeper.models`); when the plan ends they
  are gone from it, and a plan's model chosen is said as removed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable, Sequence

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.commands.refusals import Refusals
from bot.transport.chat import Context, Incoming
from bot.transport.say import Say
from bot.updates.buttons import Press, ignored
from core.domain.errors import UnknownModel
from core.turns.chat_settings import ChatSettingsKeeper
from i18n.translate import t

CHOOSE_MODEL = "md"
"""The kind of a model button's data: `md:<index>:<list tag>`."""
SHOWN_NAME_CHARS = 40
"""How much of an unknown name a reply quotes."""
_VALUE = re.compile(r"(0|[1-9][0-9]?):([0-9a-f]{8})")

MayConfigure = Callable[[Incoming, Context], Awaitable[bool]]
PlanModels = Callable[[str | None], Awaitable[tuple[str, ...]]]


def list_tag(models: Sequence[str]) -> str:
    """Eight hex digits that change whenever the list (its names or order) does."""
    return hashlib.sha256("\n".join(models).encode()).hexdigest()[:8]


def models_keyboard(models: Sequence[str], current: str) -> InlineKeyboardMarkup:
    """One button per model, in LLM_MODELS' order, ✓ on the chat's current one."""
    tag = list_tag(models)
    rows = [
        [
            InlineKeyboardButton(
                f"✓ {name}" if name == current else name,
                callback_data=f"{CHOOSE_MODEL}:{index}:{tag}",
            )
        ]
        for index, name in enumerate(models)
    ]
    return InlineKeyboardMarkup(rows)


class ModelChoice:
    """The /model command and its buttons."""

    def __init__(
        self,
        settings: ChatSettingsKeeper,
        *,
        say: Say,
        refuse: Refusals,
        may_configure: MayConfigure,
        plan_models: PlanModels | None = None,
    ) -> None:
        """`plan_models`: the models a person's active plan lists (`Quotas.plan_models`;
        None: no plans)."""
        self._plan_models = plan_models
        self._settings = settings
        self._say = say
        self._refuse = refuse
        self._may_configure = may_configure

    async def command(self, incoming: Incoming, context: Context) -> None:
        """Show the chat's model with the choices, or choose one: `/model NAME`."""
        args = context.args or []
        if not args:
            await self._show(incoming)
            return
        if not await self._may_configure(incoming, context):
            await self._refuse(incoming, t(incoming.language, "not_admin"))
            return
        await self._set(incoming, " ".join(args))

    async def press(self, incoming: Incoming, value: str, context: Context, press: Press) -> None:
        """Apply a choice from the /model buttons (a refusal goes in the press's popup)."""
        match = _VALUE.fullmatch(value)
        granted = await self._granted(incoming)
        models = self._settings.models(granted)
        if match is None or (int(match[1]) >= len(models) and match[2] == list_tag(models)):
            ignored(press.query.data, "not a model choice")
            return
        if match[2] != list_tag(models):
            await press.answer(t(incoming.language, "model_stale"))
            return
        if not await self._may_configure(incoming, context):
            await press.answer(t(incoming.language, "not_admin"))
            return
        # The press is answered after the change, so a failing store is told in its popup.
        await self._set(incoming, models[int(match[1])], granted)

    async def _granted(self, incoming: Incoming) -> tuple[str, ...]:
        """The models the person's plan adds (none for an anonymous admin or a channel)."""
        if self._plan_models is None or incoming.user_id is None or incoming.anonymous_admin:
            return ()
        return await self._plan_models(incoming.person(incoming.user_id))

    async def _show(self, incoming: Incoming) -> None:
        language = incoming.language
        granted = await self._granted(incoming)
        chosen = await self._settings.chat_model(incoming.key, granted)
        lines = [t(language, "model_show", model=chosen.model)]
        if chosen.removed is not None:
            removed = chosen.removed[:SHOWN_NAME_CHARS]
            lines.insert(0, t(language, "model_removed", removed=removed, model=chosen.model))
        keyboard = models_keyboard(self._settings.models(granted), chosen.model)
        await self._say(incoming, "\n".join(lines), keyboard=keyboard)

    async def _set(
        self, incoming: Incoming, name: str, granted: tuple[str, ...] | None = None
    ) -> None:
        language = incoming.language
        if granted is None:
            granted = await self._granted(incoming)
        try:
            await self._settings.set_model(incoming.key, name, granted)
        except UnknownModel:
            models = ", ".join(self._settings.models(granted))
            shown = name[:SHOWN_NAME_CHARS]
            await self._say(incoming, t(language, "model_unknown", value=shown, models=models))
            return
        await self._say(incoming, t(language, "model_set", model=name))
