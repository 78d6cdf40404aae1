"""The benchmark's second yardstick: the minimal relay, a PTB bot with a chat history.

What the smallest bot that holds a conversation looks like: PTB polling with default
settings except `concurrent_updates(256)`, one **non-streaming** `openai`
`chat.completions.create` per message carrying the chat's history so far, the reply
sent with one `sendMessage`. The history is a dict in memory (chat id → messages),
each exchange appended once its reply arrived; nothing else is kept, nothing shown
while the model works, standard asyncio event loop and httpx. Same shape, start-up and
environment variables as `bench/reference_bot.py` (TELEGRAM_BOT_TOKEN,
TELEGRAM_API_BASE_URL, OPENAI_API_KEY, OPENAI_BASE_URL, LLM_MODEL).
"""

from __future__ import annotations

import logging
import os

from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from telegram import Update
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    client = AsyncOpenAI(
        api_key=os.environ["OPENAI_API_KEY"], base_url=os.environ.get("OPENAI_BASE_URL")
    )
    model = os.environ.get("LLM_MODEL", "gpt-4o-mini")
    histories: dict[int, list[ChatCompletionMessageParam]] = {}

    async def relay(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or not message.text:
            return
        history = histories.setdefault(message.chat_id, [])
        asked: ChatCompletionMessageParam = {"role": "user", "content": message.text}
        completion = await client.chat.completions.create(model=model, messages=[*history, asked])
        reply = completion.choices[0].message.content or "…"
        history += [asked, {"role": "assistant", "content": reply}]
        await context.bot.send_message(message.chat_id, reply)

    application = (
        ApplicationBuilder()
        .token(os.environ["TELEGRAM_BOT_TOKEN"])
        .base_url(os.environ.get("TELEGRAM_API_BASE_URL", "https://api.telegram.org/bot"))
        .concurrent_updates(256)
        .build()
    )
    application.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, relay))
    application.run_polling(allowed_updates=Update.ALL_TYPES)


if __name__ == "__main__":
    main()
