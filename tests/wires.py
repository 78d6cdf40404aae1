"""The two paths a chat completion can take, for tests that hold on both."""

from __future__ import annotations

from typing import Literal

from providers.chat_http import AiohttpChatWire

Transport = Literal["httpx", "aiohttp"]
"""`LLM_HTTP_TRANSPORT`: "aiohttp" posts over `providers.chat_http` (the default),
"httpx" goes through the openai SDK."""


def wire_for(transport: Transport, timeout: float) -> AiohttpChatWire | None:
    """The wire a completer of `transport` sends over (None: the SDK's own path)."""
    return AiohttpChatWire(timeout=timeout) if transport == "aiohttp" else None
