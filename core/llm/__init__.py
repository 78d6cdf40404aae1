"""Talking to the model: the client, its streams, errors and deadlines, collecting and
joining a reply. Imports `core.domain` and `core.primitives` only."""
