"""The engine's two doors: `Engine.run_async` and `Engine.run_sync`, one per colour.

Every front door (`Retrier.call`, `Retrier.call_sync`, the decorators, the HTTP transports
and client helpers) describes its call (`Call`) and hands it here with the attempt to run. The
doors run the first attempt bare when nothing needs to see or bound it, and otherwise, or once
it failed, drive the call: a thin loop around the same `CallRun` methods (run the attempt, ask
the run, which asks the pure `RetryPolicy` decision core, what follows, sleep, repeat).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import Any, TypeVar

import anyio

from .._core.clock import async_waiter, waits_disabled
from .._core.events import Outcome
from .._core.instruments import Dispatch
from .._core.policy import RetryPolicy
from .._protect.budget import RetryBudget
from . import reports
from .call import Call
from .callables import (
    SUSPECT_RESULTS,
    Refused,
    async_result_error,
    bound_attempt,
    check_callable,
    refuse_async_result,
    refuse_unawaitable,
    sync_result_error,
)
from .layers import mark_time
from .reports import SettledCall
from .retrier_args import NOT_GIVEN
from .run import CallRun
from .runtime import Runtime, for_target
from .time_limits import within

__all__ = ["Engine"]

T = TypeVar("T")

#: What a report reads of the outcome of a first attempt that settled its call: no exception
#: and no status (the result is the call's own, `SettledCall.result`).
SETTLED = Outcome(attempt=1)


class Engine:
    """A `Retrier`'s runtime and its two doors; `Retrier` sets every slot in its constructor."""

    __slots__ = ("_bare", "_dispatch", "_funded", "_quiet", "_runtime", "policy")

    policy: RetryPolicy
    _bare: bool  # whether calls under `policy` may run their first attempt bare (`_bare_policy`)
    _dispatch: Dispatch  # every instrument's hooks
    _quiet: Dispatch | None  # the same without the idle instruments, if any can be idle
    _funded: RetryBudget | None  # the one budget every call funds, when not per target
    _runtime: Runtime  # what every call reads: effects and protection

    def _current(self) -> Dispatch:
        """The dispatch of a call starting now: without the instruments idle at the moment."""
        quiet = self._quiet
        return self._dispatch if quiet is None or self._dispatch.listening() else quiet

    def _runs_bare(self, call: Call, dispatch: Dispatch) -> bool:
        """Whether ``call``'s first attempt may run outside a `CallRun` (`_bare_policy`); an
        observed HTTP attempt never does: it lasts until its body ends, which only a `CallRun`
        follows."""
        if call.adapter is not None:
            return not dispatch.observes_calls and self._bare_policy(call.policy, judged=True)
        return self._bare_policy(call.policy, judged=False)

    def _bare_policy(self, policy: RetryPolicy, *, judged: bool) -> bool:
        """Whether a call under ``policy`` may run its first attempt bare, as far as protection
        and the policy go (an instrument that opens scopes also forbids it: `Dispatch`).

        No breaker or throttle admits attempts, no store resumes calls, the policy bounds no
        attempt in time, and the outcome needs no judging beyond "it raised": a result is
        judged only by a matcher that reads results, unless the front door ``judged`` it
        (`AttemptAdapter.settles`). Instruments that hear of endings only are told of a call
        settled at once by `_report_settled`.
        """
        if self._runtime.guards_calls:
            return False
        if policy.timeout is not None or policy.deadline is not None:
            return False
        return judged or policy.retry_on is None or not policy.retry_on.uses_results

    def _call_of(self, fn: Callable[..., Any], call: Call | None) -> Call:
        """``call``, or the call of ``fn`` under this retrier's policy, named after ``fn``."""
        return call if call is not None else Call.of(fn, self.policy)

    def _fund(self, fn: Callable[..., Any], call: Call | None) -> RetryBudget | None:
        """A call succeeded at its bare first attempt: it funds its target's budget (returned)."""
        funded = self._funded
        if funded is None and self._runtime.budget is not None:
            funded = for_target(self._runtime.budget, self._call_of(fn, call).target)
        if funded is not None:
            funded.record_success()
        return funded

    def _report_settled(
        self,
        fn: Callable[..., Any],
        call: Call | None,
        dispatch: Dispatch,
        started_at: float,
        result: object,
        budget: RetryBudget | None,
    ) -> None:
        """Tell the instruments of a call its bare first attempt settled: how the attempt
        ended, then the call, as a `CallRun` would have."""
        settled = SettledCall(self._runtime, self._call_of(fn, call), started_at, result, budget)
        now = self._runtime.clock.now()
        if dispatch.attempt_finished:
            reports.attempt_finished(settled, dispatch.attempt_finished, SETTLED, now, False, False)
        if dispatch.call_finished:
            reports.call_finished(settled, dispatch.call_finished, None)

    async def run_async(
        self,
        fn: Callable[..., Awaitable[T]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        call: Call | None = None,
    ) -> T:
        """Await ``fn(*args, **kwargs)`` until the policy accepts an outcome or gives up.

        ``call`` describes the call (`Call`); ``None`` is a call of ``fn`` under this retrier's
        policy, named after ``fn``, described only once something needs it.
        """
        dispatch = self._current()
        bare = self._bare if call is None else self._runs_bare(call, dispatch)
        if not bare or dispatch.opens_scopes:
            return await self._drive_async(fn, args, kwargs, self._call_of(fn, call), dispatch)
        since = mark_time()  # a mark later than this was made inside this call
        started_at = self._runtime.clock.now() if dispatch.observes_calls else None
        awaitable: Any = NOT_GIVEN
        try:
            awaitable = fn(*args, **kwargs)
            result = await awaitable
        except Exception as error:
            first = error
        else:
            adapter = None if call is None else call.adapter
            if adapter is None or adapter.settles(result):
                budget = self._fund(fn, call)
                if started_at is not None:
                    self._report_settled(fn, call, dispatch, started_at, result, budget)
                return result if adapter is None else adapter.returned(result, None)  # type: ignore[return-value]
            return await self._drive_async(
                fn,
                args,
                kwargs,
                self._call_of(fn, call),
                dispatch,
                since,
                started_at,
                first_result=result,
            )
        # Misuse is told apart only once something failed, off the success path: ``fn`` not
        # callable, or what it returned not awaitable. Refused, never retried.
        if isinstance(first, TypeError):
            if not callable(fn):
                check_callable(fn, "retrier.call()")
            if awaitable is not NOT_GIVEN and not hasattr(awaitable, "__await__"):
                raise sync_result_error(fn, awaitable) from None
        # Outside the except block: the retries' exceptions must not carry the first one as
        # their __context__ ("During handling of the above exception...").
        resumed = self._drive_async(
            fn,
            args,
            kwargs,
            self._call_of(fn, call),
            dispatch,
            since,
            started_at,
            first_error=first,
        )
        # The first error's traceback holds this frame: not holding the error here too leaves
        # no reference cycle for the garbage collector to find after every retried call.
        del first
        return await resumed

    def run_sync(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        call: Call | None = None,
    ) -> T:
        """Sync twin of `run_async`: blocking sleeps; an attempt's time limit bounds what
        honours `within` (a blocking attempt cannot be cancelled)."""
        dispatch = self._current()
        bare = self._bare if call is None else self._runs_bare(call, dispatch)
        if not bare or dispatch.opens_scopes:
            return self._drive_sync(fn, args, kwargs, self._call_of(fn, call), dispatch)
        since = mark_time()
        started_at = self._runtime.clock.now() if dispatch.observes_calls else None
        first: Exception | None = None
        try:
            result = fn(*args, **kwargs)
        except Exception as error:
            first = error
        if first is not None:
            try:  # outside the except block, as in `run_async`: no accidental chaining
                return self._drive_sync(
                    fn,
                    args,
                    kwargs,
                    self._call_of(fn, call),
                    dispatch,
                    since,
                    started_at,
                    first_error=first,
                )
            finally:
                first = None  # no reference cycle through this frame, as in `run_async`
        if type(result) in SUSPECT_RESULTS:
            refusal = async_result_error(fn, result)
            if refusal is not None:
                raise refusal  # never retried
        adapter = None if call is None else call.adapter
        if adapter is None or adapter.settles(result):
            budget = self._fund(fn, call)
            if started_at is not None:
                self._report_settled(fn, call, dispatch, started_at, result, budget)
            return result if adapter is None else adapter.returned(result, None)  # type: ignore[return-value]
        return self._drive_sync(
            fn,
            args,
            kwargs,
            self._call_of(fn, call),
            dispatch,
            since,
            started_at,
            first_result=result,
        )

    # -- the drivers: the full path ------------------------------------------------------------

    # One loop, like its sync twin, with a resumed call's store I/O awaited in place: split up,
    # the steps a call takes would no longer read in order.
    async def _drive_async(  # noqa: PLR0915
        self,
        fn: Callable[..., Awaitable[T]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        call: Call,
        dispatch: Dispatch,
        since: int | None = None,
        started_at: float | None = None,
        *,
        first_error: Exception | None = None,
        first_result: object = NOT_GIVEN,
    ) -> T:
        """Drive ``call`` (async): from its start, or on from its bare first attempt's outcome
        (``first_error`` or ``first_result``, with ``since`` and ``started_at`` read before
        that attempt)."""
        attempt = bound_attempt(fn, args, kwargs)
        run = CallRun(self._runtime, call, dispatch, since, started_at)
        adapter = call.adapter
        clock = self._runtime.clock
        bounded = call.policy.timeout is not None or call.policy.deadline is not None
        # A resumed call's store I/O runs in worker threads, awaited here, before the sync
        # step that adopts it: it never blocks the event loop (`ResumableRun`).
        resume = run.resume
        try:
            if resume is not None:
                await resume.load_async()
            delay = run.open(first_result, first_error)
            while delay is not None:
                if delay > 0.0 or run.attempt:
                    if adapter is not None and run.result is not None:
                        # Disposing of the superseded result is part of the wait: the adapter
                        # bounds it by the delay, and the sleep is what is left of it.
                        disposed_from = clock.now()
                        await adapter.discard(run.result, delay, run.deadline_left())
                        delay = max(0.0, delay - (clock.now() - disposed_from))
                    scopes = run.sleep_scopes
                    wait = async_waiter(clock)
                    if wait is not None:
                        await wait(delay)
                    scopes.exit()
                if not run.guarded:
                    run.attempt += 1
                else:
                    if resume is not None:
                        await resume.claim_async(run)
                    if not run.start_attempt():
                        break
                if adapter is not None:
                    adapter.before_attempt(run.attempt)
                try:
                    awaitable = attempt()
                    if type(awaitable) is not CoroutineType:
                        refuse_unawaitable(fn, awaitable)
                    if not bounded:
                        result = await awaitable
                    else:
                        with anyio.fail_after(run.attempt_limit()):
                            result = await awaitable
                except Exception as error:
                    delay = run.finish_attempt(None, error)
                else:
                    delay = run.finish_attempt(result, None)
                if resume is not None:
                    await resume.write_async()
        except Refused as refused:
            if resume is not None:
                await resume.end_async(ended=True)
            run.abort(refused.error)
            raise refused.error from None
        except BaseException as error:
            if resume is not None:
                await resume.end_async(ended=isinstance(error, Exception))
            run.abort(error)
            raise
        if resume is not None:
            await resume.end_async(ended=True)
        return run.conclude()  # type: ignore[no-any-return]

    def _drive_sync(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        call: Call,
        dispatch: Dispatch,
        since: int | None = None,
        started_at: float | None = None,
        *,
        first_error: Exception | None = None,
        first_result: object = NOT_GIVEN,
    ) -> T:
        """Sync twin of `_drive_async`."""
        attempt = bound_attempt(fn, args, kwargs)
        run = CallRun(self._runtime, call, dispatch, since, started_at)
        adapter = call.adapter
        clock = self._runtime.clock
        bounded = call.policy.timeout is not None or call.policy.deadline is not None
        try:
            delay = run.open(first_result, first_error)
            while delay is not None:
                if delay > 0.0 or run.attempt:
                    if adapter is not None and run.result is not None:
                        disposed_from = clock.now()
                        adapter.discard_sync(run.result, delay, run.deadline_left())
                        delay = max(0.0, delay - (clock.now() - disposed_from))
                    scopes = run.sleep_scopes
                    if not waits_disabled():  # a blocking sleep dwarfs any frame saved here
                        clock.sleep_sync(delay)
                    scopes.exit()
                if not run.guarded:
                    run.attempt += 1
                elif not run.start_attempt():
                    break
                if adapter is not None:
                    adapter.before_attempt(run.attempt)
                try:
                    if not bounded:
                        result = attempt()
                    else:
                        # A blocking attempt cannot be cancelled: what can (the sync
                        # transports' sockets) ends by its limit.
                        with within(run.attempt_limit()):
                            result = attempt()
                    if type(result) in SUSPECT_RESULTS:
                        refuse_async_result(fn, result)
                except Exception as error:
                    delay = run.finish_attempt(None, error)
                else:
                    delay = run.finish_attempt(result, None)
        except Refused as refused:
            run.abort(refused.error)
            raise refused.error from None
        except BaseException as error:
            run.abort(error)
            raise
        return run.conclude()  # type: ignore[no-any-return]
