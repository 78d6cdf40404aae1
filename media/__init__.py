"""Reading what users attach: voice notes (transcribed), documents (their text), photos."""
