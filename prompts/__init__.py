"""The default prompt templates (Mustache files beside this module)."""

from pathlib import Path

DEFAULT_PROMPTS_DIR = Path(__file__).resolve().parent
