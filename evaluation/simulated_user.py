"""The simulated user: a model playing the scenario's persona, one chat message at a time.

Invariant: it is told who it is, what it wants and its hidden facts — never the judge's
rubric — and it sees the conversation from the person's side (the consultant's messages
as the other party's, its own as its own). A group member sees the other members'
messages labelled with their names. How it answers questions is its persona type's rule
set (`Scenario.persona_type`, rendered from `evaluation/prompts/simulated_user`). A
consultant's round asked with options shows them labelled (`1a) …`, see
`evaluation.choices`), and then the prompt says how to choose one. The scenario's
behaviour becomes a cue for the one message it applies to: answer only partly, ask for the
answer at once, change one's mind.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.domain.clarifying import option_lines
from core.domain.ports import Completer, CompletionRequest
from core.prompting.language import LANGUAGE_NAMES
from evaluation.results import SeenMessage
from evaluation.scenarios import PERSONA_TYPES, Scenario, Speaker
from evaluation.templates import render

BOT = "bot"
USER = "user"


class UserGaveUp(Exception):
    """The simulated user's model wrote nothing usable."""


@dataclass(frozen=True, slots=True)
class UserModel:
    completer: Completer
    model: str
    max_tokens: int


def speaker_for(scenario: Scenario, message_index: int) -> Speaker | None:
    """Who writes the user's `message_index`-th message (0: the first): group members take turns."""
    if not scenario.speakers:
        return None
    return scenario.speakers[message_index % len(scenario.speakers)]


def user_prompt(
    scenario: Scenario,
    speaker: Speaker | None,
    after_round: int,
    *,
    opening: str | None,
    options: bool = False,
) -> str:
    """The system prompt for the message written after the bot's reply to `after_round`;
    `opening` is the person's own first message (None when someone else wrote it);
    `options`: that reply offers options to choose from."""
    behaviour = scenario.behaviour
    change = behaviour.changes_mind
    return render(
        "simulated_user",
        kind={name.replace("-", "_"): name == scenario.persona_type for name in PERSONA_TYPES},
        options=options,
        speaker=speaker.name if speaker is not None else None,
        group=scenario.persona,
        persona=speaker.persona if speaker is not None else scenario.persona,
        goal=scenario.goal,
        opening=opening,
        hidden_facts=list(speaker.hidden_facts if speaker is not None else scenario.hidden_facts)
        + (list(scenario.hidden_facts) if speaker is not None else []),
        language=LANGUAGE_NAMES[scenario.language],
        partial=behaviour.answers == "partial",
        ask_for_answer=behaviour.asks_for_answer_immediately and after_round == 1,
        change=change.change if change is not None and change.after_round == after_round else None,
    )


def user_messages(system: str, transcript: list[SeenMessage], me: str) -> list[dict[str, str]]:
    """The chat as the person `me` sees it: their own messages are the assistant's.

    The person's own opening message is left out (the system prompt quotes it), so the
    chat starts with the other side, as chat templates that want turns to alternate
    from the user's require.
    """
    messages = [{"role": "system", "content": system}]
    skip = 1 if transcript and transcript[0].speaker == me else 0
    for seen in transcript[skip:]:
        own = seen.speaker == me
        text = (
            shown(seen)
            if own or seen.speaker == BOT or me == USER
            else (f"{seen.speaker}: {seen.text}")
        )
        role = "assistant" if own else "user"
        if messages[-1]["role"] == role and len(messages) > 1:
            messages[-1] = {"role": role, "content": f"{messages[-1]['content']}\n\n{text}"}
        else:
            messages.append({"role": role, "content": text})
    return messages


def shown(seen: SeenMessage) -> str:
    """A message as its reader sees it: a round's text with its options labelled below."""
    lines = "\n".join(option_lines([q.options for q in seen.questions]))
    return f"{seen.text}\n\n{lines}" if lines else seen.text


def offers_options(transcript: list[SeenMessage]) -> bool:
    """Whether the conversation's last message is a round offering options."""
    return bool(transcript) and any(q.options for q in transcript[-1].questions)


async def next_message(
    user: UserModel, scenario: Scenario, transcript: list[SeenMessage], after_round: int
) -> tuple[str, str]:
    """(speaker, text) of the user's next message; `UserGaveUp` when the model wrote nothing."""
    speaker = speaker_for(scenario, after_round)
    me = speaker.name if speaker is not None else USER
    opening = transcript[0].text if transcript and transcript[0].speaker == me else None
    system = user_prompt(
        scenario, speaker, after_round, opening=opening, options=offers_options(transcript)
    )
    request = CompletionRequest(
        messages=user_messages(system, transcript, me), model=user.model, max_tokens=user.max_tokens
    )
    text = (await user.completer.complete(request)).text.strip()
    if not text:
        raise UserGaveUp("the simulated user's model wrote an empty message")
    return me, text
