"""Fakes of the outside world that run for real on 127.0.0.1 and record what they received."""
