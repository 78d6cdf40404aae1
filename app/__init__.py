"""The composition root: settings, wiring (`app.runtime`) and the entry points (`app.cli`).

The only package that knows every other one: it builds the store, the model clients,
the engine and the edges, and hands each edge the engine collaborators it uses and its own
small config.
"""
