"""A client process of ``retrymw demo --fleet``: load through the transport, counts as JSON.

`member_main` reads its configuration (one JSON line, with the Redis URL) from stdin, never
from its command line, which ``ps`` shows to everyone; it prints ``ready``, reads the common
start time (wall clock) from stdin, calls the upstream at its rate until the end (or SIGTERM),
and prints one JSON line: its calls and attempts, those of the calls started during the outage,
and its fleet's health.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from typing import Any

from .._core.events import CallFinished, RetryDenied
from ..instrumentation import Instrument

__all__ = ["member_main"]

_GRACE = 3.0  # the calls in flight get this long after the end
_EARLY_STOP: list[int] = []


def member_main() -> None:
    """A client process: configuration and start time from stdin, the load, counts as JSON."""
    config = json.loads(sys.stdin.readline())
    # A SIGTERM before the load starts (a Ctrl-C at the parent meanwhile) still gets a report.
    signal.signal(signal.SIGTERM, lambda signum, frame: _EARLY_STOP.append(signum))
    print("ready", flush=True)
    begin = float(sys.stdin.readline())
    result = asyncio.run(_member(config, begin))
    print(json.dumps(result), flush=True)


async def _member(config: dict[str, Any], begin: float) -> dict[str, Any]:
    import anyio
    import httpx

    from .._core.policy import RetryPolicy
    from ..httpx import AsyncRetryTransport

    counts = _Counts(begin, config["outage"])
    fleet = None
    if config["redis"]:
        from ..fleet import RedisFleet

        fleet = RedisFleet(config["redis"], namespace=config["namespace"])
    policy = RetryPolicy(
        name="demo", attempts=config["attempts"], initial_delay="100ms", max_delay="2s",
        jitter="full",
    )  # fmt: skip
    transport = AsyncRetryTransport(policy=policy, instruments=[counts], fleet=fleet)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    if _EARLY_STOP:
        stop.set()
    end = begin + config["duration"]
    interval = 1.0 / config["rate"]
    await asyncio.sleep(max(0.0, begin - time.time()))
    try:
        async with (
            httpx.AsyncClient(transport=transport, timeout=5.0) as client,
            anyio.create_task_group() as group,
        ):
            next_at = time.time()
            while not stop.is_set() and time.time() < end:
                group.start_soon(counts.get, client, config["url"])
                next_at += interval
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.time()))
            if counts.in_flight:
                with anyio.move_on_after(_GRACE):
                    await counts.idle.wait()
            group.cancel_scope.cancel()
    finally:
        statistics = fleet.statistics() if fleet is not None else None
        if fleet is not None:
            fleet.close()
    result = counts.as_dict()
    if statistics is not None:
        result.update(
            members=statistics.members,
            degraded=statistics.degraded,
            tokens_leased=statistics.tokens_leased,
        )
    return result


class _Counts(Instrument):
    """Counts a client's calls and attempts, and those of calls started during the outage."""

    def __init__(self, begin: float, outage: list[float] | None) -> None:
        self.window = None if outage is None else (begin + outage[0], begin + sum(outage))
        self.calls = self.attempts = self.denied = 0
        self.outage_calls = self.outage_attempts = 0
        self.in_flight = 0
        self.idle = asyncio.Event()

    def call_finished(self, event: CallFinished, /) -> None:
        """Count the call; its start (now less its duration) says whether it met the outage."""
        self.calls += 1
        self.attempts += event.attempts
        started = time.time() - event.duration
        if self.window is not None and self.window[0] <= started < self.window[1]:
            self.outage_calls += 1
            self.outage_attempts += event.attempts

    def retry_denied(self, event: RetryDenied, /) -> None:
        """Count the denied retry."""
        self.denied += 1

    async def get(self, client: Any, url: str) -> None:
        """One call; its outcome is counted by the events above."""
        import httpx

        self.in_flight += 1
        self.idle.clear()
        try:
            response = await client.get(url)
            await response.aclose()
        except httpx.HTTPError:
            pass
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self.idle.set()

    def as_dict(self) -> dict[str, Any]:
        """The counts, for the JSON report."""
        return {
            "calls": self.calls,
            "attempts": self.attempts,
            "denied": self.denied,
            "outage_calls": self.outage_calls,
            "outage_attempts": self.outage_attempts,
        }
