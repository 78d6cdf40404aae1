"""Run one consultation against any OpenAI-compatible server and show what crossed the wire.

    python scripts/trial_consultation.py --base-url http://127.0.0.1:8001/v1 --model local

The real engine (the same `Engine`, prompts, context window and answer
collection as the bot) runs on a throwaway SQLite file. Between it and the model sits a
small recording proxy on 127.0.0.1, so the script can print, for every round, what the
model was sent (the system prompt's last lines, the user messages, `max_tokens`) and what
came back (the reply, its finish, the usage as reported or estimated). The user's
answers are scripted (`--message`, repeatable; the first is the request), so a trial is
one command and can be repeated after a change.

Exit status: 0 when every round was answered and the final round's request carried every
user message, 1 otherwise (the reason is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.runtime import check_model_endpoint, open_runtime
from app.settings import load_settings
from core.domain.asking import UserMessage
from core.domain.errors import ConfigError, ConsultationError, TurnDidNotHappen

DEFAULT_MESSAGES = [
    "I want to start running. Can you make me a plan?",
    "I'm 35, haven't exercised in years, and I'd like to run a 5K in 3 months.",
    "Three evenings a week, about 40 minutes each. My knees are fine.",
]
KEY = "trial:local"


class RecordingProxy:
    """Forwards `/v1/...` to the real server and keeps each request body, streams as they come."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.base_url = ""
        self._session: ClientSession | None = None

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/v1/{tail:.*}", self._forward)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._session = ClientSession(timeout=ClientTimeout(total=None, sock_read=600))

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self.runner is not None:
            await self.runner.cleanup()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        if body and request.method == "POST":
            with contextlib.suppress(ValueError):
                self.requests.append(json.loads(body))
        forwarded = {"authorization", "content-type"}
        headers = {k: v for k, v in request.headers.items() if k.lower() in forwarded}
        url = f"{self.upstream}/{request.match_info['tail']}"
        async with self._session.request(
            request.method, url, data=body or None, headers=headers
        ) as upstream:
            response = web.StreamResponse(status=upstream.status)
            response.content_type = upstream.content_type
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


def tail_lines(text: str, count: int) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines()[-count:])


def show_request(body: dict[str, Any]) -> None:
    messages = body.get("messages") or []
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    users = [m["content"] for m in messages if m.get("role") == "user"]
    print(f"  sent: {len(messages)} messages, max_tokens={body.get('max_tokens')}")
    print("  system prompt, last lines:")
    print(tail_lines(system, 6))
    for text in users:
        print(f"  user turn: {text[:160]!r}")


async def run(args: argparse.Namespace) -> int:
    proxy = RecordingProxy(args.base_url)
    await proxy.start()
    workdir = Path(tempfile.mkdtemp(prefix="trial-"))
    try:
        settings = load_settings(
            openai_base_url=proxy.base_url,
            openai_api_key=args.api_key,
            llm_model=args.model,
            db_path=workdir / "trial.sqlite3",
            default_max_rounds=len(args.message),
        )
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        await proxy.stop()
        return 2
    failures: list[str] = []
    try:
        async with open_runtime(settings) as runtime:
            await check_model_endpoint(runtime)
            for number, message in enumerate(args.message, start=1):
                print(f"\n=== round {number}: the user says {message!r}")
                before = len(proxy.requests)
                started = time.perf_counter()
                try:
                    reply = await runtime.engine.turns.ask(UserMessage(KEY, message))
                except (TurnDidNotHappen, ConsultationError) as exc:
                    failures.append(f"round {number}: {exc}")
                    print(f"  error: {exc}")
                    break
                elapsed = time.perf_counter() - started
                for body in proxy.requests[before:]:
                    show_request(body)
                print(
                    f"  reply ({elapsed:.1f} s, round {reply.round} of {reply.max_rounds}, "
                    f"final={reply.is_final}, usage={reply.usage}, notices="
                    f"{sorted(n.value for n in reply.notices)}):"
                )
                print(tail_lines(reply.text, args.reply_lines))
                if reply.is_complete:
                    break
    finally:
        await proxy.stop()
    final = [b for b in proxy.requests if "messages" in b][-1:] if proxy.requests else []
    if final:
        sent = json.dumps(final[0]["messages"], ensure_ascii=False)
        missing = [m for m in args.message if json.dumps(m, ensure_ascii=False)[1:-1] not in sent]
        if missing:
            failures.append(f"the last request lacks {len(missing)} user message(s): {missing}")
    for failure in failures:
        print(f"\nFAILED: {failure}")
    if not failures:
        print("\nOK: every round answered; the last request carried every user message.")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8001/v1")
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default="local", help="any value for servers without keys")
    parser.add_argument(
        "--message",
        action="append",
        help="the user's messages in order (repeat); default: a 3-round running plan",
    )
    parser.add_argument("--reply-lines", type=int, default=8, help="reply lines to print")
    args = parser.parse_args()
    args.message = args.message or DEFAULT_MESSAGES
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
