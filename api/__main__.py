"""`python -m api`: the HTTP API alone, the same as `consultation-bot api` (see `app.cli`).

An entry point only: nothing imports this module, so the `api` package itself never
depends on the composition root.
"""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main(["api", *sys.argv[1:]]))
