"""The HTTP side of a store that cannot write: /healthz says so, requests get 503
STORE_UNAVAILABLE (never an internal error)."""

from __future__ import annotations

from core.domain.consultation import Message, Role
from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi
from tests.storage.test_store_faults import fill_disk
from tests.store_contract import make


async def test_a_full_disk_is_503_store_unavailable_and_unhealthy(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Every write failing with SQLITE_FULL: the request is 503 with a clear code, and
    /healthz turns 503 at once instead of reporting a store that only reads."""
    await api.store.create(make("other", messages=[Message(Role.USER, "z" * 3000, 1.0)]))
    assert (await api.client.get("/healthz")).status == 200
    await fill_disk(api.store)
    response = await api.client.post("/api/chat", json={"message": "Which laptop? " * 280})
    assert response.status == 503
    assert (await response.json())["code"] == "STORE_UNAVAILABLE"
    assert model_server.requests == []
    health = await api.client.get("/healthz")
    assert health.status == 503
    assert (await health.json())["store"] is False


async def test_a_deleted_database_file_is_unhealthy(api: RunningApi) -> None:
    """The file the store has open was deleted: writes would vanish at restart."""
    assert (await api.client.get("/healthz")).status == 200
    api.settings.db_path.unlink()
    assert (await api.client.get("/healthz")).status == 503
    response = await api.client.post("/api/chat", json={"message": "Hello"})
    assert response.status == 503
    assert (await response.json())["code"] == "STORE_UNAVAILABLE"
