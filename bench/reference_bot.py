"""The benchmark's yardstick: a bare python-telegram-bot bot that relays each message to the model.

What a straightforward bot looks like: PTB polling with default settings except
`concurrent_updates(256)`, one streamed `openai` `chat.completions.create` per
message (streamed like the product, so both pay for chunk decoding), the whole
reply sent with one `sendMessage`. No persistence, no context, no progress
display, standard asyncio event loop. Settings come from the same environment
variables as the product (TELEGRAM_BOT_TOKEN, TELEGRAM_API_BASE_URL,
OPENAI_API_KEY, OPENAI_BASE_URL, LLM_MODEL).
"""

from __future__ import annotations

import logging
import os

from openai import AsyncOpenAI
from telegram import Update
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    client = AsyncOpenAI(
        api_key=os.environ["OPENAI_API_KEY"], base_url=os.environ.get("OPENAI_BASE_URL")
    )
    model = os.environ.get("LLM_MODEL", "gpt-4o-mini")

    async def relay(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or not message.text:
            return
        stream = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": message.text}], stream=True
        )
        pieces = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
        await context.bot.send_message(message.chat_id, "".join(pieces) or "…")

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
