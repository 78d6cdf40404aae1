"""The consultation behind an OpenAI-compatible endpoint (`/v1/models`, `/v1/chat/completions`):
request parsing, the model ids, the reply shapes, the error object and the route handlers,
one module each."""
