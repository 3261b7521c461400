"""A member of the fleet pacing test:
``python fleet_pacing_worker.py SERVER REDIS START RUN RATE [TAG [SYNC_INTERVAL]]``.

From ``START`` (the monotonic clock, which every process of the machine shares) for ``RUN`` seconds
it offers ``RATE`` requests/s (open loop) to the rate-limited server at ``SERVER`` through an
`AsyncRetryTransport` with ``pacer=Pacer()`` and, unless ``REDIS`` is ``-``, ``fleet=`` a
`RedisFleet` on it. While it runs it samples the fleet's health and the event loop's lateness
(a store that blocked the loop would show there); at the end it prints one JSON line: how the
calls ended, the fleet's statistics, the pacer's share and limits, when it first saw itself
degraded, and the loop's worst lateness. ``TAG`` (default 0) is sent as each request's
``x-cost``, which the server logs: the test tells members apart by it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import httpx

from retrymw import Pacer, RetryPolicy
from retrymw.fleet import RedisFleet
from retrymw.httpx import AsyncRetryTransport
from tests.open_loop import new_tally, offer_open_loop, post_and_tally

SYNC_INTERVAL = "3s"  # store commands per call: members / (interval * calls/s) = 4 / (3 * 47)


async def run(
    server: str, fleet: RedisFleet | None, start: float, seconds: float, rate: float, tag: str
) -> dict[str, Any]:
    ended = new_tally()
    samples: dict[str, Any] = {
        "first_degraded": None,
        "shares_degraded": [],
        "lateness": 0.0,
        "shares_while_offered": [],  # the share as the load is offered (the last sample)
    }
    transport = AsyncRetryTransport(
        policy=RetryPolicy(attempts=3, deadline=2.0), pacer=Pacer(), fleet=fleet, instruments=()
    )
    limits = httpx.Limits(max_connections=40, max_keepalive_connections=40)

    def pacer_stats() -> list[Any]:
        return list(transport.retrier.pacer.statistics().values())  # type: ignore[union-attr]

    async def watch() -> None:
        while time.monotonic() < start + seconds:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            samples["lateness"] = max(samples["lateness"], time.monotonic() - before - 0.01)
            if time.monotonic() > start:
                samples["shares_while_offered"] = [s.share for s in pacer_stats()]
            if fleet is not None and fleet.statistics().degraded and time.monotonic() > start:
                if samples["first_degraded"] is None:
                    samples["first_degraded"] = time.monotonic()
                samples["shares_degraded"] = sorted({s.share for s in pacer_stats()})

    async with httpx.AsyncClient(transport=transport, timeout=10.0, limits=limits) as client:
        await asyncio.sleep(max(0.0, start - time.monotonic()))
        watcher = asyncio.create_task(watch())
        await offer_open_loop(
            functools.partial(post_and_tally, client, f"{server}/work", ended, {"x-cost": tag}),
            started=start,
            rate=rate,
            seconds=seconds,
        )
        await watcher
    stats = pacer_stats()
    return {
        "ended": ended,
        "pid": os.getpid(),
        "shares": [s.share for s in stats],
        "limits": [s.limit for s in stats],
        "fleet_limits": [getattr(s, "fleet_limit", None) for s in stats],
        **samples,
    }


def main() -> None:
    server, redis_url = sys.argv[1], sys.argv[2]
    start, seconds, rate = map(float, sys.argv[3:6])
    tag = sys.argv[6] if len(sys.argv) > 6 else "0"
    interval = sys.argv[7] if len(sys.argv) > 7 else SYNC_INTERVAL
    fleet = None
    if redis_url != "-":
        fleet = RedisFleet(redis_url, namespace="pacing", sync_interval=interval)
    try:
        result = asyncio.run(run(server, fleet, start, seconds, rate, tag))
    finally:
        if fleet is not None:
            stats = fleet.statistics()
            fleet.close()
    if fleet is not None:
        result["fleet"] = {
            "syncs": stats.syncs,
            "sync_failures": stats.sync_failures,
            "degraded": stats.degraded,
            "members": stats.members,
        }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
