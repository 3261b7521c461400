"""The budget rule, run by the store's Lua script and by the simulator's Python `Store` alike.

`retrymw.fleet._scripts.BUDGET` states the rule; `retrymw._simulate.fleet.Store.budget` runs it
in virtual time. The same steps go to both here (a real redis-server, store time; the Python
store at that same store time), and both must answer the same grants and capacities.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from retrymw._simulate.fleet import FleetSettings
from retrymw.fleet import _scripts

from .conftest import RedisServer

_KEYS = ["retrymw:{rule:db}:budget", "retrymw:{rule:db}:members"]
_MEMBER_TTL_MS = 1000
# A window of ~11 days: the decay between two steps a few ms apart is below any grant's rounding.
_SETTINGS = ["0.1", "0.1", 10**9, "10.0"]


def _run(redis_server: RedisServer, steps: list[tuple[int, int, int, int]]) -> list[Any]:
    """Each step (member, deposits, want, held) on both stores; their (granted, capacity)."""
    client = redis_server.client()
    store = FleetSettings({"sync_interval": 0.25}).store  # member_ttl 1 s, as here
    answers = []
    for member, deposits, want, held in steps:
        arguments = [deposits, want, *_SETTINGS, held]
        lua = client.eval(
            _scripts.BUDGET, 2, *_KEYS, str(member), *arguments, _MEMBER_TTL_MS, 60_000
        )
        now = int(lua[3]) / 1000
        python = store.budget(member, arguments, now)
        answers.append(((int(lua[0]), float(lua[1])), (python[0], float(python[1]))))
    client.close()
    return answers


def test_leases_and_bucket_share_one_capacity_in_both(redis_server: RedisServer) -> None:
    """Capacity 10 (the floor): members holding 4 and 3 leave 3 tokens to grant, in both."""
    answers = _run(
        redis_server,
        [(1, 0, 0, 4), (2, 0, 0, 3), (3, 0, 10, 0), (3, 0, 10, 3), (1, 0, 5, 0), (2, 0, 5, 0)],
    )
    for lua, python in answers:
        assert lua[0] == python[0]
        assert lua[1] == pytest.approx(python[1])
    granted = [lua[0] for lua, _ in answers]
    # 10 - 4 - 3 = 3 for member 3; none left; member 1 reports 0 held, freeing 4 (but tokens
    # dropped at the cap are gone: the bucket is empty until deposits fill it again).
    assert granted == [0, 0, 3, 0, 0, 0]


def test_deposits_fill_only_the_room_the_leases_leave_in_both(redis_server: RedisServer) -> None:
    """1 000 successes: capacity 100, tokens 100 deposited, 90 lendable beside a 10-token lease."""
    answers = _run(redis_server, [(1, 0, 10, 0), (2, 1000, 200, 0), (1, 0, 200, 10)])
    for lua, python in answers:
        assert lua[0] == python[0]
        assert lua[1] == pytest.approx(python[1])
    assert [lua[0] for lua, _ in answers] == [10, 90, 0]
    assert answers[1][0][1] == pytest.approx(100.0)


def test_a_silent_members_lease_returns_after_member_ttl(redis_server: RedisServer) -> None:
    """A member that stops stepping: its report expires and the sweep stops counting it."""
    client = redis_server.client()
    arguments = [0, 10, *_SETTINGS]
    assert client.eval(_scripts.BUDGET, 2, *_KEYS, "gone", *arguments, 0, 50, 60_000)[0] == 10
    time.sleep(0.1)  # past the 50 ms member_ttl of "gone", and so past the next sweep's time
    client.eval(_scripts.BUDGET, 2, *_KEYS, "alive", 0, 0, *_SETTINGS, 0, 1000, 60_000)
    assert int(client.hget(_KEYS[0], "leased")) == 0
    assert client.hget(_KEYS[0], "l:gone") is None
    client.close()
