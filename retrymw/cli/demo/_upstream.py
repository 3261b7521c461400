"""The demo's flaky upstream: a small HTTP/1.1 server on asyncio streams.

It speaks the fault vocabulary of `retrymw.testing` (`Fault`, decided by a `FaultPlan`), the
same one `FaultTransport` injects in tests: an `UpstreamScript` becomes rates of faults
(502/503/504 at ``failure_rate``, 429 with ``Retry-After`` at ``rate_limited``, none otherwise)
and latency, and during the outage windows a second plan answers 503 to everything. The two
plans draw from two streams of one seeded source, so with ``--seed`` the n-th request outside
the outages meets the same fault and latency in every run, however many requests fell into
an outage (which depends on real time). Keep-alive is supported, so
the client's connection pool behaves as in production. It is a test double, not a web server:
no chunked bodies, no pipelining.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from random import Random

from ...testing._faults import Fault, FaultPlan
from .._common import duration, human_duration

__all__ = ["FlakyUpstream", "Outage", "UpstreamScript", "parse_outage"]

_REASONS = {
    200: "OK",
    429: "Too Many Requests",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
# The 5xx mix: mostly 503, like a real overloaded dependency.
_FAILURES = ((Fault(status=503), 0.5), (Fault(status=502), 0.25), (Fault(status=504), 0.25))
_OUTAGE = Fault(status=503)
_MAX_HEAD = 64 * 1024


@dataclass(frozen=True, slots=True)
class Outage:
    """A window where every request fails: from ``start`` for ``duration`` seconds.

    With ``every``, the window repeats with that period (``start``, ``start + every``, ...).
    """

    start: float
    duration: float
    every: float | None = None

    def active(self, elapsed: float) -> bool:
        """Whether ``elapsed`` seconds after the start fall inside a window."""
        offset = elapsed - self.start
        if offset < 0.0:
            return False
        if self.every is not None:
            offset = math.fmod(offset, self.every)
        return offset < self.duration

    def __str__(self) -> str:
        text = f"{human_duration(self.start)}-{human_duration(self.start + self.duration)}"
        return text if self.every is None else f"{text}, every {human_duration(self.every)}"


def parse_outage(text: str) -> Outage | None:
    """Parse ``--outage START:DURATION[:EVERY]``, or ``none``/``off`` for no outage.

    Raises:
        argparse.ArgumentTypeError: not in that form; argparse reports a usage error.
    """
    if text.strip().lower() in ("none", "off"):
        return None
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise argparse.ArgumentTypeError(f"expected START:DURATION[:EVERY], e.g. 6s:5s: {text!r}")
    start, length, *every = (duration(part) for part in parts)
    if length <= 0.0:
        raise argparse.ArgumentTypeError(f"the outage must last more than 0s: {text!r}")
    if every and every[0] <= length:
        raise argparse.ArgumentTypeError(f"EVERY must be longer than DURATION: {text!r}")
    return Outage(start, length, every[0] if every else None)


@dataclass(frozen=True, slots=True)
class UpstreamScript:
    """How the upstream misbehaves.

    Attributes:
        failure_rate: share of requests answered 502/503/504 outside outages.
        rate_limited: share answered 429 with ``Retry-After``.
        retry_after: the ``Retry-After`` value, whole seconds.
        latency: mean response time; each response takes 0.5x to 1.5x of it.
        outage: when everything fails, or ``None``.
    """

    failure_rate: float = 0.1
    rate_limited: float = 0.03
    retry_after: int = 1
    latency: float = 0.02
    outage: Outage | None = None

    def rates(self) -> dict[Fault | int | str, float]:
        """The faults outside the outages and their shares, as a `FaultPlan` takes them.

        A ``rate_limited`` and ``failure_rate`` adding up to more than 1 fail every request:
        429s take their share first, 5xx the rest.
        """
        failing = min(self.failure_rate, 1.0 - self.rate_limited)
        rates: dict[Fault | int | str, float] = {
            Fault(status=429, retry_after=self.retry_after): self.rate_limited
        }
        rates.update((fault, failing * share) for fault, share in _FAILURES)
        return rates

    def latency_range(self) -> tuple[float, float]:
        """Each response takes 0.5x to 1.5x of ``latency``."""
        return (0.5 * self.latency, 1.5 * self.latency)

    def describe(self) -> str:
        """A short description for the demo's banner."""
        parts = [
            f"{self.failure_rate:.0%} 5xx",
            f"{self.rate_limited:.0%} 429 (Retry-After: {self.retry_after})",
            f"~{human_duration(self.latency)} latency",
        ]
        if self.outage is not None:
            parts.append(f"outage {self.outage}")
        return ", ".join(parts)


