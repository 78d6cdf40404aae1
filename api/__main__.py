"""`python -m api`: the HTTP API alone, the same as `consultation-bot api` (see `app.cli`).

An entry point only: nothing imports this module, so the `api` package itself never
depends on the composition root. `-h`/`--help` shows the family's usage and exits 0.
"""

import sys

from app.cli import main

HELP = {"-h", "--help", "help"}

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(["--help"] if HELP.intersection(args) else ["api", *args]))
