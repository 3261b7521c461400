"""One hedged attempt: the race the async driver runs in place of an attempt under a `Hedge`.

The attempt's first copy starts at once; while no usable answer has come, another copy starts
each time the hedge's delay passes, up to ``max_extra`` of them, each admitted by the call's
protection (`CallRun.admits_hedge`). The first usable answer wins and the other copies are
cancelled; a copy that answers after the race was decided has its result disposed of (a
response drained and closed). A failed answer while a copy is still in flight waits for it;
when every copy failed, the last failure is the attempt's outcome and the policy decides as
usual. Copies run in one anyio task group: when the race returns, none is left running.

The race runs on the event loop's time (`anyio.current_time`), the copies being real
concurrent work; the `Hedge` is told the latencies it measured.

Protection sees each copy sent: the throttle admits every extra copy (`CallRun.admits_hedge`),
a failed answer that a later answer replaces is a failure for the breaker and the throttle
(`CallRun.hedge_failed`), the answer the attempt ends with gets its verdict as any attempt's,
and a copy cancelled unanswered (a loser) is neither a success nor a failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from .._core.instruments import NO_SCOPES
from .._core.matchers import status_of
from .callables import Refused, refuse_unawaitable

if TYPE_CHECKING:
    from .._protect.hedge import Hedge
    from .run import CallRun

__all__ = ["race"]


class _Race:
    """What the copies of one attempt share: how many run, the answer that won, the failure
    held while others run, and an event set whenever a copy ends."""

    __slots__ = (
        "changed",
        "error",
        "failed",
        "fault",
        "group",
        "result",
        "run",
        "running",
        "won_by",
    )

    def __init__(self, run: CallRun, group: anyio.abc.TaskGroup) -> None:
        self.run = run
        self.group = group
        self.running = 0
        self.changed = anyio.Event()
        self.won_by: int | None = None  # the copy whose answer won: 0 the first, 1... hedges
        self.failed = False  # whether `result`/`error` hold a failed answer (no winner yet)
        self.result: object = None
        self.error: Exception | None = None
        # An error judging an answer (a ``retry_on`` predicate that raised): it ends the race
        # and the call, raised as it is, as it would be without hedging.
        self.fault: Exception | None = None

    async def answered(self, copy: int, result: object, error: Exception | None) -> bool:
        """Copy ``copy`` answered: it wins, is held as the failure, or, when the race was
        decided already, is disposed of (returns False: the answer was not judged)."""
        run = self.run
        if self.won_by is not None:  # decided already: this late answer is a loser
            await run.dispose(result)
            return False
        superseded = self.result if self.failed else None
        if self.failed:  # a failed answer held until now: its verdict, as it is replaced
            run.hedge_failed(self.result, self.error)
        self.result, self.error = result, error
        try:
            usable = run.usable(result, error)
        except Exception as fault:
            self.fault, self.won_by = fault, copy  # decided: the call ends with the fault
            self.group.cancel_scope.cancel()
            await run.dispose(superseded)
            return True
        if usable:
            self.won_by, self.failed = copy, False
            self.group.cancel_scope.cancel()  # the other copies
        else:
            self.failed = True
        await run.dispose(superseded)
        return True


async def _copy(race: _Race, copy: int, awaitable: Awaitable[object], hedge: Hedge) -> None:
    """Run one copy of the attempt and tell the race how it ended.

    A copy that answers records its latency; the first copy, cancelled because a hedge won,
    records the time it ran, a lower bound of its latency that lies above the hedging delay:
    without it the estimate would see only the fast answers and drift down. An extra copy
    (``copy`` 1 and up) is reported as a hedge attempt; the first is the attempt itself.
    """
    run = race.run
    target = run.target
    scopes = run.hedge_started() if copy else NO_SCOPES
    reported_from = run.runtime.clock.now()
    started = anyio.current_time()
    result: object = None
    error: Exception | None = None
    judged = False
    try:
        result = await awaitable
    except Exception as raised:
        error = raised
        hedge.record(target, anyio.current_time() - started)
        race.running -= 1
        with anyio.CancelScope(shield=True):
            judged = await race.answered(copy, None, raised)
    except BaseException:
        race.running -= 1
        if copy == 0:
            hedge.record(target, anyio.current_time() - started)
        raise
    else:
        hedge.record(target, anyio.current_time() - started)
        race.running -= 1
        with anyio.CancelScope(shield=True):  # a loser's connection goes back to the pool
            judged = await race.answered(copy, result, None)
    finally:
        race.changed.set()
        if copy:
            won = race.won_by == copy
            if won:
                failure = None
            elif error is not None:
                failure = type(error).__qualname__
            elif judged:  # a failed answer (a 503): its status, as for any attempt
                status = status_of(result)
                failure = "result" if status is None else str(status)
            else:  # cancelled, or answered after another copy won
                failure = "cancelled"
            run.hedge_finished(scopes, reported_from, won, failure, error)


def _start(race: _Race, copy: int, attempt: Callable[[], Any], fn: object, hedge: Hedge) -> None:
    awaitable = attempt()
    if type(awaitable) is not CoroutineType:
        refuse_unawaitable(fn, awaitable)
    race.running += 1
    race.group.start_soon(_copy, race, copy, awaitable, hedge)


async def race(run: CallRun, hedge: Hedge, attempt: Callable[[], Any], fn: object) -> object:
    """Run one attempt of ``run`` as a race of hedged copies; return the winning result, or
    raise the winning (or last failed) copy's exception.

    ``attempt`` makes one copy's awaitable (``fn`` is named if it is not one).
    """
    target = run.target
    started = anyio.current_time()
    async with anyio.create_task_group() as group:
        state = _Race(run, group)
        _start(state, 0, attempt, fn, hedge)
        extra, allowed = 0, hedge.max_extra
        while state.won_by is None and state.running:
            state.changed = changed = anyio.Event()
            delay = hedge.delay(target) if extra < allowed else None
            if delay is None:
                await changed.wait()
                continue
            # The n-th hedge is due n delays after the attempt started.
            due = started + (extra + 1) * delay
            with anyio.move_on_after(max(0.0, due - anyio.current_time())):
                await changed.wait()
                continue
            extra += 1
            if run.admits_hedge():
                hedge.sent(target)
                _start(state, extra, attempt, fn, hedge)
            else:
                hedge.denied(target)
                allowed = extra  # refused: no more hedges for this attempt
        group.cancel_scope.cancel()
    if state.fault is not None:
        await run.dispose(state.result)
        raise Refused(state.fault)  # past the attempt handling: raised as it is
    if state.won_by:
        hedge.won(target)
    if state.error is not None:
        raise state.error
    return state.result
