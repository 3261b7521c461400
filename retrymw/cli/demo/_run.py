"""One run of ``retrymw demo``: the upstream, the client under load, telemetry and the console.

`DemoRun` starts the `FlakyUpstream`, serves ``/metrics``, sets up tracing, sends the load
through `AsyncRetryTransport` until the duration ends or a signal arrives, ticks the progress
line and prints the summary. The command's arguments and their meaning live in `_command`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import signal
import socket
import sys
import time
from collections.abc import Iterator
from random import Random
from typing import TYPE_CHECKING, Any

from ..._core.redact import redact_url
from .._common import CliError, human_duration
from ._console import Console
from ._report import DemoStats, progress_line, summary
from ._setup import DEFAULT_ATTEMPTS, DemoSetup, Protection
from ._upstream import FlakyUpstream, UpstreamScript

if TYPE_CHECKING:
    import anyio
    import httpx

    from ..._core.clock import Clock
    from ..._core.events import BreakerStateChanged
    from ..._core.policy import RetryPolicy
    from ...httpx import AsyncRetryTransport
    from ._trace import CallTrace, Tracing

__all__ = ["DemoRun", "demo_policy", "demo_transport"]

_MAX_IN_FLIGHT = 512  # beyond this the upstream is hopeless; skip arrivals instead of queueing
_GRACE = 3.0  # seconds in-flight calls get to finish after the end
_TICK = 0.25
_MEANING = {
    "open": "calls now fail fast without reaching the upstream",
    "half_open": "one probe call is let through",
    "closed": "traffic flows again",
}


def demo_policy(attempts: int) -> RetryPolicy:
    """The demo's retry policy: ``attempts`` per call, exponential backoff from 100ms to 2s with
    full jitter."""
    from ..._core.policy import RetryPolicy

    return RetryPolicy(
        name="demo", attempts=attempts, initial_delay="100ms", max_delay="2s", jitter="full"
    )


def demo_transport(
    policy: RetryPolicy,
    protection: Protection,
    *,
    instruments: list[Any],
    fleet: Any = None,
    clock: Clock | None = None,
    inner: httpx.AsyncBaseTransport | None = None,
) -> AsyncRetryTransport:
    """The transport the demo's load goes through: ``policy`` and ``protection`` as given.

    Args:
        policy: the retry policy (`demo_policy`).
        protection: the live breaker, budget and throttle (``None``: off; `DemoSetup.build`).
        instruments: what hears the events (`DemoStats` first).
        fleet: a `RedisFleet` sharing the protection, or ``None``.
        clock: the clock (tests pass a `FakeClock`; build ``protection`` on the same one).
        inner: the transport under it (tests pass a scripted one); httpx's by default.
    """
    from ...httpx import AsyncRetryTransport

    return AsyncRetryTransport(
        inner,
        policy=policy,
        breaker=protection.breaker,
        budget=protection.budget,
        throttle=protection.throttle,
        instruments=instruments,
        fleet=fleet,
        clock=clock,
    )


class DemoRun:
    """One run of the demo: the upstream, the client, telemetry and the console.

    Args:
        args: the parsed ``demo`` arguments.
        script: what the upstream does, read from ``args`` by the command.
        setup: the protection, read from ``args`` when omitted.

    Attributes:
        protection: the breaker, budget and throttle the transport was given (live objects).
        attempts: attempts per call.
    """

    def __init__(
        self, args: argparse.Namespace, script: UpstreamScript, setup: DemoSetup | None = None
    ) -> None:
        self.args = args
        self.console = Console(
            sys.stdout, tty=sys.stdout.isatty(), traces=args.traces, on_closed=self._reader_gone
        )
        self.script = script
        self.upstream = FlakyUpstream(self.script, rng=Random(args.seed))
        self.stats = DemoStats(on_transition=self._on_transition, upstream_up=self._upstream_up)
        self.setup = setup if setup is not None else DemoSetup.from_args(args)
        self.attempts: int = args.attempts or self.setup.attempts or DEFAULT_ATTEMPTS
        self.protection = self.setup.build(seed=args.seed)
        self.started = time.monotonic()
        self.stop = asyncio.Event()
        self.in_flight = 0
        self.skipped = 0
        self.metrics_url: str | None = None
        self.transport: Any = None
        self._signals = 0
        self._budget_was_refilled = False
        self.load_ended: float | None = None
        self._idle: anyio.Event | None = None  # set once the load ends

    # -- setup ---------------------------------------------------------------------------------

    def _instruments(self) -> list[Any]:
        instruments: list[Any] = [self.stats]
        try:
            from prometheus_client import CollectorRegistry

            from ...instrumentation import PrometheusInstrument
        except ImportError:
            self.console.line("metrics: off (pip install 'retrymw[prometheus]' to serve them)")
        else:
            registry = CollectorRegistry()
            instruments.append(PrometheusInstrument(registry=registry))
            self.metrics_url = self._serve_metrics(registry)
            self.console.line(f"metrics: {redact_url(self.metrics_url)}")
        tracing = self._tracing()
        if tracing is not None:
            from ...instrumentation import OpenTelemetryInstrument

            instruments.append(
                OpenTelemetryInstrument(
                    tracer_provider=tracing.provider, meter_provider=self._otlp_metrics()
                )
            )
        return instruments

    def _serve_metrics(self, registry: Any) -> str:
        from prometheus_client import start_http_server

        host, port = self.args.metrics_host, self.args.metrics_port
        try:
            served = start_http_server(port, addr=host, registry=registry)
        except OSError as error:
            # A taken port is the usual failure; a host that is no address of this machine
            # (or does not resolve) needs another --metrics-host, not another port.
            hint = " (pass --metrics-port 0 for a free port)" if port else ""
            if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
                hint = " (--metrics-host wants an address of this machine, e.g. 127.0.0.1)"
            raise CliError(
                f"cannot serve /metrics on {host}:{port}: {error.strerror}{hint}"
            ) from None
        server = served[0] if isinstance(served, tuple) else None  # a tuple since 0.20
        if server is not None:
            port = server.server_address[1]
            self._metrics_server = server
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/metrics"

    def _tracing(self) -> Tracing | None:
        try:
            from ._trace import setup_tracing
        except ImportError:
            self.console.line("traces: off (pip install opentelemetry-sdk to see them)")
            return None
        self.tracing = setup_tracing(self._on_trace)
        if self.tracing.notice is not None:
            self.console.line(f"notice: {self.tracing.notice}")
        if self.args.traces == "none" and self.tracing.console:
            self.console.line("traces: not printed (--traces none)")
        else:
            self.console.line(f"traces: {self.tracing.description}")
        return self.tracing

    def _otlp_metrics(self) -> Any:
        """The meter provider pushing to the OTLP endpoint, if one is configured (else None:
        the instrument's global provider, where nobody listens)."""
        from ._otlp import setup_metrics

        self.otlp = setup_metrics()
        if self.otlp.notice is not None:
            self.console.line(f"notice: {self.otlp.notice}")
        if self.otlp.description is not None:
            self.console.line(f"otlp metrics: {self.otlp.description}")
        return self.otlp.provider

    def _on_transition(self, event: BreakerStateChanged) -> None:
        self.console.line(
            f"[{self.elapsed():6.1f}s] circuit {event.circuit}: {event.previous_state} → "
            f"{event.state} ({_MEANING[event.state]})"
        )

    def _upstream_up(self) -> bool:
        return not self.upstream.in_outage()

    def _on_trace(self, trace: CallTrace) -> None:
        self.console.trace(trace, self.elapsed())

    # -- running -------------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds since the load started."""
        return time.monotonic() - self.started

    async def main(self) -> None:
        """Start everything, run the load until the end, and shut down."""
        import httpx

        with self._signal_handlers():
            url = await self._start_upstream()
            try:
                self.console.line(f"upstream: {redact_url(url)} ({self.script.describe()})")
                instruments = self._instruments()
                policy = demo_policy(self.attempts)
                self.transport = demo_transport(
                    policy, self.protection, instruments=instruments, fleet=self._fleet()
                )
                self.console.line(self._load_line(policy))
                self.console.line("")
                self.started = time.monotonic()
                self.upstream.restart_script()
                async with httpx.AsyncClient(transport=self.transport, timeout=5.0) as client:
                    ticker = asyncio.ensure_future(self._tick())
                    try:
                        await self._load(client, url)
                    finally:
                        ticker.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await ticker
            finally:
                await self.upstream.close()

    def _fleet(self) -> Any:
        """With ``--redis URL``: a `RedisFleet` sharing the protection (namespace demo)."""
        if self.args.redis is None:
            return None
        from ...fleet import RedisFleet

        self.fleet = RedisFleet(self.args.redis, namespace="demo")
        built = self.protection
        shared = [
            kind
            for kind, one in (
                ("budget", built.budget),
                ("breaker", built.breaker),
                ("throttle", built.throttle),
            )
            if one is not None
        ]
        what = " and ".join([", ".join(shared[:-1]), shared[-1]] if len(shared) > 1 else shared)
        self.console.line(f"fleet: {what or 'nothing'} shared on {redact_url(self.args.redis)}")
        return self.fleet

    def _load_line(self, policy: Any) -> str:
        args = self.args
        length = "until Ctrl-C" if args.forever else f"for {human_duration(args.duration)}"
        return (
            f"load: {args.rate:g} calls/s {length}; policy {policy.attempts} attempts, "
            f"exponential backoff from 100ms to 2s with full jitter; {self.setup.describe()}"
        )

    async def _start_upstream(self) -> str:
        try:
            return await self.upstream.start("127.0.0.1", self.args.upstream_port)
        except OSError as error:
            port = self.args.upstream_port
            raise CliError(
                f"cannot start the upstream on 127.0.0.1:{port}: {error.strerror}"
            ) from None

    async def _load(self, client: httpx.AsyncClient, url: str) -> None:
        import anyio

        interval = 1.0 / self.args.rate
        end = None if self.args.forever else self.started + self.args.duration
        next_at = time.monotonic()
        async with anyio.create_task_group() as group:
            while not self.stop.is_set():
                now = time.monotonic()
                if end is not None and now >= end:
                    break
                self.load_ended = now
                if self.in_flight < _MAX_IN_FLIGHT:
                    self.in_flight += 1
                    group.start_soon(self._call, client, url)
                else:
                    self.skipped += 1
                next_at = max(next_at + interval, now - 1.0)  # no catch-up burst after a stall
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), max(0.0, next_at - time.monotonic()))
            # Let the calls in flight finish (their retries included), within reason; not when
            # nobody reads the output any more.
            self._idle = anyio.Event()
            if self.in_flight and not self.console.closed:
                with anyio.move_on_after(_GRACE):
                    await self._idle.wait()
            group.cancel_scope.cancel()

    async def _call(self, client: httpx.AsyncClient, url: str) -> None:
        import httpx

        try:
            response = await client.get(url)
            await response.aclose()
        except httpx.HTTPError:
            pass  # outcomes are counted by the DemoStats instrument
        finally:
            self.in_flight -= 1
            if self._idle is not None and not self.in_flight:
                self._idle.set()

    async def _tick(self) -> None:
        every = 10.0 if self.args.forever and not self.console.tty else 1.0
        next_progress = every
        outage = False
        throttled = 0
        while True:
            await asyncio.sleep(_TICK)
            elapsed = self.elapsed()
            if self.upstream.in_outage() != outage:
                outage = not outage
                what = "begins: every request fails with 503" if outage else "ends"
                self.console.line(f"[{elapsed:6.1f}s] upstream outage {what}")
            if self.stats.denied["throttled"] > throttled:
                if not throttled or self._budget_was_refilled:
                    self.console.line(
                        f"[{elapsed:6.1f}s] retry budget empty: retries are denied (throttled) "
                        "until successful calls refill it"
                    )
                throttled = self.stats.denied["throttled"]
                self._budget_was_refilled = False
            elif throttled:
                self._budget_was_refilled = True
            if elapsed >= next_progress:
                next_progress += every
                self.console.status(self._progress(elapsed))

    def _progress(self, elapsed: float) -> str:
        retrier = self.transport.retrier if self.transport is not None else None
        return progress_line(
            elapsed, self.stats, retrier, self.upstream.in_outage(), width=self.console.width()
        )

    @contextlib.contextmanager
    def _signal_handlers(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        installed = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, self._on_signal)
            except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not main thread
                continue
            installed.append(signum)
        try:
            yield
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)

    def _reader_gone(self) -> None:
        """Stop the load when stdout's reader has gone away: nobody watches any more."""
        self.stop.set()

    def _on_signal(self) -> None:
        self._signals += 1
        if self._signals > 1:  # the second Ctrl-C: stop waiting for anything
            raise KeyboardInterrupt
        self.console.line(f"[{self.elapsed():6.1f}s] stopping: finishing the calls in flight")
        self.stop.set()

    # -- the end -------------------------------------------------------------------------------

    def report(self) -> None:
        """Print the last progress line and the summary, and release the metrics and tracer.

        The last progress line is drawn from the same counts and the same elapsed time as the
        summary under it: the ticker's latest line can be up to a second (and the calls that
        finished during the final wait) behind.
        """
        elapsed = self.elapsed()
        if self.transport is not None:
            self.console.status(self._progress(elapsed))
        self.console.finish()
        retrier = self.transport.retrier if self.transport is not None else None
        self.console.line(
            summary(
                self.stats,
                elapsed=elapsed,
                upstream=self.upstream,
                retrier=retrier,
                metrics_url=self.metrics_url,
                skipped=self.skipped,
                started=self.started,
                load_time=None if self.load_ended is None else self.load_ended - self.started,
            )
        )
        tracing = getattr(self, "tracing", None)
        if tracing is not None:
            tracing.shutdown()
        otlp = getattr(self, "otlp", None)
        if otlp is not None:
            otlp.shutdown()  # the last push: what was recorded since the previous one
        fleet = getattr(self, "fleet", None)
        if fleet is not None:
            fleet.close()
        server = getattr(self, "_metrics_server", None)
        if server is not None:
            server.shutdown()
            server.server_close()
