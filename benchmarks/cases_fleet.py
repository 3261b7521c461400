"""Group 7: the fleet (`retrymw.fleet.RedisFleet`) against a real redis-server on 127.0.0.1.

* ``fleet-step``: how long one synchroniser step takes (p99 over the steps of a round) for one
  member with 10 000 targets x 3 kinds (budget, breaker, throttle), every target busy between
  steps or 1% of them, and at PerTarget's default cap (1 024). Goal: within the 250 ms
  interval. Each round also checks the store commands per step (at most 3).
* ``fleet-processes``: 16 real processes x 1 000 targets x 3 kinds on one Redis, each stepping
  every 250 ms for a few seconds with a tenth of its targets busy between steps: the worst
  process's step p99, and Redis's own CPU per interval (``INFO cpu``). Goal: every step within
  its interval.
* ``fleet-latency``: a call's added latency (p99 of the request path: breaker, throttle and
  budget decisions) while the synchroniser runs against a store that is healthy, hung
  (SIGSTOP), slow (every reply 50 ms late) or answering garbage. Goal: p99 <= 1 ms; a round
  raises if any call raised.

The slow and garbage stores are the test suite's scripted RESP server (`tests.resp_server`) in
front of the real one. Without redis-server the cases are reported unavailable.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ._harness import Case, Group, Prepared, Unavailable

__all__ = ["groups", "worker_main"]

INTERVAL = 0.25
BUSY_EVERY = 10  # fleet-processes: each step, one target in ten saw a call
ROOT = Path(__file__).resolve().parent.parent


class _Redis:
    """One private redis-server for a group (its setup starts it, its teardown stops it)."""

    def __init__(self) -> None:
        self.process: Any = None

    def start(self) -> None:
        try:
            from retrymw.cli.demo._redis_server import RedisLaunchError, RedisServerProcess
        except ImportError:  # pragma: no cover - the benchmarks install redis
            return
        try:
            process = RedisServerProcess()
            process.start()
        except RedisLaunchError:
            return
        self.process = process

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def require(self) -> Any:
        if self.process is None:
            raise Unavailable("redis-server is not installed (apt-get install redis-server)")
        return self.process

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.require().url, socket_timeout=5)


def _commands(client: Any) -> int:
    """Script calls and loads the store received (a script's own commands count too in
    ``commandstats``, so only these are the fleet's round trips)."""
    stats: dict[str, Any] = client.info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))
        for name in ("evalsha", "eval", "script|load", "script")
    )


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _protections(fleet: Any, cap: int) -> list[Any]:
    from retrymw import AdaptiveThrottle, CircuitBreaker, PerTarget, RetryBudget

    scoped = [
        PerTarget(RetryBudget(), max_targets=cap),
        PerTarget(CircuitBreaker(name="api"), max_targets=cap),
        PerTarget(AdaptiveThrottle(name="api"), max_targets=cap),
    ]
    for per_target in scoped:
        fleet.attach(per_target)
    return scoped


def _touch(scoped: list[Any], host: str) -> None:
    """One successful call's request path on ``host``'s budget, breaker and throttle."""
    budget, breaker, throttle = (per_target.for_target(host) for per_target in scoped)
    breaker.allow_request()
    throttle.allow_request()
    breaker.record_success()
    throttle.record_success()
    budget.record_success()


def _step_case(redis: _Redis, targets: int, busy: float, steps: int) -> Callable[[], Prepared]:
    def make() -> Prepared:
        from retrymw.fleet import RedisFleet

        server = redis.require()
        namespace = f"bench-{targets}-{busy}"
        fleet = RedisFleet(server.url, namespace=namespace, timeout="5s", start=False)
        scoped = _protections(fleet, max(targets, 1024))
        hosts = [f"host-{index}.example" for index in range(targets)]
        for host in hosts:
            _touch(scoped, host)
        if not fleet.sync():
            raise AssertionError(f"the first step failed: {fleet.statistics()}")
        client = redis.client()
        every = max(1, round(1 / busy))

        def measure() -> float:
            durations = []
            before = _commands(client)
            for step in range(steps):
                for host in hosts[step % every :: every]:
                    _touch(scoped, host)
                started = time.perf_counter()
                if not fleet.sync():
                    raise AssertionError(f"a step failed: {fleet.statistics()}")
                durations.append(time.perf_counter() - started)
            per_step = (_commands(client) - before) / steps
            if per_step > 3:
                raise AssertionError(f"{per_step:.1f} store commands per step (goal <= 3)")
            return _p99(durations)

        def close() -> None:
            fleet.close()
            client.close()

        return Prepared(measure=measure, close=close)

    return make


