"""The model providers' HTTP edge: OpenAI-compatible endpoints called over aiohttp."""
