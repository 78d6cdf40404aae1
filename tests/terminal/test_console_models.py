"""The console's /model as a person at a terminal sees it (a real console process against
the fake model server): the list, a refusal, a choice the next model call uses."""

from __future__ import annotations

from pathlib import Path

from fakes.model_server import FakeModelServer
from tests.terminal.test_console import console


async def test_model_lists_the_models_and_a_choice_reaches_the_next_call(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """`/model` marks the one in use; a name outside LLM_MODELS changes nothing; a listed
    one is what the next request names."""
    code, out = await console(
        tmp_path,
        model_server,
        ["/model", "/model gpt-4-32k", "/model sonar", "/model", "Which laptop should I buy?"],
        LLM_MODEL="test-model",
        LLM_MODELS="test-model,sonar",
    )
    assert code == 0
    assert "[models (* in use)" in out
    assert "* test-model" in out  # the default, before any choice
    assert "[unknown model “gpt-4-32k”: test-model, sonar; nothing changed]" in out
    assert "[model set to sonar" in out
    assert "* sonar" in out
    assert [request["model"] for request in model_server.requests] == ["sonar"]
