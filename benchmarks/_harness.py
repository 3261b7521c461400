"""The harness: cases, interleaved rounds, calibration and robust statistics.

Every case of a group is prepared once, checked (its result must be what the case promises, so
a library that silently gave up is never timed), calibrated to a sample duration, then sampled in
``repeats`` rounds. Each round runs every case once, starting at a different case each time, so
drift (CPU frequency, other processes) spreads over all cases instead of favouring one. Ratios to
the baseline are paired: the median over rounds of ``case / baseline`` in the same round.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DASH",
    "TIMES",
    "Case",
    "CaseResult",
    "Group",
    "GroupResult",
    "Prepared",
    "Settings",
    "Unavailable",
    "run_group",
]

TIMES = "\u00d7"  # multiplication sign
DASH = "\u2013"  # en dash: "no value" in tables

Mode = Literal["async", "sync"]


class Unavailable(Exception):
    """Raised by a case factory when what it measures is not importable (yet)."""


@dataclass(slots=True)
class Prepared:
    """A ready-to-run case.

    ``op(*args)`` is one timed operation (awaited in async cases); it performs ``per_op`` units
    (calls or requests). ``measure`` replaces timing for non-time groups: it returns one sample.
    """

    op: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()
    per_op: int = 1
    check: Callable[[Any], None] | None = None
    reset: Callable[[], None] | None = None
    close: Callable[[], Any] | None = None
    max_n: int = 10_000_000
    measure: Callable[[], Any] | None = None


@dataclass(frozen=True, slots=True)
class Case:
    """One library's way of doing the group's operation."""

    name: str
    library: str
    make: Callable[[], Prepared]
    mode: Mode = "async"
    baseline: bool = False


@dataclass(frozen=True, slots=True)
class Group:
    """Cases measured side by side; ``unit`` is ``"s"`` (per call) or ``"B"`` (bytes).

    ``clock="cpu"`` times the benchmarking thread's CPU time, which other processes on a busy
    machine cannot inflate; ``"wall"`` is for groups whose work happens elsewhere too (a
    server thread, the kernel's network stack). ``max_repeats`` caps the rounds of a group whose
    figures are deterministic (memory).
    """

    name: str
    title: str
    description: str
    cases: Sequence[Case]
    unit: Literal["s", "B"] = "s"
    per: str = "call"
    rate: bool = False
    clock: Literal["cpu", "wall"] = "cpu"
    max_repeats: int | None = None
    setup: Callable[[], object] | None = None
    teardown: Callable[[], object] | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    """How long and how often to sample."""

    repeats: int
    sample_seconds: float
    quick: bool


@dataclass(slots=True)
class CaseResult:
    """The samples of one case and their summary."""

    name: str
    library: str
    baseline: bool
    samples: list[float]
    n: int
    wall_samples: list[float]
    cpu_samples: list[float]
    median: float = 0.0
    q1: float = 0.0
    q3: float = 0.0
    ratio: float | None = None
    ratio_q1: float | None = None
    ratio_q3: float | None = None
    delta: float | None = None


@dataclass(slots=True)
class GroupResult:
    """A group's results, in case order, plus the cases that could not run and why."""

    group: Group
    cases: list[CaseResult]
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    rounds: int = 0

    def case(self, name: str) -> CaseResult | None:
        """The result named ``name``, if it ran."""
        return next((c for c in self.cases if c.name == name), None)


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def paired_ratio(samples: Sequence[float], base: Sequence[float]) -> tuple[float, float, float]:
    """Median and quartiles over rounds of ``sample / base`` measured in the same round."""
    return _quartiles([s / b for s, b in zip(samples, base, strict=True) if b > 0])


class _Runner:
    """Runs sync or async operations, all async ones on one event loop per group."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, value: Any) -> Any:
        if inspect.isawaitable(value):
            return self.loop.run_until_complete(_await(value))
        return value

    def timed(self, case: Case, prepared: Prepared, n: int) -> tuple[float, float]:
        """Wall and thread CPU seconds for ``n`` operations."""
        op, args = prepared.op, prepared.args
        assert op is not None
        if case.mode == "async":
            wall, cpu = self.loop.run_until_complete(_timed_async(op, args, n))
        else:
            wall, cpu = _timed_sync(op, args, n)
        return wall / 1e9, cpu / 1e9

    def close(self) -> None:
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


async def _await(value: Awaitable[Any]) -> Any:
    return await value


async def _timed_async(
    op: Callable[..., Awaitable[Any]], args: tuple[Any, ...], n: int
) -> tuple[int, int]:
    wall, cpu = time.perf_counter_ns, time.thread_time_ns
    start_cpu, start = cpu(), wall()
    for _ in range(n):
        await op(*args)
    end = wall()
    return end - start, cpu() - start_cpu


def _timed_sync(op: Callable[..., Any], args: tuple[Any, ...], n: int) -> tuple[int, int]:
    wall, cpu = time.perf_counter_ns, time.thread_time_ns
    start_cpu, start = cpu(), wall()
    for _ in range(n):
        op(*args)
    end = wall()
    return end - start, cpu() - start_cpu


def _calibrate(runner: _Runner, case: Case, prepared: Prepared, target: float) -> int:
    """The number of operations that makes one sample last about ``target`` seconds."""
    n = 1
    while True:
        elapsed = runner.timed(case, prepared, n)[0]
        if elapsed >= target / 4 or n >= prepared.max_n:
            break
        grow = 10 if elapsed < target / 100 else max(2, int(target / 2 / max(elapsed, 1e-9)))
        n = min(prepared.max_n, n * grow)
    return max(1, min(prepared.max_n, round(n * target / max(elapsed, 1e-9))))


def _sample(runner: _Runner, case: Case, prepared: Prepared, n: int) -> tuple[float, float]:
    """One sample: (wall, thread CPU) seconds per unit of work, or a measured value twice."""
    if prepared.reset is not None:
        prepared.reset()
    gc.collect()
    if prepared.measure is not None:
        value = float(runner.run(prepared.measure()))
        return value, value
    wall, cpu = runner.timed(case, prepared, n)
    units = n * prepared.per_op
    return wall / units, cpu / units


def run_group(group: Group, settings: Settings, log: Callable[[str], None]) -> GroupResult:
    """Prepare, check and calibrate every case, then sample them in interleaved rounds."""
    started = time.perf_counter()
    runner = _Runner()
    ready: list[tuple[Case, Prepared, int]] = []
    skipped: dict[str, str] = {}
    repeats = min(settings.repeats, group.max_repeats or settings.repeats)
    try:
        if group.setup is not None:
            group.setup()
        for case in group.cases:
            try:
                prepared = case.make()
            except Unavailable as reason:
                skipped[case.name] = str(reason)
                continue
            ready.append((case, prepared, 1))
            if prepared.measure is None:
                if prepared.op is None:
                    raise ValueError(f"{case.name}: a timed case needs an op")
                result = runner.run(prepared.op(*prepared.args))
                if prepared.check is not None:
                    prepared.check(result)
                n = _calibrate(runner, case, prepared, settings.sample_seconds)
                ready[-1] = (case, prepared, n)
        samples: dict[str, list[float]] = {case.name: [] for case, _, _ in ready}
        walls: dict[str, list[float]] = {case.name: [] for case, _, _ in ready}
        cpus: dict[str, list[float]] = {case.name: [] for case, _, _ in ready}
        for round_ in range(repeats):
            shift = round_ % max(1, len(ready))
            for case, prepared, n in ready[shift:] + ready[:shift]:
                wall, cpu = _sample(runner, case, prepared, n)
                samples[case.name].append(cpu if group.clock == "cpu" else wall)
                walls[case.name].append(wall)
                cpus[case.name].append(cpu)
            log(f"  {group.name}: round {round_ + 1}/{repeats}")
    finally:
        _close_all(runner, group, [prepared for _, prepared, _ in ready])
    results = [
        CaseResult(
            case.name,
            case.library,
            case.baseline,
            samples[case.name],
            n,
            walls[case.name],
            cpus[case.name],
        )
        for case, _, n in ready
    ]
    _summarise(results)
    return GroupResult(group, results, skipped, time.perf_counter() - started, repeats)


def _run_close(runner: _Runner, close: Callable[[], Any]) -> None:
    runner.run(close())


def _close_all(runner: _Runner, group: Group, prepared: list[Prepared]) -> None:
    """Close every case, the event loop and the group's fixtures; then raise the first error."""
    steps: list[Callable[[], object]] = [
        functools.partial(_run_close, runner, p.close) for p in prepared if p.close is not None
    ]
    steps.append(runner.close)
    if group.teardown is not None:
        steps.append(group.teardown)
    errors: list[Exception] = []
    for step in steps:
        try:
            step()
        except Exception as error:  # noqa: PERF203 - every step must run
            errors.append(error)
    if errors:
        raise errors[0]


def _summarise(results: list[CaseResult]) -> None:
    base = next((r for r in results if r.baseline), None)
    for result in results:
        result.q1, result.median, result.q3 = _quartiles(result.samples)
    if base is None:
        return
    for result in results:
        ratio_q1, ratio, ratio_q3 = (
            (1.0, 1.0, 1.0) if result is base else paired_ratio(result.samples, base.samples)
        )
        result.ratio, result.ratio_q1, result.ratio_q3 = ratio, ratio_q1, ratio_q3
        result.delta = result.median - base.median