class FlakyUpstream:
    """A loopback HTTP server that fails on purpose, following an `UpstreamScript`.

    Args:
        script: what to answer.
        rng: the random source of the script's draws (seed it for a repeatable run); the
            outage's latencies draw from a second stream seeded from it.
        clock: monotonic time, for the outage windows.

    Attributes:
        statuses: how many responses of each status were sent.
        plan: the script's `FaultPlan`, outside the outages (its ``injected`` lists what each
            of those requests met, in order: the fault schedule ``--seed`` repeats).
    """

    def __init__(
        self,
        script: UpstreamScript,
        *,
        rng: Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.script = script
        self.statuses: Counter[int] = Counter()
        rng = rng if rng is not None else Random()
        latency = script.latency_range()
        self.plan = FaultPlan(rates=script.rates(), latency=latency, rng=rng)
        # Its own stream: the script's n-th draw must not depend on how long outages lasted.
        outage_rng = Random(rng.getrandbits(64))
        self._outage_plan = FaultPlan(rates={_OUTAGE: 1.0}, latency=latency, rng=outage_rng)
        self._clock = clock
        self._started = clock()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self.url = ""

    def restart_script(self) -> None:
        """Count the outage windows from now (when the load starts)."""
        self._started = self._clock()

    def in_outage(self) -> bool:
        """Whether the upstream is in an outage window right now."""
        outage = self.script.outage
        return outage is not None and outage.active(self._clock() - self._started)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0 picks a free port); return the base URL.

        Raises:
            OSError: the address is taken or not available.
        """
        self._started = self._clock()
        self._server = await asyncio.start_server(self._serve, host, port)
        bound = self._server.sockets[0].getsockname()
        self.url = f"http://{host}:{bound[1]}/"
        return self.url

    async def close(self) -> None:
        """Stop listening, drop the open connections and wait for their handlers to end."""
        if self._server is not None:
            self._server.close()
            for writer in list(self._connections):
                writer.close()
            if self._handlers:
                await asyncio.wait(self._handlers, timeout=1.0)
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def next_fault(self) -> tuple[Fault, float]:
        """The fault the next request meets (``pass``: none) and how long its answer takes."""
        return (self._outage_plan if self.in_outage() else self.plan).next()

    def respond(self) -> tuple[int, dict[str, str]]:
        """Draw the status and extra headers of the next response."""
        fault, _ = self.next_fault()
        return _status(fault), dict(fault.response_headers())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        self._connections.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if len(head) > _MAX_HEAD:
                    break
                length, close = _parse_head(head)
                if length:
                    await reader.readexactly(length)
                fault, latency = self.next_fault()
                await asyncio.sleep(latency)
                self.statuses[_status(fault)] += 1
                writer.write(_response(fault, close))
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # the client went away: normal for keep-alive connections
        except asyncio.CancelledError:
            # Only the loop's shutdown cancels a handler. Ending normally keeps asyncio's
            # stream callback from logging the cancellation as an error (Python 3.11).
            pass
        finally:
            self._connections.discard(writer)
            if task is not None:
                self._handlers.discard(task)
            writer.close()


def _parse_head(head: bytes) -> tuple[int, bool]:
    """Return the request's Content-Length and whether it asks to close the connection."""
    length, close = 0, False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"content-length":
            length = int(value.strip() or b"0")
        elif key == b"connection":
            close = value.strip().lower() == b"close"
    return length, close


def _status(fault: Fault) -> int:
    """The status a fault answers with: its own, or 200 when the request meets none.

    The script only makes status faults: the errors a transport raises (resets, timeouts,
    stalls) have no place in the demo's upstream, whose load is about statuses and hints.
    """
    return 200 if fault.kind == "pass" else fault.status


def _response(fault: Fault, close: bool) -> bytes:
    status = _status(fault)
    body = fault.body or f'{{"status": {status}}}\n'.encode()
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        f"Connection: {'close' if close else 'keep-alive'}",
        *(f"{name}: {value}" for name, value in fault.response_headers()),
    ]
    return "\r\n".join(lines).encode("ascii") + b"\r\n\r\n" + body
