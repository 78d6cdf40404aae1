"""compose.yaml and its profiles as Compose reads them.

`podman-compose config` (the `test` extra) parses the file, applies the profile and
interpolates the variables the way a deployment would; the tests then check what each
profile starts: the default is one SQLite bot with its volume, `postgres` adds PostgreSQL
with a health check, three webhook workers and the proxy, `local-model` adds the model
server. Every dependency, named volume and bind-mounted file must exist, so a service
renamed or a config file moved fails here rather than at `docker compose up`.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PODMAN_COMPOSE = Path(sys.executable).parent / "podman-compose"
WORKERS = {"worker1", "worker2", "worker3"}
PASSWORD = "compose-test-password"


def run_config(
    tmp_path: Path, *profiles: str, password: str | None = PASSWORD
) -> subprocess.CompletedProcess[str]:
    """`podman-compose config` with `profiles` on, in a copy of the project's compose files
    with .env made from .env.example (as the README tells a newcomer), and
    POSTGRES_PASSWORD in the environment as `password` (None: not set at all)."""
    tool = PODMAN_COMPOSE if PODMAN_COMPOSE.exists() else shutil.which("podman-compose")
    assert tool, "podman-compose is missing: install the project with its test extra"
    shutil.copy(ROOT / "compose.yaml", tmp_path / "compose.yaml")
    shutil.copytree(ROOT / "container", tmp_path / "container")
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    env = {key: value for key, value in os.environ.items() if key != "POSTGRES_PASSWORD"}
    if password is not None:
        env["POSTGRES_PASSWORD"] = password
    args = [str(tool), "--dry-run", "--file", "compose.yaml"]
    for profile in profiles:
        args += ["--profile", profile]
    return subprocess.run(
        [*args, "config"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def compose_config(
    tmp_path: Path, *profiles: str, password: str | None = PASSWORD
) -> dict[str, Any]:
    """The normalised compose file with `profiles` on (see `run_config`)."""
    done = run_config(tmp_path, *profiles, password=password)
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load(done.stdout)
    assert isinstance(config, dict), done.stdout
    check_references(tmp_path, config)
    return config


def check_references(project: Path, config: dict[str, Any]) -> None:
    """Each started service's dependencies are started too, its named volumes are
    declared, its bind-mounted files exist, and it has an image."""
    services: dict[str, Any] = config["services"]
    declared = set(config.get("volumes") or {})
    for name, service in services.items():
        assert service.get("image"), f"{name} has no image"
        for dependency in service.get("depends_on") or {}:
            assert dependency in services, f"{name} depends on {dependency}, not started"
        for volume in service.get("volumes") or []:
            source = str(volume).split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (project / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in declared, f"{name} uses undeclared volume {source}"


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(key): str(value) for key, value in env.items()}


def test_the_default_is_one_bot_on_sqlite_with_its_volume(tmp_path: Path) -> None:
    config = compose_config(tmp_path)
    assert set(config["services"]) == {"bot"}
    bot = config["services"]["bot"]
    assert any(str(volume).endswith(":/data") for volume in bot["volumes"])
    assert ".env" in str(bot["env_file"])
    assert bot["build"]["target"] == "runtime"
    assert bot["build"]["args"] == ["BASE_IMAGE=python:3.12-slim"]
    assert "DATABASE_URL" not in environment(bot)
    # SIGTERM lets the turns in flight finish (up to 30 s) before the engine kills.
    assert bot["stop_grace_period"] == "45s"


def test_the_postgres_profile_runs_three_workers_behind_the_proxy(tmp_path: Path) -> None:
    config = compose_config(tmp_path, "postgres")
    services = config["services"]
    assert {"postgres", "proxy", *WORKERS} <= set(services)
    postgres = services["postgres"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert any(str(v).endswith(":/var/lib/postgresql/data") for v in postgres["volumes"])
    password = environment(postgres)["POSTGRES_PASSWORD"]
    for name in WORKERS:
        worker = services[name]
        env = environment(worker)
        assert env["DATABASE_URL"] == f"postgresql://consult:{password}@postgres:5432/consult"
        assert env["API_HOST"] == "0.0.0.0"
        assert worker["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert not worker.get("volumes"), "workers keep nothing on disk"
    proxy = services["proxy"]
    assert set(proxy["depends_on"]) == WORKERS
    caddyfile = (ROOT / "container" / "Caddyfile").read_text()
    for name in WORKERS:
        assert f"{name}:{environment(services[name])['API_PORT']}" in caddyfile
    assert "health_uri /healthz" in caddyfile


def test_the_local_model_profile_adds_the_model_server(tmp_path: Path) -> None:
    config = compose_config(tmp_path, "local-model")
    assert set(config["services"]) == {"bot", "local-model"}
    assert config["services"]["local-model"]["expose"] == ["11434"]


def test_variables_from_the_environment_reach_the_services(tmp_path: Path) -> None:
    """POSTGRES_PASSWORD set for compose is the one the database and the workers use."""
    (tmp_path / "project").mkdir()
    config = compose_config(tmp_path / "project", "postgres", password="s3cret")
    services = config["services"]
    assert environment(services["postgres"])["POSTGRES_PASSWORD"] == "s3cret"
    assert "consult:s3cret@postgres" in environment(services["worker2"])["DATABASE_URL"]


def test_a_broken_compose_file_fails_the_tool(tmp_path: Path) -> None:
    """The check can fail: a file Compose cannot parse is reported, not passed."""
    tool = PODMAN_COMPOSE if PODMAN_COMPOSE.exists() else shutil.which("podman-compose")
    assert tool
    (tmp_path / "compose.yaml").write_text("services:\n  bot: [unclosed\n")
    done = subprocess.run(
        [str(tool), "--dry-run", "config"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0


@pytest.mark.parametrize("profiles", [(), ("postgres",)])
@pytest.mark.parametrize("password", [None, ""])
def test_no_database_password_stops_compose_saying_which(
    tmp_path: Path, profiles: tuple[str, ...], password: str | None
) -> None:
    """There is no default password: unset or empty, Compose refuses with the variable's
    name (for every profile: it reads the whole file)."""
    done = run_config(tmp_path, *profiles, password=password)
    assert done.returncode != 0
    assert "set POSTGRES_PASSWORD in .env" in done.stderr


def proxied_paths(caddyfile: str) -> list[str]:
    """The path matchers of the site's `handle` blocks, placeholders at their defaults."""
    matchers = re.findall(r"^\thandle (\S+) \{$", caddyfile, flags=re.MULTILINE)
    return [re.sub(r"\{\$\w+:([^}]*)\}", r"\1", matcher) for matcher in matchers]


def test_health_and_metrics_are_not_public_through_the_proxy() -> None:
    """/healthz names the model and /metrics the traffic: through Caddy both fall to the
    404 every unrouted path gets, while the workers' own health checks stay."""
    caddyfile = (ROOT / "container" / "Caddyfile").read_text()
    paths = proxied_paths(caddyfile)
    assert paths == ["/telegram/webhook", "/api/*", "/admin*"]
    for private in ("/healthz", "/metrics", "/healthz/", "/metrics/"):
        assert not [p for p in paths if fnmatch.fnmatchcase(private, p)], private
    assert re.search(r"^\thandle \{\n\t\trespond 404\n\t\}$", caddyfile, flags=re.MULTILINE)
    assert caddyfile.count("health_uri /healthz") == 3