# -- 16 processes ----------------------------------------------------------------------------------


def worker_main() -> None:
    """One process of ``fleet-processes``: ``python -c ... URL TARGETS SECONDS START``."""
    from retrymw.fleet import RedisFleet

    url, targets, seconds, start = (
        sys.argv[1],
        int(sys.argv[2]),
        float(sys.argv[3]),
        float(sys.argv[4]),
    )
    fleet = RedisFleet(url, namespace="bench-processes", timeout="1s", start=False)
    scoped = _protections(fleet, targets)
    hosts = [f"host-{index}.example" for index in range(targets)]
    for host in hosts:
        _touch(scoped, host)
    fleet.sync()
    while fleet.statistics().records and time.time() < start:  # join: every target registered
        fleet.sync()
    time.sleep(max(0.0, start - time.time()))
    durations, late, failed = [], 0, 0
    next_step = time.monotonic()
    end = next_step + seconds
    step = 0
    while next_step < end:
        for host in hosts[step % BUSY_EVERY :: BUSY_EVERY]:  # a tenth of the targets a step
            _touch(scoped, host)
        step += 1
        started = time.monotonic()
        failed += not fleet.sync()
        took = time.monotonic() - started
        durations.append(took)
        late += took > INTERVAL
        next_step += INTERVAL
        time.sleep(max(0.0, next_step - time.monotonic()))
    fleet.close()
    print(
        json.dumps(
            {"p99": _p99(durations), "steps": len(durations), "late": late, "failed": failed}
        )
    )


class _Processes:
    """Runs the 16 processes once per round; both cases of the group read the same run."""

    def __init__(self, redis: _Redis, processes: int, targets: int, seconds: float) -> None:
        self.redis, self.processes, self.targets, self.seconds = redis, processes, targets, seconds
        self.values: dict[str, float] = {}

    def sample(self, name: str) -> float:
        if name not in self.values:
            self.values = self._run()
        return self.values.pop(name)

    def _run(self) -> dict[str, float]:
        server = self.redis.require()
        client = self.redis.client()
        start = time.time() + 6.0  # every process has imported retrymw and joined by then
        code = "from benchmarks.cases_fleet import worker_main; worker_main()"
        args = [server.url, str(self.targets), str(self.seconds), repr(start)]
        procs = [
            subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, stdout=subprocess.PIPE)
            for _ in range(self.processes)
        ]
        try:
            cpu_before = _redis_cpu(client)
            results = []
            for proc in procs:
                out, _ = proc.communicate(timeout=self.seconds + 120)
                results.append(json.loads(out))
            cpu = _redis_cpu(client) - cpu_before
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
            client.close()
        if any(result["failed"] for result in results):
            raise AssertionError(f"failed steps: {results}")
        steps = sum(result["steps"] for result in results) / len(results)
        return {
            "p99": max(result["p99"] for result in results),
            "cpu": cpu / max(1.0, steps),  # Redis CPU seconds per interval (all processes' steps)
        }


def _redis_cpu(client: Any) -> float:
    info: dict[str, Any] = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


# -- added latency ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _store(redis: _Redis, kind: str) -> Iterator[str]:
    """The URL of a store that is healthy, hung, slow or answering garbage."""
    server = redis.require()
    if kind == "healthy":
        yield server.url
        return
    if kind == "hung":
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            yield server.url
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        return
    try:
        sys.path.insert(0, str(ROOT))
        from tests.resp_server import DEFAULT, Delay, RespServer
    except ImportError as error:
        raise Unavailable(f"tests.resp_server not importable ({error})") from None

    def answer(command: Any) -> Any:
        if kind == "slow":
            return Delay(0.05, DEFAULT)
        return b"garbage" if command.name == "EVALSHA" else DEFAULT

    with RespServer(answer, upstream=("127.0.0.1", server.port)) as front:
        yield front.url


