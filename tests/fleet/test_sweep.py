"""The sweep every kind of shared record runs once per ``member_ttl`` (`_scripts`
``sweep_members``): a member that stopped stepping leaves the count and its field goes, while
every member still stepping is counted, on a real redis-server."""

from __future__ import annotations

import time

import pytest

from retrymw.fleet._keys import namespace_prefix
from retrymw.fleet._scripts import STEP

from .conftest import RedisServer

_GONE_TTL_MS = 50  # the silent member's: it stops counting 50 ms after its record
_TTL_MS = 60_000

# kind: (letter, hash kind, record of link serial 1 at step ``seq``, reply field with the count)
_KINDS = {
    "breaker": ("v", "breaker", "k 1 api: -1 0.5 1000 - 0", 3),
    "throttle": ("c", "throttle", "t 1 api: 10 10 0", 3),
    "pacer": ("p", "pacer", "p 1 api: 40.0 - {seq}", 1),
}


@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_a_silent_member_is_swept_and_every_live_one_counted(
    redis_server: RedisServer, kind: str
) -> None:
    letter, hash_kind, record, count_at = _KINDS[kind]
    client = redis_server.client()
    prefix = namespace_prefix("sweep")
    members_key = prefix + "members"
    key = prefix + f"{hash_kind}:api:"
    steps = iter(range(1, 100))

    def step(member: str, ttl_ms: int) -> int:
        line = record.format(seq=next(steps))
        raw = client.eval(STEP, 1, members_key, member, ttl_ms, _TTL_MS, -1, line)
        assert isinstance(raw, bytes)
        return int(raw.decode().split("\n")[1].split(" ")[count_at])

    try:
        # Before the sweep each new member adds one (the first steps may already sweep on a
        # loaded machine: only the count after the silent member's ttl is asserted).
        assert step("gone", _GONE_TTL_MS) == 1
        step("other", _TTL_MS)
        step("alive", _TTL_MS)
        time.sleep(0.1)  # past the silent member's ttl, and so past the next sweep's time
        assert step("alive", _TTL_MS) == 2  # itself and "other"
        assert client.hget(key, f"{letter}gone.1") is None
        assert client.hget(key, f"{letter}other.1") is not None
        assert client.pttl(key) > _TTL_MS // 2  # the sweep renewed the key's TTL
    finally:
        client.close()
