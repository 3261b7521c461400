"""The drivers of `Retrier`: `execute_async` / `execute_sync` and the plain-path test.

The async and sync drivers are deliberately thin loops around the same `CallRun` methods: run the
attempt, ask the run (which asks the pure `RetryPolicy.decide`) what follows, sleep, repeat.
`Retrier` builds on `Engine` and adds construction and the front doors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import TYPE_CHECKING, TypeVar

import anyio

from .._core.clock import async_waiter, waits_disabled
from .._core.events import BodyRead, CallStarted, Outcome
from .._core.instruments import NO_SCOPES, Dispatch, Hook, Scopes
from .._core.policy import RetryPolicy
from .callables import (
    SUSPECT_RESULTS,
    Refused,
    operation_name,
    refuse_async_result,
    refuse_unawaitable,
)
from .retrier_args import _NOT_GIVEN
from .run import AttemptAdapter, CallRun
from .runtime import Runtime, for_target
from .time_limits import within

if TYPE_CHECKING:
    from .._protect.budget import RetryBudget

__all__ = ["Engine", "Plain"]

T = TypeVar("T")

# How a call may run its first attempt: ``None``, on the full path (events, scopes, admission);
# ``()``, bare, with nothing to report; otherwise bare, then reported to these hooks of
# metrics-only instruments if it succeeds (`Instrument.first_attempt_succeeded`). A first
# attempt that fails goes on down the full path, which reports it as its first attempt.
Plain = tuple[Hook, ...] | None


class Engine:
    """A `Retrier`'s state and its drivers; `Retrier` sets every slot in its constructor."""

    __slots__ = (
        "_dispatch",
        "_full",
        "_funded",
        "_quiet",
        "_runtime",
        "policy",
    )

    policy: RetryPolicy
    _dispatch: Dispatch
    _full: tuple[Dispatch, Plain]  # the dispatch of every instrument, and its calls' `Plain`
    _funded: RetryBudget | None
    _quiet: tuple[Dispatch, Plain] | None  # the same without the idle instruments, if any
    _runtime: Runtime  # what every call reads: effects and protection

    def _current(self) -> tuple[Dispatch, Plain]:
        """The dispatch for a call starting now, and how its policy may run the first attempt."""
        quiet = self._quiet
        return self._full if quiet is None or self._dispatch.listening() else quiet

    def plain_first_attempt(self, policy: RetryPolicy) -> tuple[Dispatch, Plain]:
        """How a call under ``policy`` starting now may run its first attempt (`Plain`).

        Not ``None`` when no breaker or throttle admits attempts, the policy bounds no attempt
        in time, and every instrument that observes calls or attempts is satisfied with
        `Instrument.first_attempt_succeeded`. A front door that checks results itself (the
        httpx transport) then runs the first attempt directly: if it succeeds, it reports it
        with `report_first_success` (when hooks are returned); otherwise it hands it to
        `execute_async` / `execute_sync` through ``first_result`` / ``first_error`` and
        ``started``.
        """
        dispatch = self._current()[0]
        return dispatch, self._plain_hooks(policy, dispatch, transport=True)

    def _plain_hooks(
        self, policy: RetryPolicy, dispatch: Dispatch, *, transport: bool = False
    ) -> Plain:
        """How calls under ``policy`` run their first attempt: `Plain`."""
        # The plain path runs the first attempt with no bookkeeping at all; anything that must
        # observe or bound that first attempt sends calls down the full path instead.
        if (
            self._runtime.breaker is not None
            or self._runtime.throttle is not None
            or self._runtime.store is not None
            or policy.timeout is not None
            or policy.deadline is not None
            or (not transport and policy.retry_on is not None and policy.retry_on.uses_results)
        ):
            return None
        # A transport's attempt has its own scope (the CLIENT span), so no call scope will do.
        return dispatch.first_success_hooks(scoped=not transport)

    def report_first_success(
        self, hooks: tuple[Hook, ...], policy: str, target: str, started: float
    ) -> None:
        """Tell the instruments that a call's bare first attempt succeeded (never raises).

        ``hooks`` are the `Instrument.first_attempt_succeeded` hooks (what
        `plain_first_attempt` returned), ``started`` the clock's time when the attempt began.
        An instrument that raises is disabled, as in every hook.
        """
        runtime = self._runtime
        now = runtime.clock.now()
        budget_available = None
        if runtime.budget is not None and runtime.budget_gauge_due(now):
            # As on the full path: the gauge is refreshed at most once a second on success.
            budget = for_target(runtime.budget, target)
            if budget is not None:  # pragma: no branch - a PerTarget always gives one
                budget_available = budget.available()
        duration = now - started
        for guard, method in hooks:
            if guard.enabled:
                try:
                    method(policy, target, duration, budget_available)
                except Exception:
                    guard.fail("first_attempt_succeeded")

    def open_plain(
        self, dispatch: Dispatch, fn: Callable[..., object], operation: str | None
    ) -> tuple[float, Scopes, str | None]:
        """The start of a call's bare first attempt that instruments hear of: its time, the
        call scopes entered around it, and the operation's name if they needed it.

        Only instruments that set `Instrument.fast_path_call_scope` have such scopes
        (`Dispatch.fast_call_started`); with none, the scopes are `NO_SCOPES`. If the attempt
        fails, the scopes go to `execute_async` / `execute_sync` with ``plain_path``; if it
        raises past the retrier (cancellation), to `abandon_plain`.
        """
        started = self._runtime.clock.now()
        if not dispatch.fast_call_started:
            return started, NO_SCOPES, operation
        operation = operation or operation_name(fn)
        policy = self.policy
        event = CallStarted(
            policy=policy.name, target=operation, operation=operation, max_attempts=policy.attempts
        )
        return started, Dispatch.enter(dispatch.fast_call_started, event), operation

    def abandon_plain(
        self,
        dispatch: Dispatch,
        scopes: Scopes,
        error: BaseException,
        *,
        operation: str,
        since: int,
        started: float | None,
        policy: RetryPolicy | None = None,
        target: str | None = None,
        request: object = None,
    ) -> None:
        """A bare first attempt ended the call with what is never retried (cancellation,
        ``SystemExit``, a misuse refused): report its end as the full path would, and exit the
        scopes `open_plain` entered. The front door names the call as for `execute_async`."""
        run = CallRun(
            self._runtime,
            policy or self.policy,
            operation,
            target,
            None,
            request,
            since,
            started,
            (dispatch, scopes),
        )
        run.attempt = 1
        run.abort(error)

    def plain_body_ended(
        self,
        dispatch: Dispatch,
        hooks: tuple[Hook, ...],
        body: BodyRead,
        error: Exception | None,
        *,
        response: object,
        status: int | None,
        head_at: float,
        started: float,
        since: int,
        policy: RetryPolicy,
        operation: str,
        target: str,
        request: object,
    ) -> None:
        """The body of the response a bare first attempt returned ended (the HTTP fast path):
        the attempt lasted until then.

        Read or closed, it is the success `report_first_success` tells ``hooks``; cut or
        stalled (``error``), the attempt failed after all, and the call with it, reported as
        the full path reports them (`CallRun.body_ended`) to ``dispatch``, the dispatch the
        attempt ran under. ``head_at`` is the clock's time when the response's head came.
        """
        if error is None:
            self.report_first_success(hooks, policy.name, target, started)
            return
        run = CallRun(
            self._runtime,
            policy,
            operation,
            target,
            None,
            request,
            since,
            started,
            (dispatch, NO_SCOPES),
        )
        run.attempt = 1
        run.result, run.status = response, status
        outcome = Outcome(attempt=1, elapsed=head_at - started, result=response, status=status)
        run.pending = (outcome, False, head_at)
        run.body_ended(body, error)

    # -- drivers -------------------------------------------------------------------------------

    # One loop, like its sync twin, with a resumed call's store I/O awaited in place: split up,
    # the steps a call takes would no longer read in order.
    async def execute_async(  # noqa: PLR0915
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        operation: str,
        target: str | None = None,
        policy: RetryPolicy | None = None,
        adapter: AttemptAdapter | None = None,
        request: object = None,
        first_error: Exception | None = None,
        first_result: object = _NOT_GIVEN,
        since: int | None = None,
        started: float | None = None,
        plain_path: tuple[Dispatch, Scopes] | None = None,
    ) -> T:
        """Run ``attempt`` until the policy accepts an outcome or gives up (async driver).

        Front doors use this directly: ``target`` labels telemetry and keys the breaker
        (default: ``operation``), ``policy`` overrides the retrier's policy for one call,
        ``adapter`` refines outcomes, and ``first_error`` or ``first_result`` resumes a call
        whose first attempt already ran on the plain path (see `plain_first_attempt`), with
        ``since``, the `LAST_MARK` read before that attempt (retry at one layer), ``started``,
        the clock's time when it began (then reported as the call's first attempt), and
        ``plain_path``, the dispatch that attempt ran under and the call scopes entered around
        it (`open_plain`; `NO_SCOPES` when none).
        """
        run = CallRun(
            self._runtime,
            policy or self.policy,
            operation,
            target,
            adapter,
            request,
            since,
            started,
            (self._current()[0], NO_SCOPES) if plain_path is None else plain_path,
        )
        clock = self._runtime.clock
        bounded = run.policy.timeout is not None or run.policy.deadline is not None
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
                    if scopes is not NO_SCOPES:
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
                        refuse_unawaitable(attempt, awaitable)
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

    def execute_sync(
        self,
        attempt: Callable[[], T],
        *,
        operation: str,
        target: str | None = None,
        policy: RetryPolicy | None = None,
        adapter: AttemptAdapter | None = None,
        request: object = None,
        first_error: Exception | None = None,
        first_result: object = _NOT_GIVEN,
        since: int | None = None,
        started: float | None = None,
        plain_path: tuple[Dispatch, Scopes] | None = None,
    ) -> T:
        """Sync twin of `execute_async`: same `CallRun`, blocking sleeps; an attempt's time limit
        bounds what honours `within` (a blocking attempt cannot be cancelled)."""
        run = CallRun(
            self._runtime,
            policy or self.policy,
            operation,
            target,
            adapter,
            request,
            since,
            started,
            (self._current()[0], NO_SCOPES) if plain_path is None else plain_path,
        )
        clock = self._runtime.clock
        bounded = run.policy.timeout is not None or run.policy.deadline is not None
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
                    if scopes is not NO_SCOPES:
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
                        refuse_async_result(attempt, result)
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
