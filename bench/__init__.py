"""Benchmark: the product bot against a bare python-telegram-bot relay, on local fakes."""
