"""Shared fixtures: the fakes under tests/fakes are plugged in as pytest plugins."""

import os

# The same opt-in as bot/__init__.py, for tests that use telegram without the bot package.
os.environ.setdefault("PTB_TIMEDELTA", "1")

pytest_plugins = ["tests.fakes.model_server", "tests.fakes.bot_api"]
