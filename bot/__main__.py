"""`python -m bot` runs the bot and `python -m bot console` the terminal (see `app.cli`).

An entry point only: nothing imports this module, so the `bot` package itself never
depends on the composition root.
"""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["run"]))
