"""The latency floor: the least any bot can do per round on these fakes, with no framework.

Raw aiohttp on uvloop: long-poll getUpdates, one streamed model call per message
(the body read whole, the text pulled out of the SSE lines), one sendMessage.
No parsing into objects, no persistence, no error handling. What the benchmark
measures for it is the fakes' and the loopback's share of every round, so the
figures of the real contenders can be read as "floor + what the bot adds".
Same environment variables as the product.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import aiohttp


async def relay(
    http: aiohttp.ClientSession, api: str, model_url: str, message: dict[str, Any]
) -> None:
    body = {
        "model": os.environ.get("LLM_MODEL", "fake"),
        "messages": [{"role": "user", "content": message.get("text", "")}],
        "stream": True,
    }
    headers = {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"}
    async with http.post(model_url, json=body, headers=headers) as response:
        raw = await response.read()
    pieces = []
    for line in raw.split(b"\n"):
        if line.startswith(b"data: {"):
            for choice in json.loads(line[6:]).get("choices") or []:
                pieces.append((choice.get("delta") or {}).get("content") or "")
    form = {"chat_id": str(message["chat"]["id"]), "text": "".join(pieces) or "…"}
    async with http.post(f"{api}/sendMessage", data=form) as response:
        await response.read()


async def main() -> None:
    api = os.environ["TELEGRAM_API_BASE_URL"] + os.environ["TELEGRAM_BOT_TOKEN"]
    model_url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
    tasks: set[asyncio.Task[None]] = set()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1024)) as http:
        offset = 0
        while True:
            form = {"offset": str(offset), "timeout": "30"}
            async with http.post(f"{api}/getUpdates", data=form) as response:
                updates = (await response.json())["result"]
            for update in updates:
                offset = update["update_id"] + 1
                if "message" in update:
                    task = asyncio.create_task(relay(http, api, model_url, update["message"]))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())
