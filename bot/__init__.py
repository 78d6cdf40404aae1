"""The Telegram edge: handlers, delivery, flood control and the process entry point."""

import os

# Opt into python-telegram-bot's timedelta durations now (RetryAfter.retry_after and
# friends); the int form is deprecated since 22.2 and warns on every access.
os.environ.setdefault("PTB_TIMEDELTA", "1")
