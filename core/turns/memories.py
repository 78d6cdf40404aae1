"""Client memory for the edges: what a consultation starts with, what it leaves behind,
and what a person sees and deletes.

Invariants:
- with `memory_enabled` off, or a person's memory off, nothing is read into a new
  consultation, no model call is made when it completes, and nothing is added; the same
  once the person has used up a token limit (the call would be paid with their tokens);
- a consultation uses the facts of the owner it started with (`Consultation.memory_owner`,
  read once when it starts: no store read per round);
- facts are extracted only from a COMPLETE consultation with an owner, after its reply was
  delivered (`remember`), and kept only if the consultation is still stored when the
  model has answered (one forgotten meanwhile leaves nothing behind); the one-time
  notice is due the first time facts are kept for a person, and is marked given in the
  same call;
- a fact is deleted only through the owner's scope (`forget_fact`): a forged id changes
  nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from core.domain.consultation import Consultation, Status, Usage
from core.domain.facts import MemoryPreferences, MemoryScope, MemoryState, MemoryUpdate, person_of
from core.domain.llm_format import StructuredFormats
from core.domain.ports import Completer, ConsultationStore
from core.domain.quotas import QuotaExceeded, Stage
from core.domain.usage import Accounting, CallKind, Payer
from core.prompting.memory_call import FactsCall
from core.prompting.prompts import PromptLibrary
from core.prompting.requests import EngineConfig, model_of
from core.turns.chosen_languages import ChosenLanguages
from core.turns.quota_checks import Quotas
from core.turns.quota_holds import holding


async def opening(
    store: ConsultationStore, config: EngineConfig, scope: MemoryScope | None
) -> tuple[str | None, tuple[str, ...]]:
    """The memory owner and facts (newest first) a consultation started in `scope` gets:
    (None, ()) without a scope, with memory off for the deployment or the person."""
    if scope is None or not config.memory_enabled:
        return None, ()
    state = await store.load_memory(scope.owner, scope.person)
    if not state.preferences.enabled:
        return None, ()
    return scope.owner, tuple(fact.text for fact in state.facts)


class Memories:
    """Reading, extracting and deleting a person's facts (reached as `Engine.memories`)."""

    def __init__(
        self,
        store: ConsultationStore,
        completer: Completer,
        prompts: PromptLibrary,
        config: EngineConfig,
        clock: Callable[[], float],
        accounting: Accounting,
        quotas: Quotas,
        languages: ChosenLanguages,
        formats: StructuredFormats,
    ) -> None:
        """`languages` is the process's one cache of chosen languages: forgetting a person
        forgets theirs; `formats`, what the process learned of the endpoint's structured
        replies (shared with the clarifying rounds)."""
        self._store = store
        self._quotas = quotas
        self._languages = languages
        self._accounting = accounting
        self._config = config
        self._clock = clock
        self._call = FactsCall(completer, prompts, formats)

    @property
    def enabled(self) -> bool:
        return self._config.memory_enabled

    async def remember(self, consultation_id: str) -> MemoryUpdate:
        """Extract and keep the durable facts of a completed consultation (see the module).

        Raises `ModelError` or `StoreUnavailable` when the call or the store fails; nothing
        is kept then."""
        if not self._config.memory_enabled:
            return MemoryUpdate()
        consultation = await self._store.get(consultation_id)
        if (
            consultation is None
            or consultation.memory_owner is None
            or consultation.status is not Status.COMPLETE
        ):
            return MemoryUpdate()
        owner = consultation.memory_owner
        person = person_of(owner)
        state = await self._store.load_memory(owner, person)
        if not state.preferences.enabled:
            return MemoryUpdate()
        try:  # checked and held like a follow-up: paid with the person's tokens
            admission = await self._quotas.admit(
                Payer(person=person), Stage.FOLLOW_UP, self._config.max_tokens or 0, heard=False
            )
        except QuotaExceeded:
            return MemoryUpdate()
        model = model_of(consultation.options.model, self._config)
        async with holding(admission.held):
            facts = [f.text for f in state.facts]
            found, spent = await self._call.extract(consultation, facts, model)
            await self._charge(consultation, person, model, spent)
        if not found or await self._store.get(consultation_id) is None:
            # Nothing said, or the consultation was forgotten while the model read it:
            # what it said must not come back as facts.
            return MemoryUpdate()
        added = await self._store.add_facts(owner, person, found, at=self._clock())
        first_time = bool(added) and not state.preferences.notice_given
        if first_time:
            await self._store.save_memory_preferences(
                person, dataclasses.replace(state.preferences, notice_given=True)
            )
        return MemoryUpdate(added, first_time)

    async def _charge(
        self, consultation: Consultation, person: str, model: str, spent: Usage
    ) -> None:
        """Count the extraction's calls for the person and the chat (the facts may yet
        fail to be kept: the tokens were spent either way)."""
        if not spent.total_tokens:
            return
        charge = self._accounting.charge(
            spent,
            model=model,
            kind=CallKind.MEMORY,
            chat=consultation.chat_key,
            payer=Payer(person=person),
            at=self._clock(),
        )
        await self._store.add_usage([charge])
        self._accounting.observe(charge)

    async def state(self, scope: MemoryScope) -> MemoryState:
        """The scope's facts (newest first) and its person's preferences."""
        return await self._store.load_memory(scope.owner, scope.person)

    async def forget_fact(self, scope: MemoryScope, fact_id: int) -> bool:
        """Delete one of the scope's own facts; True when it was there."""
        return await self._store.delete_fact(scope.owner, fact_id)

    async def set_enabled(self, scope: MemoryScope, enabled: bool) -> MemoryPreferences:
        """Turn the person's memory on or off (everywhere: the preference is the person's).
        Facts already kept stay until deleted; while off none are used or added."""
        state = await self._store.load_memory(scope.owner, scope.person)
        preferences = dataclasses.replace(state.preferences, enabled=enabled)
        await self._store.save_memory_preferences(scope.person, preferences)
        return preferences

    async def forget(self, person: str) -> int:
        """Delete all of `person`'s facts (every scope) and preferences, their interface
        language among them; how many facts."""
        try:
            return await self._store.forget_memory(person)
        finally:  # even a failed write may have committed
            self._languages.refresh(person)
