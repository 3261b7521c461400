"""The HTTP path: a transport with a store resumes a request by its Idempotency-Key."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from retrymw import RetryPolicy
from retrymw.httpx import RetryTransport
from retrymw.stores import SQLiteStore
from retrymw.testing import FakeClock

POLICY = RetryPolicy(attempts=3, initial_delay="10s", retry_budget="5m")


class DeployedMidBackoff(FakeClock):
    """A worker stopped (SIGTERM as KeyboardInterrupt) during its second backoff."""

    def sleep_sync(self, seconds: float) -> None:
        if len(self.sleeps) == 1:
            raise KeyboardInterrupt
        super().sleep_sync(seconds)


def client(store: SQLiteStore, clock: FakeClock, seen: list[str]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("idempotency-key", "-"))
        return httpx.Response(503)

    inner = httpx.MockTransport(handler)
    transport = RetryTransport(inner, policy=POLICY, store=store, clock=clock, instruments=())
    return httpx.Client(transport=transport, base_url="http://127.0.0.1")


def test_a_post_with_an_idempotency_key_resumes_after_a_restart(tmp_path: Path) -> None:
    """Two attempts, stopped mid-backoff; the restarted sender makes attempt 3 of 3 only."""
    store = SQLiteStore(tmp_path / "r.db")
    seen: list[str] = []
    headers = {"Idempotency-Key": "pay-7"}
    with (
        client(store, DeployedMidBackoff(wall_start=time.time()), seen) as first,
        pytest.raises(KeyboardInterrupt),
    ):
        first.post("/pay", headers=headers, content=b"{}")
    assert (seen, len(store)) == (["pay-7", "pay-7"], 1)
    with client(store, FakeClock(wall_start=time.time() + 60), seen) as second:
        response = second.post("/pay", headers=headers, content=b"{}")
    assert response.status_code == 503  # the last response, after attempt 3 of 3
    assert (len(seen), len(store)) == (3, 0)


def test_requests_without_a_key_keep_nothing(tmp_path: Path) -> None:
    """Without an Idempotency-Key a request runs as usual and writes no record."""
    store = SQLiteStore(tmp_path / "r.db")
    seen: list[str] = []
    with client(store, FakeClock(wall_start=time.time()), seen) as plain:
        assert plain.get("/x").status_code == 503
        assert plain.get("/x", headers={"Idempotency-Key": "k" * 2000}).status_code == 503
    assert (len(seen), len(store)) == (6, 0)
