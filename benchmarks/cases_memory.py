"""Group 6: memory. Peak bytes per successful call (tracemalloc), and 10 000 keyed breakers.

The per-call figure is the highest traced memory above the level just before one call, the
median over many calls: what one call needs at its peak (frames, state objects, closures).
The success-path cases are those of `cases_core`, measured instead of timed.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

from . import cases_core
from ._harness import Case, Group, Prepared, Unavailable

__all__ = ["groups"]

BREAKERS = 10_000


async def _peaks_async(op: Callable[..., Any], args: tuple[Any, ...], calls: int) -> float:
    peaks = []
    for _ in range(calls):
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        await op(*args)
        peaks.append(tracemalloc.get_traced_memory()[1] - before)
    return float(sorted(peaks)[len(peaks) // 2])


def _peaks_sync(op: Callable[..., Any], args: tuple[Any, ...], calls: int) -> float:
    peaks = []
    for _ in range(calls):
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        op(*args)
        peaks.append(tracemalloc.get_traced_memory()[1] - before)
    return float(sorted(peaks)[len(peaks) // 2])


def _per_call(case: Case, calls: int) -> Case:
    def make() -> Prepared:
        timed = case.make()
        op = timed.op
        assert op is not None

        async def measure_async() -> float:
            tracemalloc.start()
            try:
                await op(*timed.args)  # the first call may build caches: not measured
                return await _peaks_async(op, timed.args, calls)
            finally:
                tracemalloc.stop()

        def measure_sync() -> float:
            tracemalloc.start()
            try:
                op(*timed.args)
                return _peaks_sync(op, timed.args, calls)
            finally:
                tracemalloc.stop()

        measure = measure_async if case.mode == "async" else measure_sync
        return Prepared(measure=measure, close=timed.close)

    return Case(case.name, case.library, make, case.mode, case.baseline)


def _breakers(window: Any, max_targets: int) -> Callable[[], Prepared]:
    def make() -> Prepared:
        try:
            from retrymw import CircuitBreaker, PerTarget
        except ImportError as error:
            raise Unavailable(f"retrymw._protect.targets not importable ({error})") from None

        def measure() -> float:
            template = CircuitBreaker(name="http", window=window)
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                breakers = PerTarget(template, max_targets=max_targets)
                for i in range(BREAKERS):
                    breakers.for_target(f"host{i}")
                used = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()
            if len(breakers) != min(BREAKERS, max_targets):
                raise AssertionError(f"PerTarget holds {len(breakers)} breakers")
            return used / BREAKERS

        return Prepared(measure=measure)

    return make


def groups(quick: bool) -> list[Group]:
    """Peak bytes per call for the success paths, and breakers kept per target."""
    calls = 20 if quick else 200
    rounds = 1 if quick else 3  # tracemalloc figures barely vary between rounds
    success = {group.name: group for group in cases_core.groups(quick)}
    per_call = [
        Group(
            f"memory-{mode}",
            f"Memory per successful call, {'coroutine' if mode == 'async' else 'function'}",
            "Peak traced bytes above the pre-call level during one call (tracemalloc), median "
            f"of {calls} calls; the cases of `success-{mode}`.",
            [_per_call(case, calls) for case in success[f"success-{mode}"].cases],
            unit="B",
            max_repeats=rounds,
        )
        for mode in ("async", "sync")
    ]
    breakers = Group(
        "memory-breakers",
        f"Memory of {BREAKERS:,} circuit breakers per target",
        f"`PerTarget(template, max_targets=...).for_target(f'host{{i}}')` for {BREAKERS:,} "
        "targets, traced bytes retained per target (tracemalloc); past `max_targets` the least "
        "recently used idle target is evicted.",
        [
            Case(
                "max_targets=10 000, count window (default)",
                "retrymw",
                _breakers(100, BREAKERS),
                mode="sync",
            ),
            Case(
                "max_targets=10 000, time window 10s", "retrymw", _breakers("10s", BREAKERS), "sync"
            ),
            Case("max_targets=1024 (default)", "retrymw", _breakers(100, 1024), "sync"),
        ],
        unit="B",
        per="target",
        max_repeats=rounds,
    )
    return [*per_call, breakers]
