"""The budget rule, run by the store's Lua script and by the simulator's Python `Store` alike.

`retrymw.fleet._scripts` states the rule (the budget records of `STEP`);
`retrymw._simulate.fleet.Store.budget` runs it in virtual time. The same steps go to both here
(a real redis-server, store time; the Python store at that same store time), and both must
answer the same grants and capacities.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from retrymw._simulate.fleet import FleetSettings
from retrymw.fleet._keys import namespace_prefix
from retrymw.fleet._replies import BudgetReply, parse_step
from retrymw.fleet._scripts import STEP

from .conftest import RedisServer

_MEMBER_TTL_MS = 1000
# A window of ~11 days: the decay between two steps a few ms apart is below any grant's rounding.
_SETTINGS = "0.1 0.1 1000000000 10.0 2"


def _run(redis_server: RedisServer, steps: list[tuple[int, int, int, int]]) -> list[Any]:
    """Each step (member, deposits, want, held) on both stores; their (granted, capacity)."""
    client = redis_server.client()
    store = FleetSettings({"sync_interval": 0.25}).store  # member_ttl 1 s, as here
    members_key = namespace_prefix("rule") + "members"
    answers = []
    for member, deposits, want, held in steps:
        record = f"b 1 default:db {deposits} {want} {held} {_SETTINGS}"
        raw = client.eval(STEP, 1, members_key, f"m{member}", _MEMBER_TTL_MS, 60_000, -1, record)
        reply = parse_step(raw, ["b"], [want])
        lua = reply.records[0]
        assert isinstance(lua, BudgetReply)
        python = store.budget(member, record, reply.now / 1000)
        answers.append(((lua.granted, lua.capacity), (python.granted, python.capacity)))
    client.close()
    return answers


def _same(answers: list[Any]) -> list[int]:
    for lua, python in answers:
        assert lua[0] == python[0]
        assert lua[1] == pytest.approx(python[1])
    return [lua[0] for lua, _ in answers]


def test_leases_and_bucket_share_one_capacity_in_both(redis_server: RedisServer) -> None:
    """Capacity 10 (the floor): members holding 4 and 3 leave 3 tokens to grant, in both."""
    answers = _run(
        redis_server,
        [(1, 0, 0, 4), (2, 0, 0, 3), (3, 0, 10, 0), (3, 0, 10, 3), (1, 0, 5, 0), (2, 0, 5, 0)],
    )
    # 10 - 4 - 3 = 3 for member 3; none left; member 1 reports 0 held, freeing 4 (but tokens
    # dropped at the cap are gone: the bucket is empty until deposits fill it again).
    assert _same(answers) == [0, 0, 3, 0, 0, 0]


def test_deposits_fill_only_the_room_the_leases_leave_in_both(redis_server: RedisServer) -> None:
    """A second member's 1 000 successes count as 200 (twice the median claim, at least twice
    what funds the floor): capacity 20, 10 tokens lendable beside the first's 10-token lease."""
    answers = _run(redis_server, [(1, 0, 10, 0), (2, 1000, 200, 0), (1, 0, 200, 10)])
    assert _same(answers) == [10, 10, 0]
    assert answers[1][0][1] == pytest.approx(20.0)


def test_the_floor_lends_its_credit_between_successes_in_both(redis_server: RedisServer) -> None:
    """After one success the floor lends 2 retries (its credit), not its 10 tokens."""
    answers = _run(redis_server, [(1, 0, 0, 0), (1, 1, 10, 0), (1, 0, 10, 2), (1, 0, 10, 0)])
    assert _same(answers) == [0, 2, 0, 0]


def test_a_silent_members_lease_returns_after_member_ttl(redis_server: RedisServer) -> None:
    """A member that stops stepping: its report is dropped at the next sweep."""
    client = redis_server.client()
    members_key = namespace_prefix("rule") + "members"
    key = namespace_prefix("rule") + "budget:default:db"
    record = f"b 1 default:db 0 10 0 {_SETTINGS}"
    raw = client.eval(STEP, 1, members_key, "gone", 50, 60_000, -1, record)
    assert parse_step(raw, ["b"], [10]).records[0] == BudgetReply(10, 10.0, 1)
    time.sleep(0.1)  # past the 50 ms member_ttl of "gone", and so past the next sweep's time
    record = f"b 1 default:db 0 0 0 {_SETTINGS}"
    client.eval(STEP, 1, members_key, "alive", 1000, 60_000, -1, record)
    assert int(client.hget(key, "leased")) == 0
    assert client.hget(key, "lgone.1") is None
    client.close()
