# The consultation bot as a container image: `consultation-bot run` by default
# (`api`, `console` and `dead-letters` as the command work too).
#
#   docker build -t consultation-bot .
#   docker run --env-file .env -v consult-data:/data consultation-bot
#
# BASE_IMAGE is any Debian-based image with python3 (and its venv module) on PATH.
# The package index settings come in as build arguments (PIP_INDEX_URL,
# PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST), never written here; a CA bundle pip must trust
# can come in as the build secret `pip_cert` (it is not stored in any layer).
# scripts/check-image.sh builds the `smoke` stage, which checks the image in build steps.
ARG BASE_IMAGE=python:3.12-slim

# --- build: the project's wheel, installed with its dependencies into /opt/venv -----------
FROM ${BASE_IMAGE} AS build
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_DEFAULT_TIMEOUT=120
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY admin/ admin/
COPY api/ api/
COPY app/ app/
COPY bot/ bot/
COPY core/ core/
COPY evaluation/ evaluation/
COPY i18n/ i18n/
COPY media/ media/
COPY prompts/ prompts/
COPY providers/ providers/
COPY storage/ storage/
COPY telemetry/ telemetry/
COPY terminal/ terminal/
COPY tools/ tools/
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip wheel --no-deps --wheel-dir /wheels . \
    && /opt/venv/bin/pip install /wheels/consultation_bot-*.whl

# --- app: the runtime, no sources, no build tools --------------------------------------
FROM ${BASE_IMAGE} AS app
# tini is PID 1: it passes SIGTERM on to the bot (which stops taking updates and lets the
# turns in flight finish) and reaps the document readers' processes.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin consult \
    && mkdir -p /data /app \
    && chown consult:consult /data
COPY --from=build /opt/venv /opt/venv
COPY container/healthcheck.py /usr/local/lib/consultation-bot/healthcheck.py
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DB_PATH=/data/consultations.sqlite3
# The SQLite file (DB_PATH) lives here; with DATABASE_URL nothing is written to it.
VOLUME ["/data"]
WORKDIR /app
USER consult
EXPOSE 8080
# /healthz when the HTTP server is on (WEBHOOK_URL set, API_ENABLED=true, or the `api`
# command); a polling bot without it has no health endpoint and counts as healthy.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python3", "/usr/local/lib/consultation-bot/healthcheck.py"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["tini", "--", "consultation-bot"]
CMD ["run"]

# --- smoke: checks of the app stage, run as build steps (scripts/check-image.sh) --------
# Only this stage gets the production smoke (stdlib and the runtime's own aiohttp, nothing
# installed for it); the runtime image has no tests and no scripts.
FROM app AS smoke
COPY scripts/smoke_installed.py scripts/smoke_fakes.py scripts/smoke_documents.py /smoke/
COPY container/smoke-check.sh /smoke/smoke-check.sh
WORKDIR /smoke
RUN sh /smoke/smoke-check.sh

# --- runtime: the image to ship (the default target) -----------------------------------
FROM app AS runtime
