"""The engine's primitives: keyed locks, rate windows, expiring caches. Imports nothing
of the engine."""
