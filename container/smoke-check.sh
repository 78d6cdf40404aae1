#!/bin/sh
# Checks of the built image, run as a build step of the Dockerfile's `smoke` stage (the
# engine here cannot run containers): the entry point's help, the production smoke
# (scripts/smoke_installed.py, the same one CI runs on the wheel: consultations, documents,
# exports, /start in every language, the API, the web console), and `consultation-bot api`
# under tini with its health check passing and SIGTERM ending it cleanly. Every wait is
# bounded.
set -eu

MODEL_PORT=${SMOKE_MODEL_PORT:-18931}
API_PORT=${SMOKE_API_PORT:-18932}
WORK=$(mktemp -d)

step() { printf '\n== %s\n' "$*"; }

wait_for() {  # wait_for DESCRIPTION COMMAND...: retry COMMAND for up to 30 s
    what=$1
    shift
    tries=0
    until "$@" >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ "$tries" -ge 150 ]; then
            echo "FAILED: $what" >&2
            return 1
        fi
        sleep 0.2
    done
}

port_open() {
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 1)" "$1"
}

step "whoami: $(id -un) ($(id -u)); entry point: $(command -v consultation-bot)"
test "$(id -u)" != 0
command -v tini
tini --version

step "consultation-bot --help"
consultation-bot --help

step "the runtime has no tests and no sources"
python3 - <<'PY'
import importlib.util, sys
assert importlib.util.find_spec("app.cli") is not None, "app is not installed"
assert not [p for p in sys.path if p.endswith("/src")], sys.path
print("app.cli from", importlib.util.find_spec("app.cli").origin)
PY
test ! -e /opt/venv/lib/tests

step "the interface catalogs and the console's templates are installed"
python3 - <<'PY'
from i18n.translate import t
from i18n.languages import LANGUAGES
english = t("en", "answer_button")
missing = [code for code in LANGUAGES if code != "en" and t(code, "answer_button") == english]
assert not missing, f"catalogs not installed for {missing}"
print(len(LANGUAGES), "languages:", " · ".join(t(code, "answer_button") for code in ("de", "fa", "ja")))
from importlib.resources import files
assert files("admin").joinpath("templates").is_dir(), "admin templates missing"
PY

step "the production smoke (scripts/smoke_installed.py)"
python3 /smoke/smoke_installed.py

step "fake model server on 127.0.0.1:$MODEL_PORT"
python3 /smoke/smoke_fakes.py --port "$MODEL_PORT" >"$WORK/model.log" 2>&1 &
MODEL_PID=$!
trap 'status=$?; kill "$MODEL_PID" 2>/dev/null || true
      if [ "$status" != 0 ]; then echo "-- fake model server log:"; tail -n 40 "$WORK/model.log"; fi' EXIT
wait_for "the fake model server listening" port_open "$MODEL_PORT"

export OPENAI_API_KEY=smoke-key
export OPENAI_BASE_URL="http://127.0.0.1:$MODEL_PORT/v1"
export LLM_MAX_RETRIES=0 LLM_STRUCTURED_QUESTIONS=off MEMORY_ENABLED=false LOG_LEVEL=WARNING
export DB_PATH="$WORK/smoke.sqlite3"

step "consultation-bot api under tini: /healthz, then SIGTERM"
API_HOST=127.0.0.1 API_PORT="$API_PORT" tini -s -- consultation-bot api >"$WORK/api.log" 2>&1 &
API_PID=$!
wait_for "the API listening on $API_PORT" port_open "$API_PORT"
API_ENABLED=true API_HOST=0.0.0.0 API_PORT="$API_PORT" \
    wait_for "the image's health check passing" python3 /usr/local/lib/consultation-bot/healthcheck.py
echo "health check: passed"
kill -TERM "$API_PID"
status=0
wait "$API_PID" || status=$?
echo "api exit code after SIGTERM: $status"
test "$status" = 0
if grep -q Traceback "$WORK/api.log"; then cat "$WORK/api.log"; exit 1; fi

step "smoke check passed"