def _latency_case(redis: _Redis, kind: str, calls: int) -> Callable[[], Prepared]:
    def make() -> Prepared:
        redis.require()

        def measure() -> float:
            from retrymw import AdaptiveThrottle, CircuitBreaker, RetryBudget
            from retrymw.fleet import RedisFleet

            with (
                _store(redis, kind) as url,
                RedisFleet(url, namespace=f"latency-{kind}", sync_interval="50ms") as fleet,
            ):
                budget, breaker = RetryBudget(), CircuitBreaker(name="api")
                throttle = AdaptiveThrottle(name="api")
                for protection in (budget, breaker, throttle):
                    fleet.attach(protection, target="api")
                latencies = []
                for n in range(calls):
                    started = time.perf_counter()
                    breaker.allow_request()
                    throttle.allow_request()
                    if n % 10 == 0:
                        breaker.record_failure()
                        throttle.record_failure()
                        budget.try_acquire()
                    breaker.record_success()
                    throttle.record_success()
                    budget.record_success()
                    latencies.append(time.perf_counter() - started)
                    if n % 100 == 0:
                        time.sleep(0.001)  # the synchroniser runs meanwhile
            return _p99(latencies)

        return Prepared(measure=measure)

    return make


def groups(quick: bool) -> list[Group]:
    """The fleet's step time, its 16-process run, and a call's latency under store faults."""
    steps = 5 if quick else 40
    rounds = 1 if quick else 3
    stepping = _Redis()
    step_cases = [
        Case(
            "10 000 targets x 3 kinds, every target busy",
            "retrymw",
            _step_case(stepping, 10 if quick else 10_000, 1.0, steps),
            "sync",
        ),
        Case(
            "10 000 targets x 3 kinds, 1% busy per step",
            "retrymw",
            _step_case(stepping, 10 if quick else 10_000, 0.01, steps),
            "sync",
        ),
        Case(
            "1 024 targets x 3 kinds (PerTarget's default cap), every target busy",
            "retrymw",
            _step_case(stepping, 10 if quick else 1024, 1.0, steps),
            "sync",
            baseline=True,
        ),
    ]
    spawning = _Redis()
    run = _Processes(spawning, 2 if quick else 16, 10 if quick else 1000, 1.0 if quick else 5.0)
    process_cases = [
        Case(
            "worst process's step p99",
            "retrymw",
            lambda: Prepared(measure=lambda: run.sample("p99")),
            "sync",
        ),
        Case(
            "Redis CPU per interval (every process's step)",
            "redis-server",
            lambda: Prepared(measure=lambda: run.sample("cpu")),
            "sync",
        ),
    ]
    faulty = _Redis()
    calls = 2_000 if quick else 100_000
    latency_cases = [
        Case(
            f"store {kind}",
            "retrymw",
            _latency_case(faulty, kind, calls),
            "sync",
            baseline=kind == "healthy",
        )
        for kind in ("healthy", "hung", "slow", "garbage")
    ]
    return [
        Group(
            "fleet-step",
            "Fleet: one synchroniser step of one member",
            f"`RedisFleet.sync()` against a loopback redis-server, p99 over {steps} steps per "
            "round; the targets' request paths run between steps. Goal: within the 250 ms "
            "interval, at most 3 store commands per step (checked each round).",
            step_cases,
            per="step",
            clock="wall",
            max_repeats=rounds,
            setup=stepping.start,
            teardown=stepping.stop,
        ),
        Group(
            "fleet-processes",
            "Fleet: 16 processes x 1 000 targets x 3 kinds on one Redis",
            "Real processes, each stepping every 250 ms for 5 s, a tenth of its targets busy "
            "between steps (every target each 2.5 s; 16 processes calling all of theirs would "
            "need more than this machine's 2 CPUs): the worst process's step p99 (goal: within "
            "the interval), and the redis-server's CPU seconds per interval (`INFO cpu`).",
            process_cases,
            per="step",
            clock="wall",
            max_repeats=rounds,
            setup=spawning.start,
            teardown=spawning.stop,
        ),
        Group(
            "fleet-latency",
            "Fleet: a call's request path while the store misbehaves",
            f"p99 of {calls:,} calls' breaker, throttle and budget decisions with the "
            "synchroniser running (50 ms interval) against a store that is healthy, hung "
            "(SIGSTOP), slow (50 ms per reply) or answering garbage. Goal: p99 <= 1 ms.",
            latency_cases,
            clock="wall",
            max_repeats=rounds,
            setup=faulty.start,
            teardown=faulty.stop,
        ),
    ]
