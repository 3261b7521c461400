"""A client process of ``retrymw demo --fleet``: load through the transport, counts as JSON.

`member_main` reads its configuration (one JSON line, with the Redis URL) from stdin, never
from its command line, which ``ps`` shows to everyone; it prints ``ready``, reads the common
start time (wall clock) from stdin, and issues its calls on a fixed schedule from that start:
call ``i`` at ``start + i / rate``, the same schedule in every process of both groups. A call
belongs to the outage when its *scheduled* time falls in the outage window, so every process
counts the same calls there, whatever its group and however late its event loop ran; its
attempts are those of that very call (a context variable ties the transport's `CallFinished`
to it). At the end (or SIGTERM) it waits for its calls in flight and prints one JSON line: its
calls and attempts, those of the outage's calls, the calls that never finished, and its
fleet's health.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from contextvars import ContextVar
from typing import Any

from ..._core.events import CallFinished, RetryDenied
from ...instrumentation import Instrument

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

    from ..._core.policy import RetryPolicy
    from ...httpx import AsyncRetryTransport

    counts = _Counts(config["rate"], config["outage"])
    fleet = None
    if config["redis"]:
        from ...fleet import RedisFleet

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
    scheduled = max(1, round(config["duration"] * config["rate"]))
    try:
        async with (
            httpx.AsyncClient(transport=transport, timeout=5.0) as client,
            anyio.create_task_group() as group,
        ):
            for index in range(scheduled):
                at = begin + index / config["rate"]
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, at - time.time()))
                if stop.is_set():
                    break
                group.start_soon(counts.get, client, config["url"], index)
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


class _Call:
    """One scheduled call: whether it belongs to the outage, and its attempts once finished."""

    __slots__ = ("attempts", "in_outage")

    def __init__(self, in_outage: bool) -> None:
        self.in_outage = in_outage
        self.attempts: int | None = None


# The call the current task is making: the transport's events run in the caller's task.
_CURRENT: ContextVar[_Call | None] = ContextVar("retrymw_demo_call", default=None)


class _Counts(Instrument):
    """Counts a client's calls and attempts, and those of the calls scheduled in the outage."""

    def __init__(self, rate: float, outage: list[float] | None) -> None:
        self.rate = rate
        self.window = None if outage is None else (outage[0], outage[0] + outage[1])
        self.issued: list[_Call] = []
        self.denied = 0
        self.in_flight = 0
        self.idle = asyncio.Event()

    def in_outage(self, index: int) -> bool:
        """Whether call ``index`` is scheduled inside the outage window."""
        offset = index / self.rate
        return self.window is not None and self.window[0] <= offset < self.window[1]

    def call_finished(self, event: CallFinished, /) -> None:
        """Give the call its attempts."""
        call = _CURRENT.get()
        if call is not None:
            call.attempts = event.attempts

    def retry_denied(self, event: RetryDenied, /) -> None:
        """Count the denied retry."""
        self.denied += 1

    async def get(self, client: Any, url: str, index: int) -> None:
        """Call ``index``; its attempts are counted by `call_finished`."""
        import httpx

        call = _Call(self.in_outage(index))
        self.issued.append(call)
        _CURRENT.set(call)
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
        finished = [call for call in self.issued if call.attempts is not None]
        outage = [call for call in self.issued if call.in_outage]
        return {
            "calls": len(self.issued),
            "attempts": sum(call.attempts or 0 for call in finished),
            "denied": self.denied,
            "outage_calls": len(outage),
            "outage_attempts": sum(call.attempts or 0 for call in outage),
            "unfinished": len(self.issued) - len(finished),
        }
