"""`Retrier`: construction, the front doors (`call`, `call_sync`, the decorator, `retry`) and
the engine's two doors they all go through (`Retrier.run_async`, `Retrier.run_sync`).

Every front door, the HTTP transports' included, describes its call (`Call`) and hands it to
the door of its colour. A door runs the first attempt bare when nothing needs to guard or
bound it (instruments hear of it through a `BareCall`), and otherwise, or once it failed,
drives the call: a thin loop around the same `CallRun` methods (run the attempt, ask the run,
which asks the pure `RetryPolicy` decision core, what follows, sleep, repeat). The argument
checks and protection listeners are in `retrier_args`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from random import Random
from types import CoroutineType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

import anyio

from .._core.clock import SYSTEM_CLOCK, Clock, async_waiter, waits_disabled
from .._core.errors import ConfigError
from .._core.instruments import Dispatch
from .._core.policy import RetryPolicy
from .._core.redact import safe_repr
from .._protect.budget import RetryBudget
from .._protect.hedge import Hedge
from .._protect.pacer import Pacer
from .._protect.targets import PerTarget
from . import hedging
from .bare import BareCall
from .call import Call
from .callables import (
    SUSPECT_RESULTS,
    Refused,
    async_result_error,
    bound_attempt,
    check_callable,
    check_decorated,
    is_async,
    refuse_async_result,
    refuse_unawaitable,
    sync_result_error,
)
from .layers import mark_time
from .retrier_args import (
    DEFAULT,
    NOT_GIVEN,
    Announcer,
    BreakerArg,
    BreakerEvents,
    BudgetArg,
    PacerArg,
    ThrottleArg,
    check_arguments,
    check_store,
    default_budget,
    sync_timeout_error,
)
from .run import CallRun
from .runtime import Runtime, for_target
from .time_limits import within

if TYPE_CHECKING:
    from ..stores import Store

__all__ = ["BreakerArg", "BudgetArg", "PacerArg", "Retrier", "ThrottleArg", "retry"]

P = ParamSpec("P")
T = TypeVar("T")


class Retrier:
    """Runs functions and coroutines under a `RetryPolicy`, with breaker, budget and telemetry.

    The breaker, budget and throttle given are used as they are, for every call: what their
    ``statistics()`` say is the truth, and listeners added later fire. A `PerTarget` of one
    gives each target (the operation name; the host for the httpx transports) its own.

    Args:
        policy: the policy; the default `RetryPolicy()` when omitted.
        breaker: a `CircuitBreaker` (one circuit for every call), a ``PerTarget`` of one, or
            ``None`` for no breaker.
        budget: the cross-call `RetryBudget` (or a ``PerTarget`` of one); a fresh one by
            default, ``None`` turns it off.
        throttle: an `AdaptiveThrottle` (or a ``PerTarget`` of one) shedding attempts with
            `LoadShedError` (outcome ``shed``, never retried); ``None`` (the default) for none.
        instruments: instruments receiving events; ``None`` for the process defaults (see
            `retrymw.set_default_instruments`), ``()`` for none.
        clock: where time is read and slept; the system clock by default.
        rng: the random source for jitter.
        store: a durable `retrymw.stores.Store` (``SQLiteStore``, ``RedisStore``): a call with a
            resume key (``with retrymw.resume(key):``) keeps its attempts and retry-budget
            expiry there and a later process goes on from them (docs/resume.md).
        fleet: a `retrymw.fleet.RedisFleet`: the breaker, budget, throttle and pacer become
            fleet-wide, per target, the budget's state named by the policy's name
            (docs/fleet.md); the default budget is then one per operation.
        hedge: a `Hedge`: an async call's attempt that has not answered after its delay gets
            extra concurrent copies, the first usable answer winning (docs/hedging.md); passing
            it promises the coroutines are idempotent. Synchronous calls are not hedged.
        pacer: a `Pacer` (or a ``PerTarget`` of one): every attempt waits for its slot before
            it is sent, within the call's deadline (past it: `PacedError`, outcome ``paced``),
            and the pacer learns from every answer (docs/pacing.md). ``None`` (the default)
            for none.

    Use ``await retrier.call(fn, *args, **kwargs)``, ``retrier.call_sync(fn, ...)``, or the
    instance as a decorator on async and sync functions.

    .. versionadded:: 0.1
    """

    __slots__ = ("_bare", "_dispatch", "_funded", "_quiet", "_runtime", "policy")

    policy: RetryPolicy
    _bare: bool  # whether calls under `policy` may run their first attempt bare (`_bare_policy`)
    _dispatch: Dispatch  # every instrument's hooks
    _quiet: Dispatch | None  # the same without the idle instruments, if any can be idle
    _funded: RetryBudget | None  # the one budget every call funds, when not per target
    _runtime: Runtime  # what every call reads: effects and protection

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        breaker: BreakerArg = None,
        budget: BudgetArg = DEFAULT,
        throttle: ThrottleArg = None,
        instruments: Any = None,
        clock: Clock | None = None,
        rng: Random | None = None,
        store: Store | None = None,
        fleet: Any = None,
        hedge: Hedge | None = None,
        pacer: PacerArg = None,
    ) -> None:
        check_arguments(policy, breaker, budget, throttle, instruments, clock, rng, pacer)
        if hedge is not None and not isinstance(hedge, Hedge):
            raise ConfigError("hedge", hedge, "must be a Hedge or None", 'Hedge(after="p95")')
        if store is not None:
            check_store(store)
        self.policy = policy if policy is not None else RetryPolicy()
        clock = clock if clock is not None else SYSTEM_CLOCK
        if budget is DEFAULT:
            # A fleet shares the default budget per operation: one target's retries are paid by
            # that target, never by another retrier's successes under the same policy name.
            budget = (
                default_budget(clock) if fleet is None else default_budget(clock, per_target=True)
            )
        self._runtime = Runtime(
            clock=clock,
            rng=rng if rng is not None else Random(),
            breaker=breaker,
            budget=budget,
            throttle=throttle,
            store=store,
            hedge=hedge,
            pacer=pacer,
        )
        # The plain success path funds one budget without a lookup (a PerTarget needs the target).
        self._funded: RetryBudget | None = budget if isinstance(budget, RetryBudget) else None
        if instruments is None:
            from ..instrumentation import default_instruments

            instruments = default_instruments()
        self._dispatch = Dispatch(instruments)
        self._bare = self._bare_policy(self.policy, judged=False)
        if breaker is not None and self._dispatch.breaker_state_changed:
            # The user's own breaker reports to this retrier's instruments; the same instruments
            # listen once however many retriers and transports share the breaker.
            breaker.add_listener(BreakerEvents(self._dispatch))
        if fleet is not None:
            for protection in (breaker, budget, throttle, pacer):
                if protection is not None:  # a budget's fleet key names its policy
                    fleet.attach(protection, owner=self.policy.name)
        self._announce()
        # Instruments that can be idle (OpenTelemetry without an SDK) are asked once per call;
        # while none listens, calls use this dispatch without them.
        self._quiet = self._dispatch.quiet()

    def _announce(self) -> None:
        """Announce the policy and protection to the instruments before any call (`Attached`).

        A shared instance is announced now (target ""); a `PerTarget`'s instances now for the
        targets it already has, and from then on as it creates them, so every series a
        dashboard needs exists before the first trip.
        """
        dispatch, name = self._dispatch, self.policy.name
        if not dispatch.attached:  # nobody listens: no listener left on a shared PerTarget
            return
        dispatch.attach(name, "", self.policy)
        runtime = self._runtime
        for protection in (runtime.breaker, runtime.budget, runtime.throttle, runtime.pacer):
            if isinstance(protection, PerTarget):
                # The listener first: a target created meanwhile is announced twice, never
                # missed (instruments tolerate a repeat).
                protection.add_creation_listener(Announcer(dispatch, name))
                for target in protection:
                    instance = protection.get(target)
                    if instance is not None:  # pragma: no branch - evicted meanwhile
                        dispatch.attach(name, target, instance)
            elif protection is not None:
                dispatch.attach(name, "", protection)

    @property
    def clock(self) -> Clock:
        """The clock this retrier reads and sleeps on."""
        return self._runtime.clock

    @property
    def hedge(self) -> Hedge | None:
        """The `Hedge` racing copies of slow async attempts, or ``None``."""
        return self._runtime.hedge

    @property
    def budget(self) -> BudgetArg:
        """The cross-call retry budget (or `PerTarget` of them) in use, or ``None``."""
        return self._runtime.budget

    @property
    def breaker(self) -> BreakerArg:
        """The circuit breaker (or `PerTarget` of them) given, itself, or ``None``."""
        return self._runtime.breaker

    @property
    def throttle(self) -> ThrottleArg:
        """The adaptive throttle (or `PerTarget` of them) given, itself, or ``None``."""
        return self._runtime.throttle

    @property
    def pacer(self) -> PacerArg:
        """The pacer (or `PerTarget` of them) given, itself, or ``None``."""
        return self._runtime.pacer

    @property
    def store(self) -> Store | None:
        """The store that resumes keyed calls across restarts, or ``None``."""
        return self._runtime.store

    def budget_for(self, target: str) -> RetryBudget | None:
        """The budget a call to ``target`` spends and funds (created for a new target)."""
        return for_target(self._runtime.budget, target)

    def __repr__(self) -> str:
        return f"<Retrier policy={self.policy.name!r} attempts={self.policy.attempts}>"

    # -- front doors ---------------------------------------------------------------------------

    def call_sync(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Call ``fn(*args, **kwargs)`` with retries, sleeping in the current thread.

        Raises:
            ConfigError: the policy has a per-attempt ``timeout``, which cannot interrupt a
                synchronous function.
            TypeError: ``fn`` is async or a generator function (refused when it returns its
                coroutine or generator, before the body runs, and never retried), or is not
                callable; the message names the right call.
        """
        if not callable(fn):
            check_callable(fn, "retrier.call_sync()")
        if self.policy.timeout is not None:
            raise sync_timeout_error(self.policy.timeout)
        return self.run_sync(fn, args, kwargs)

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, T]], /
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    @overload
    def __call__(self, fn: Callable[P, T], /) -> Callable[P, T]: ...

    def __call__(self, fn: Callable[P, Any], /) -> Callable[P, Any]:
        """Decorate ``fn``; a coroutine function stays a coroutine function.

        Raises:
            TypeError: ``fn`` is a generator or async generator function (its body runs while
                the caller iterates, out of the retrier's reach), or is not callable.
        """
        check_decorated(fn)
        run_async, run_sync = self.run_async, self.run_sync
        if is_async(fn):

            @functools.wraps(fn)
            async def retried_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                return await run_async(fn, args, kwargs)

            return retried_async

        if self.policy.timeout is not None:
            raise sync_timeout_error(self.policy.timeout)

        @functools.wraps(fn)
        def retried(*args: P.args, **kwargs: P.kwargs) -> Any:
            return run_sync(fn, args, kwargs)

        return retried

    def call(
        self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> Coroutine[Any, Any, T]:
        """Await ``fn(*args, **kwargs)`` with retries and return its result: ``await
        retrier.call(fn, ...)``.

        ``fn`` returns an awaitable: a coroutine function, or any callable returning one (a
        lambda, a partial). Misuse is refused with a `TypeError` that names the right call, and
        never retried: what is not callable, such as a coroutine object (``call(fetch())``),
        before anything runs; a generator function when it returns its generator, before its
        body runs; a synchronous function (use `call_sync`) at its first return.

        Raises:
            Exception: the last exception, with a note saying why retrying stopped.
            RetryBudgetExhausted: the policy's ``retry_budget`` ran out.
            CircuitOpenError: the breaker rejected the call before its first attempt.
            LoadShedError: the throttle shed an attempt (see `LoadShedError`).
            TypeError: ``fn`` cannot be retried by ``call`` (see above).
        """
        # The engine's coroutine is the call itself: no frame in front of it.
        return self.run_async(fn, args, kwargs)

    # -- the engine's doors, and the loops that drive a call ---------------------------------

    def _current(self) -> Dispatch:
        """The dispatch of a call starting now: without the instruments idle at the moment."""
        quiet = self._quiet
        return self._dispatch if quiet is None or self._dispatch.listening() else quiet

    def dispatch_now(self) -> Dispatch:
        """The instruments' hooks for what starts now (a request along its failover origins):
        `_current`."""
        return self._current()

    def _runs_bare(self, call: Call, dispatch: Dispatch) -> bool:
        """Whether ``call``'s first attempt may run outside a `CallRun` (`_bare_policy`); an
        observed HTTP attempt never does: it lasts until its body ends, which only a `CallRun`
        follows."""
        if call.adapter is not None:
            return not dispatch.observes_calls and self._bare_policy(call.policy, judged=True)
        return self._bare_policy(call.policy, judged=False)

    def _bare_policy(self, policy: RetryPolicy, *, judged: bool) -> bool:
        """Whether a call under ``policy`` may run its first attempt bare, as far as protection
        and the policy go.

        No breaker or throttle admits attempts, no store resumes calls, no hedge times them,
        the policy bounds no attempt in time, and the outcome needs no judging beyond "it
        raised": a result is judged only by a matcher that reads results, unless the front
        door ``judged`` it (`AttemptAdapter.settles`). A pacer is asked per call
        (`_sends_at_once`). Instruments hear of a bare first attempt as of any other, their
        scopes around it (`BareCall`).
        """
        if self._runtime.guards_calls:
            return False
        if policy.timeout is not None or policy.deadline is not None:
            return False
        return judged or policy.retry_on is None or not policy.retry_on.uses_results

    def _call_of(self, fn: Callable[..., Any], call: Call | None) -> Call:
        """``call``, or the call of ``fn`` under this retrier's policy, named after ``fn``."""
        return call if call is not None else Call.of(fn, self.policy)

    def _settle_protection(
        self, fn: Callable[..., Any], call: Call | None, result: object
    ) -> RetryBudget | None:
        """A call succeeded at its bare first attempt: it funds its target's budget (returned),
        and an idle pacer hears what its answer says (`PacerTeacher`)."""
        if self._runtime.pacer is not None:
            pacer = self._pacer_for(fn, call)
            teach = getattr(None if call is None else call.adapter, "teach", None)
            if pacer is not None and teach is not None:
                teach(pacer, result, self._runtime.clock.now())
        funded = self._funded
        if funded is None and self._runtime.budget is not None:
            funded = for_target(self._runtime.budget, self._call_of(fn, call).target)
        if funded is not None:
            funded.record_success()
        return funded

    def _pacer_for(self, fn: Callable[..., Any], call: Call | None) -> Pacer | None:
        """The pacer governing ``call``'s target, if any (a `PerTarget` needs the target)."""
        pacer = self._runtime.pacer
        if isinstance(pacer, PerTarget):
            return pacer.for_target(self._call_of(fn, call).target)
        return pacer

    def _sends_at_once(self, fn: Callable[..., Any], call: Call | None) -> bool:
        """Whether the pacer, if any, lets a bare first attempt go now: it paces and holds
        nothing, and counts the send (`Pacer.send_at_once`). Otherwise the full path reserves
        the attempt's slot."""
        pacer = self._pacer_for(fn, call)
        return pacer is None or pacer.send_at_once(self._runtime.clock.now())

    def _observed(
        self, fn: Callable[..., Any], call: Call | None, dispatch: Dispatch, door: str
    ) -> BareCall:
        """The call about to run its first attempt bare, as the instruments that hear of calls
        (`Dispatch.observes_calls`) will hear of it (`BareCall.begin`, inside the attempt's
        ``try``: an interruption there leaves what it entered). What is not callable is refused
        first, as on the full path: nothing heard of it."""
        if not callable(fn):
            check_callable(fn, door)
        return BareCall(self._runtime, self._call_of(fn, call), dispatch)

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
        paced = self._runtime.pacer is not None  # a pacer may still send it bare
        if not bare or (paced and not self._sends_at_once(fn, call)):
            if not callable(fn):  # a driver would call it, and retry Python's TypeError
                check_callable(fn, "retrier.call()")
            return await self._drive_async(fn, args, kwargs, self._call_of(fn, call), dispatch)
        since = mark_time()  # a mark later than this was made inside this call
        observed = (
            self._observed(fn, call, dispatch, "retrier.call()")
            if dispatch.observes_calls
            else None
        )
        awaitable: Any = NOT_GIVEN
        try:
            if observed is not None:
                observed.begin()
            awaitable = fn(*args, **kwargs)
            result = await awaitable
        except Exception as error:
            first = error
        except BaseException as error:  # cancelled or interrupted: told, never retried
            if observed is not None:
                observed.abort(error)
            raise
        else:
            adapter = None if call is None else call.adapter
            if adapter is None or adapter.settles(result):
                budget = self._settle_protection(fn, call, result)
                if observed is not None:
                    observed.settled(result, budget)
                return result if adapter is None else adapter.returned(result, None)  # type: ignore[return-value]
            return await self._drive_async(
                fn,
                args,
                kwargs,
                self._call_of(fn, call),
                dispatch,
                since,
                observed,
                first_result=result,
            )
        # Misuse is told apart only once something failed, off the success path: ``fn`` not
        # callable, or what it returned not awaitable. Refused, never retried.
        if isinstance(first, TypeError):
            if not callable(fn):
                check_callable(fn, "retrier.call()")  # not observed: nobody heard of it
            if awaitable is not NOT_GIVEN and not hasattr(awaitable, "__await__"):
                refusal = sync_result_error(fn, awaitable)
                if observed is not None:
                    observed.abort(refusal)
                raise refusal from None
        # Outside the except block: the retries' exceptions must not carry the first one as
        # their __context__ ("During handling of the above exception...").
        resumed = self._drive_async(
            fn,
            args,
            kwargs,
            self._call_of(fn, call),
            dispatch,
            since,
            observed,
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
        paced = self._runtime.pacer is not None  # a pacer may still send it bare
        if not bare or (paced and not self._sends_at_once(fn, call)):
            return self._drive_sync(fn, args, kwargs, self._call_of(fn, call), dispatch)
        since = mark_time()
        observed = (
            self._observed(fn, call, dispatch, "retrier.call_sync()")
            if dispatch.observes_calls
            else None
        )
        first: Exception | None = None
        try:
            if observed is not None:
                observed.begin()
            result = fn(*args, **kwargs)
        except Exception as error:
            first = error
        except BaseException as error:  # interrupted: told, never retried, as in `run_async`
            if observed is not None:
                observed.abort(error)
            raise
        if first is not None:
            try:  # outside the except block, as in `run_async`: no accidental chaining
                return self._drive_sync(
                    fn,
                    args,
                    kwargs,
                    self._call_of(fn, call),
                    dispatch,
                    since,
                    observed,
                    first_error=first,
                )
            finally:
                first = None  # no reference cycle through this frame, as in `run_async`
        if type(result) in SUSPECT_RESULTS:
            refusal = async_result_error(fn, result)
            if refusal is not None:
                if observed is not None:
                    observed.abort(refusal)
                raise refusal  # never retried
        adapter = None if call is None else call.adapter
        if adapter is None or adapter.settles(result):
            budget = self._settle_protection(fn, call, result)
            if observed is not None:
                observed.settled(result, budget)
            return result if adapter is None else adapter.returned(result, None)  # type: ignore[return-value]
        return self._drive_sync(
            fn,
            args,
            kwargs,
            self._call_of(fn, call),
            dispatch,
            since,
            observed,
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
        bare: BareCall | None = None,
        *,
        first_error: Exception | None = None,
        first_result: object = NOT_GIVEN,
    ) -> T:
        """Drive ``call`` (async): from its start, or on from its bare first attempt's outcome
        (``first_error`` or ``first_result``, with ``since`` read before that attempt and
        the `BareCall` the instruments heard of it as, if any)."""
        attempt = bound_attempt(fn, args, kwargs)
        run = CallRun(self._runtime, call, dispatch, since, bare)
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
                    if bounded and run.out_of_time():
                        break
                if not run.guarded:
                    run.attempt += 1
                else:
                    if run.pacer is not None:
                        slot = run.pace()
                        while slot:  # the slot, then what the pacer holds when it is due
                            waiter = async_waiter(clock)  # cancellable; the slot is spent
                            if waiter is not None:
                                await waiter(slot)
                            slot = run.pace()
                        if slot is None:
                            break
                    if resume is not None:
                        await resume.claim_async(run)
                    if not run.start_attempt():
                        break
                if adapter is not None:
                    adapter.before_attempt(run.attempt)
                awaitable: Awaitable[Any]
                try:
                    if run.hedge is not None:
                        # The copies' race is the attempt, bounded as one (`hedging`).
                        awaitable = hedging.race(run, run.hedge, attempt, fn)
                    else:
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

    def _drive_sync(  # noqa: PLR0915 - one loop, as its async twin
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        call: Call,
        dispatch: Dispatch,
        since: int | None = None,
        bare: BareCall | None = None,
        *,
        first_error: Exception | None = None,
        first_result: object = NOT_GIVEN,
    ) -> T:
        """Sync twin of `_drive_async`."""
        attempt = bound_attempt(fn, args, kwargs)
        run = CallRun(self._runtime, call, dispatch, since, bare)
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
                    if bounded and run.out_of_time():
                        break
                if not run.guarded:
                    run.attempt += 1
                else:
                    if run.pacer is not None:
                        slot = run.pace()
                        while slot:  # the slot, then what the pacer holds when it is due
                            if not waits_disabled():
                                clock.sleep_sync(slot)
                            slot = run.pace()
                        if slot is None:
                            break
                    if not run.start_attempt():
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


@overload
def retry(fn: Callable[P, T], /) -> Callable[P, T]: ...


@overload
def retry(
    *,
    breaker: BreakerArg = None,
    budget: BudgetArg = DEFAULT,
    throttle: ThrottleArg = None,
    instruments: Any = None,
    clock: Clock | None = None,
    **policy_fields: Any,
) -> Retrier: ...


def retry(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    breaker: BreakerArg = None,
    budget: BudgetArg = DEFAULT,
    throttle: ThrottleArg = None,
    instruments: Any = None,
    clock: Clock | None = None,
    **policy_fields: Any,
) -> Any:
    """Shorthand decorator: ``@retry(attempts=5, retry_on=["timeout"])``, or bare ``@retry``.

    Policy fields go to `RetryPolicy`; ``breaker``, ``budget``, ``throttle``, ``instruments``
    and ``clock`` go to `Retrier`. Bare ``@retry`` is ``@retry()``: the default policy.

    Raises:
        TypeError: the positional argument is not a function (policy fields are keywords, and
            a `RetryPolicy` goes to `Retrier`), or cannot be retried (see `Retrier.__call__`).

    .. versionadded:: 0.1
    """
    if fn is not None and not callable(fn):
        hint = (
            "for a RetryPolicy use Retrier(policy)"
            if isinstance(fn, RetryPolicy)
            else "policy fields are keywords, as in @retry(attempts=5)"
        )
        raise TypeError(f"retry() decorates a function, got {safe_repr(fn, 80)}; {hint}")
    retrier = Retrier(
        RetryPolicy(**policy_fields),
        breaker=breaker,
        budget=budget,
        throttle=throttle,
        instruments=instruments,
        clock=clock,
    )
    return retrier if fn is None else retrier(fn)
