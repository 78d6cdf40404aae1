"""`core.llm.llm.LeanAsyncOpenAI`, the SDK client with a request's URL kept per path and a
cheap idempotency key: every call still reaches the server at the base URL it names now,
including after the base URL changed, and keys stay unique; a completer's calls go through
it to the fake OpenAI-compatible server."""

from __future__ import annotations

from core.domain.ports import CompletionRequest
from core.llm.llm import LeanAsyncOpenAI, OpenAICompleter
from fakes.model_server import FakeModelServer


def test_the_url_is_the_base_url_joined_with_the_path_whatever_was_kept() -> None:
    client = LeanAsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")
    first = client._prepare_url("/chat/completions")
    assert str(first) == "http://127.0.0.1:9/v1/chat/completions"
    assert client._prepare_url("/chat/completions") is first
    assert str(client._prepare_url("models")) == "http://127.0.0.1:9/v1/models"
    client.base_url = "http://127.0.0.1:10/other/"
    assert str(client._prepare_url("/chat/completions")) == (
        "http://127.0.0.1:10/other/chat/completions"
    )
    assert str(client._prepare_url("https://example.test/abs")) == "https://example.test/abs"


def test_many_paths_keep_a_bounded_number() -> None:
    client = LeanAsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")
    for n in range(1000):
        assert str(client._prepare_url(f"/p{n}")) == f"http://127.0.0.1:9/v1/p{n}"
    assert len(client._urls) <= LeanAsyncOpenAI._MAX_URLS


def test_idempotency_keys_are_unique_within_and_across_clients() -> None:
    one = LeanAsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")
    two = one.with_options(timeout=3)
    keys = [one._idempotency_key() for _ in range(100)] + [two._idempotency_key()]
    assert isinstance(two, LeanAsyncOpenAI)
    assert len(set(keys)) == len(keys)


async def test_a_completer_calls_the_server_through_it(model_server: FakeModelServer) -> None:
    """Without a wire, the SDK's path, through the lean client."""
    completer = OpenAICompleter(
        api_key="x", base_url=model_server.base_url, timeout=5, max_retries=0, wire=None
    )
    assert isinstance(completer._client, LeanAsyncOpenAI)
    model_server.enqueue("First answer")
    model_server.enqueue("Second answer")
    try:
        request = CompletionRequest(model="m", messages=[{"role": "user", "content": "Hi"}])
        texts = [(await completer.complete(request)).text for _ in range(2)]
    finally:
        await completer.close()
    assert texts == ["First answer", "Second answer"]
    assert [r["messages"] for r in model_server.requests] == [request.messages] * 2
