"""Images over the real openai SDK and the fake model server: how image parts are sent, how
each real server's refusal of them is classified, and what they count in a token estimate."""

from __future__ import annotations

import pytest

from core.domain.attachments import Image
from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import CompletionRequest
from core.domain.tokens import IMAGE_TOKENS, estimate_prompt_tokens, estimate_tokens
from core.llm.llm import OpenAICompleter
from core.prompting.requests import with_images
from fakes.model_server import IMAGE_ERRORS, FakeModelServer, image_parts

PNG = Image("image/png", b"\x89PNG\r\n\x1a\n-a-tiny-picture")
QUESTION = "What is wrong with this plant?"


def with_photo(text: str = QUESTION, images: tuple[Image, ...] = (PNG,)) -> CompletionRequest:
    message = with_images({"role": "user", "content": text}, images)
    return CompletionRequest([{"role": "system", "content": "Be brief."}, message], "m")


async def test_image_parts_reach_the_server_after_the_text(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """The user message is a list of parts: its text first, then the image as a data URL;
    the fake server answers from the text parts, as a vision model would read them."""
    second = Image("image/jpeg", b"\xff\xd8\xff-another")

    completion = await completer.complete(with_photo(images=(PNG, second)))

    user = model_server.requests[0]["messages"][1]
    assert user["content"][0] == {"type": "text", "text": QUESTION}
    assert [part["image_url"]["url"] for part in image_parts(user)] == [
        PNG.data_url(),
        second.data_url(),
    ]
    assert PNG.data_url().startswith("data:image/png;base64,")
    assert completion.text == f"Reply to: {QUESTION}"


@pytest.mark.parametrize("server", sorted(IMAGE_ERRORS))
async def test_each_servers_refusal_of_images_is_images_rejected(
    model_server: FakeModelServer, completer: OpenAICompleter, server: str
) -> None:
    """What OpenAI, llama.cpp (a 500), Groq, DeepSeek and vLLM answer to image parts for a
    text-only model is IMAGES_REJECTED, which no edge sees: the service asks again."""
    model_server.reject_images = server

    with pytest.raises(ModelError) as caught:
        await completer.complete(with_photo())

    assert caught.value.kind is ModelErrorKind.IMAGES_REJECTED
    assert "LLM_VISION" in caught.value.detail
    assert len(model_server.requests) == 1


async def test_the_same_words_without_images_are_an_ordinary_rejection(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Only a request that carried images can have been refused for them: the same 400
    to a text request is REJECTED, and a 500 is the server being unavailable."""
    text_only = CompletionRequest([{"role": "user", "content": QUESTION}], "m")
    status, message, _ = IMAGE_ERRORS["openai"]
    model_server.enqueue(message, status=status)
    model_server.enqueue(IMAGE_ERRORS["llama.cpp"][1], status=500)

    with pytest.raises(ModelError) as rejected:
        await completer.complete(text_only)
    with pytest.raises(ModelError) as unavailable:
        await completer.complete(text_only)

    assert rejected.value.kind is ModelErrorKind.REJECTED
    assert unavailable.value.kind is ModelErrorKind.UNAVAILABLE


async def test_other_failures_of_a_request_with_images_keep_their_kind(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A request with images over the context, or refused for an unrelated reason, is not
    taken for a refusal of its images."""
    model_server.enqueue(
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9120 tokens (including images).",
        status=400,
    )
    model_server.enqueue("temperature must be at most 2", status=400)

    with pytest.raises(ModelError) as too_long:
        await completer.complete(with_photo())
    with pytest.raises(ModelError) as rejected:
        await completer.complete(with_photo())

    assert too_long.value.kind is ModelErrorKind.CONTEXT_TOO_LONG
    assert rejected.value.kind is ModelErrorKind.REJECTED


async def test_an_estimated_prompt_counts_the_text_parts_and_a_fixed_cost_per_image(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A server that reports no usage (llama.cpp) gets an estimate: the text parts by the
    byte formula, each image as IMAGE_TOKENS, never the data URL's base64 characters."""
    big = Image("image/png", b"\x00" * 300_000)  # a 400,000-character data URL
    request = with_photo(images=(big, PNG))
    model_server.enqueue("Overwatered.", no_usage=True)

    completion = await completer.complete(request)

    as_text = estimate_prompt_tokens(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
    )
    assert completion.usage.estimated
    assert completion.usage.prompt_tokens == as_text + 2 * IMAGE_TOKENS
    assert completion.usage.prompt_tokens < estimate_tokens(big.data_url()) // 10
