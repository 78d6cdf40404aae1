#!/usr/bin/env bash
# The production smoke on a plain install (scripts/smoke_installed.py): the wheel built
# from this checkout's files (tracked and new, not ignored), installed WITHOUT extras into
# a fresh virtual environment, then the smoke run with that environment's interpreter.
#
#   scripts/smoke-wheel.sh                          # builds the wheel
#   WHEEL=/path/consultation_bot-….whl scripts/smoke-wheel.sh   # one built already
#
# Exit status: the smoke's (0 passed, 1 a check failed), or the build's or pip's.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== a fresh virtual environment"
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --upgrade pip
if [ -z "${WHEEL:-}" ]; then
    echo "== the wheel, built from a copy of the checkout's files"
    mkdir "$work/src"
    git ls-files -z --cached --others --exclude-standard \
        | tar --null --files-from=- --ignore-failed-read -c 2>/dev/null | tar -C "$work/src" -x
    "$work/venv/bin/pip" wheel --quiet --no-deps --wheel-dir "$work/dist" "$work/src"
    WHEEL=$(echo "$work"/dist/consultation_bot-*.whl)
fi
echo "== pip install $(basename "$WHEEL") (no extras)"
"$work/venv/bin/pip" install --quiet "$WHEEL"
"$work/venv/bin/python" scripts/smoke_installed.py
