"""`CallRun`: one call's state and bookkeeping, shared by the async and sync drivers.

The drivers (`Retrier._drive_async`, `_drive_sync`) only execute attempts and sleep;
everything a call records between them (breaker verdicts, budget tokens, the final value or
exception) happens here, the events for the instruments are built in `reports`, and every
decision is delegated to the pure `RetryPolicy.next_step`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core.errors import CircuitOpenError, LoadShedError, PacedError
from .._core.events import (
    OVERLOAD_STATUSES,
    BodyRead,
    CallOutcome,
    Outcome,
    RetryReason,
)
from .._core.instruments import NO_SCOPES, Dispatch, Scopes
from .._core.matchers import status_of
from .._core.policy import CallState
from .._protect.pacer import Booking
from . import reports
from .call import Call
from .endings import OUTCOME_OF_REASON, OUTCOME_OF_REFUSAL, ending_error, mark_final
from .layers import FINAL_REASONS, mark_time, retried_below
from .resume import ResumableRun
from .retrier_args import NOT_GIVEN
from .runtime import AttemptAdapter, Runtime, for_target

if TYPE_CHECKING:
    from .bare import BareCall

__all__ = [
    "ATTEMPT_ROOM_SHARE",
    "SHORTEST_PACED_WAIT",
    "AttemptAdapter",
    "CallRun",
    "Runtime",
    "for_target",
]

#: A pacer's wait shorter than this (seconds) is not slept: a sleep costs about as long.
SHORTEST_PACED_WAIT = 0.001
#: A pacer's slot must leave the attempt this share of what the deadline leaves (or its
#: per-attempt timeout, when that is less): a slot just before the deadline would spend the
#: wait and the slot on an attempt that then times out.
ATTEMPT_ROOM_SHARE = 0.25


class CallRun(CallState):
    """One call's state and bookkeeping; every decision is delegated to `RetryPolicy.decide`.

    It is the call's `CallState` itself (attempt, start, delays so far), handed to the policy
    as it is: no second object per call.
    """

    __slots__ = (
        "adapter",
        "admitted",
        "attempt_scopes",
        "attempt_started_at",
        "body",
        "booking",
        "breaker",
        "budget",
        "call_scopes",
        "dispatch",
        "error",
        "guarded",
        "hedge",
        "operation",
        "outcome",
        "paced_for",
        "pacer",
        "pending",
        "policy",
        "reason",
        "request",
        "result",
        "resume",
        "retry_admitted",
        "runtime",
        "since",
        "sleep_scopes",
        "status",
        "target",
        "throttle",
        "times_instruments",
        "withholds",
    )

    def __init__(
        self,
        runtime: Runtime,
        call: Call,
        dispatch: Dispatch,
        since: int | None,
        bare: BareCall | None = None,
    ) -> None:
        self.runtime = runtime
        self.policy = call.policy
        self.operation = call.operation
        self.target = call.target
        self.adapter = call.adapter
        self.request = call.request
        self.dispatch = dispatch
        self.attempt = 0
        if bare is None:
            self.started_at = self.attempt_started_at = runtime.clock.now()
            self.call_scopes = self.attempt_scopes = NO_SCOPES
        else:
            # A call going on from its bare first attempt started before that attempt, and
            # its instruments' scopes stay open around it.
            self.started_at, self.attempt_started_at = bare.started_at, bare.attempt_started_at
            self.call_scopes, self.attempt_scopes = bare.call_scopes, bare.attempt_scopes
        self.delay_so_far = 0.0
        self.last_delay: float | None = None
        self.instrument_time = 0.0
        # Only a deadline reads `instrument_time` (it does not count the instruments' time):
        # without one, the hooks are not timed.
        self.times_instruments = self.policy.deadline is not None
        # The instances that govern this call's target, resolved once: the very objects the
        # user gave, or their PerTarget's for this target.
        breaker, budget, throttle = runtime.breaker, runtime.budget, runtime.throttle
        self.breaker = breaker if breaker is None else for_target(breaker, self.target)
        self.budget = budget if budget is None else for_target(budget, self.target)
        self.throttle = throttle if throttle is None else for_target(throttle, self.target)
        # Hedged: a coroutine whenever the retrier hedges (its user vouched for it), an HTTP
        # request when its adapter says it may be sent twice at once (idempotent, replayable).
        hedge = runtime.hedge
        if hedge is not None and self.adapter is not None:
            hedge = hedge if getattr(self.adapter, "hedgeable", False) else None
        self.hedge = hedge
        pacer = runtime.pacer
        self.pacer = pacer if pacer is None else for_target(pacer, self.target)
        self.paced_for: float | None = None  # the last attempt's wait for its slot
        self.booking: Booking | None = None  # the next attempt's way to its slot (`pace`)
        self.admitted = False
        # The throttle admitted the next attempt when its retry was scheduled (`_withheld`).
        self.retry_admitted = False
        self.sleep_scopes = NO_SCOPES
        self.result: object = None
        self.error: Exception | None = None
        self.status: int | None = None
        self.outcome: CallOutcome = "success"
        self.reason: RetryReason | None = None
        # The last attempt's report, held while the body of the response the call returns is
        # read (`_follows_body`), and how that body was read (`body_ended`).
        self.pending: tuple[Outcome, bool, float] | None = None
        self.body: BodyRead | None = None
        store = runtime.store
        # Its store I/O is bounded by what the deadline leaves (`deadline_left`).
        self.resume = (
            None
            if store is None
            else ResumableRun.open(store, self.policy, runtime.clock, self.deadline_left)
        )
        # Whether a retry the policy grants may yet be withheld (`_withheld`): by protection,
        # the store, or a layer below that already retried.
        self.withholds = (
            runtime.gates_retries or self.resume is not None or not self.policy.retry_below
        )
        # Whether an attempt needs `start_attempt` (admission, a pacer's slot, a resume claim,
        # an instrument timing it): when not, the drivers only count it.
        self.guarded = (
            runtime.admits_attempts
            or self.pacer is not None
            or self.resume is not None
            or self.dispatch.times_attempts
        )
        # Marks made after this (layers.retried_below) were made by calls nested in this one;
        # a call going on from its bare first attempt read it before that attempt.
        self.since = mark_time() if since is None else since

    # -- steps, in the order the drivers call them ---------------------------------------------

    def begin(self) -> None:
        """Announce the call and enter the instruments' call scopes."""
        hooks = self.dispatch.call_started
        if hooks:
            reported_from = self._instruments_from()
            self.call_scopes = reports.call_started(self, hooks)
            self._instruments_took(reported_from)

    def open(self, result: object, error: Exception | None) -> float | None:
        """Start the call; return the delay before the next attempt, or None if it is over.

        A call resumed from the plain path (``result`` or ``error`` given, not `NOT_GIVEN`)
        already ran its first attempt: it goes on from that attempt's outcome, under the
        dispatch and call scopes it was given, rather than reporting half a call.
        """
        if error is None and result is NOT_GIVEN:
            self.begin()
            return 0.0 if self.resume is None else self._resume()
        self.attempt = 1
        if self.pacer is not None:
            self.paced_for = 0.0  # its pacer paced nothing: it was sent at once
        return self.finish_attempt(None if error is not None else result, error)

    def pace(self) -> float | None:
        """The wait before the next attempt may be sent; the driver sleeps it and asks again
        until it is 0.0 (send now).

        The pacer reserves the attempt's slot, then confirms it when it comes due (`Booking`):
        a hold heard meanwhile, or sends bunched by a stall of this process, wait more.
        ``None`` ends the call: the slot lies past the deadline, so the call fails at once
        with `PacedError` (outcome ``paced`` before any attempt), never late.
        """
        pacer = self.pacer
        assert pacer is not None
        booking = self.booking
        if booking is None:
            booking = self.booking = Booking(pacer, pacer.cost_of(self.request))
        now = self.runtime.clock.now()
        left = self.deadline_left()
        room = 0.0 if left is None else self.attempt_room(left)
        within = None if left is None else left - room
        slot = booking.next_wait(now, within)
        # A sleep costs about as long as a wait shorter than this: the send goes early by less
        # than it, and the pacer's schedule is kept.
        while slot.granted and 0.0 < slot.wait < SHORTEST_PACED_WAIT:
            slot = booking.next_wait(now, within)
        if not slot.granted:
            self.booking = None
            assert left is not None
            error = PacedError(pacer.name, wait=slot.wait, deadline_left=left, room=room)
            self._refuse("paced", error)
            return None
        self.paced_for = booking.waited
        if slot.wait == 0.0:
            self.booking = None
        return slot.wait

    def attempt_room(self, left: float) -> float:
        """The time a paced attempt must have after its slot, of ``left`` to the deadline.

        `ATTEMPT_ROOM_SHARE` of it, or the per-attempt ``timeout`` when that is less: an
        attempt needs no more than its timeout.
        """
        share = ATTEMPT_ROOM_SHARE * max(left, 0.0)
        timeout = self.policy.timeout
        return share if timeout is None else min(timeout, share)

    def start_attempt(self) -> bool:
        """Ask the breaker, then the throttle, for admission and open the attempt.

        False ends the call: before any attempt, or after the last result was disposed of,
        with `CircuitOpenError` or `LoadShedError`; otherwise with the last outcome.
        """
        if self.resume is not None:
            # Claimed first: an attempt a breaker then refuses ends the call, record and all.
            number = self.resume.claim(self)
            if number is None or number > self.policy.attempts:
                # Other processes took the last attempts, or ended the call (or, the store
                # failing, this process's own count is used up).
                self._exhausted("max_attempts")
                return False
            self.attempt = number - 1
        breaker, throttle = self.breaker, self.throttle
        if breaker is not None or throttle is not None:
            ahead, self.retry_admitted = self.retry_admitted, False
            if breaker is not None and not breaker.allow_request():
                if ahead and throttle is not None:
                    throttle.release()  # the retry the throttle admitted is not made
                self._refuse(
                    "circuit_open", CircuitOpenError(breaker.name, retry_in=breaker.retry_in())
                )
                return False
            if throttle is not None and not ahead and not throttle.allow_request():
                if breaker is not None:
                    breaker.release()  # a half-open probe slot goes back unused
                probability = throttle.reject_probability()
                self._refuse("shed", LoadShedError(throttle.name, reject_probability=probability))
                return False
            self.admitted = True
        self.attempt += 1
        hooks = self.dispatch.attempt_started
        if hooks:
            self.attempt_started_at = self.runtime.clock.now()
            self.attempt_scopes = reports.attempt_started(self, hooks)
            self._instruments_took(self.attempt_started_at)
        elif self.dispatch.attempt_finished:
            self.attempt_started_at = self.runtime.clock.now()
        return True

    def attempt_limit(self) -> float | None:
        """The time this attempt may take: the per-attempt timeout, cut by the deadline."""
        policy = self.policy
        if policy.deadline is None:
            return policy.timeout
        return policy.attempt_limit(self.elapsed(self.runtime.clock.now()))

    def out_of_time(self) -> bool:
        """Whether the deadline passed while the call waited for its next attempt: the wait
        overran it (the process stalled, a disposal or a hook took long). The call then ends as
        when the policy sees that a retry would start past the deadline (reason
        ``deadline_exceeded``), and the attempt never starts late."""
        left = self.deadline_left()
        if left is None or left > 0.0:
            return False
        if self.resume is not None and not self._ran_here():
            # A resumed call that ran nothing here stops as one whose stored wait would cross
            # its deadline (`ResumableRun.load`): `ResumeExhausted`, the record kept.
            self.resume.leave_record()
            self._exhausted("deadline_exceeded")
            return True
        late = f"the policy's deadline ({self.policy.deadline:g}s) passed before the next attempt"
        self._refuse("deadline_exceeded", TimeoutError(late))
        return True

    def deadline_left(self) -> float | None:
        """The time the policy's ``deadline`` leaves the call now, or ``None`` without one."""
        deadline = self.policy.deadline
        if deadline is None:
            return None
        return deadline - self.elapsed(self.runtime.clock.now())

    def _copy_outcome(self, result: object, error: Exception | None) -> Outcome:
        """The `Outcome` of one copy's answer of a hedged attempt."""
        adapter = self.adapter
        if adapter is not None:
            return adapter.outcome(self.attempt, 0.0, result, error)
        answer = error if error is not None else result
        return Outcome(
            attempt=self.attempt, exception=error, result=result, status=status_of(answer)
        )

    def usable(self, result: object, error: Exception | None) -> bool:
        """Whether one copy's answer of a hedged attempt wins its race: the policy would not
        retry it (`hedging`)."""
        return not self.policy.matches(self._copy_outcome(result, error))

    def admits_hedge(self) -> bool:
        """Whether an extra copy of the attempt may be sent now: the circuit is closed, the
        throttle sheds nothing, the pacer has a slot for it now (a copy exists to save time: it
        never waits for one), the throttle admits it (it counts each copy sent), and the retry
        budget pays for it as for a retry.

        A slot cannot be given back, so the pacer books one only once a shedding throttle or an
        open circuit had its say; a budget that then refuses the copy leaves that slot unused.
        """
        breaker, throttle, budget, pacer = self.breaker, self.throttle, self.budget, self.pacer
        if breaker is not None and breaker.state != "closed":
            return False
        if throttle is not None and throttle.reject_probability() > 0.0:
            return False
        if pacer is not None:
            now = self.runtime.clock.now()
            if not pacer.reserve(now, pacer.cost_of(self.request), within=0.0).granted:
                return False
        if throttle is not None and not throttle.allow_request():
            return False
        if budget is None or budget.try_acquire():
            return True
        if throttle is not None:
            throttle.release()  # admitted, never sent
        return False

    def hedge_failed(self, result: object, error: Exception | None) -> None:
        """A copy's failed answer that another copy's answer replaced: a failure for the
        breaker and the throttle, as the copy was sent. (The answer the attempt ends with gets
        its verdict as any attempt's; a copy cancelled unanswered gets none.) The pacer hears
        it too: a copy's 429 says as much about the limit as any answer."""
        judged = self.breaker is not None or self.throttle is not None
        if not judged and self.pacer is None:
            return
        outcome = self._copy_outcome(result, error)
        if self.pacer is not None:
            self._teach_pacer(outcome, self.runtime.clock.now())
        if judged:
            self._report_verdict(True, outcome)

    def hedge_started(self) -> Scopes:
        """Announce an extra copy of the attempt under way; its scopes wrap the copy."""
        hooks = self.dispatch.attempt_started
        return reports.attempt_started(self, hooks, hedge=True) if hooks else NO_SCOPES

    def hedge_finished(
        self,
        scopes: Scopes,
        started_at: float,
        won: bool,
        failure: str | None,
        error: Exception | None,
    ) -> None:
        """Report how an extra copy started at ``started_at`` ended (`reports.hedge_finished`)."""
        hooks = self.dispatch.attempt_finished
        if hooks:
            duration = self.runtime.clock.now() - started_at
            reports.hedge_finished(self, hooks, duration, won, failure, error)
        scopes.exit()

    async def dispose(self, result: object) -> None:
        """Dispose of a hedged copy's result that will not be the attempt's (a response is
        drained briefly and closed); ``None`` is nothing to dispose of."""
        if result is not None and self.adapter is not None:
            await self.adapter.discard(result, 0.0, self.deadline_left())

    def finish_attempt(self, result: object, error: Exception | None) -> float | None:
        """Record the attempt's outcome; return the delay before the next one, or None."""
        policy = self.policy
        now = self.runtime.clock.now()
        adapter = self.adapter
        if adapter is not None:
            outcome = adapter.outcome(self.attempt, now - self.started_at, result, error)
            status = outcome.status
        else:
            # An exception's status is for matchers and telemetry: the implicit "any exception"
            # rule with nobody listening never reads it.
            matcher = policy.retry_on
            if error is not None:
                wanted = matcher is not None or self.dispatch.observes_outcomes
                status = status_of(error) if wanted else None
            else:
                wanted = matcher is not None and matcher.uses_results
                status = status_of(result) if wanted else None
            outcome = Outcome(
                attempt=self.attempt,
                elapsed=now - self.started_at,
                exception=error,
                result=result,
                status=status,
            )
        self.result, self.error, self.status = result, error, status
        if self.pacer is not None:
            self._teach_pacer(outcome, now)
        # A delay for a retry, a reason for a give-up, neither when the outcome is accepted.
        step = policy.next_step(self, outcome, now, self.runtime.rng)
        matched = step is not None
        if self.admitted:
            self.admitted = False
            self._report_verdict(matched, outcome)
        delay: float | None = None
        reason: RetryReason | None = None
        if isinstance(step, str):
            reason = step
        elif step is not None:
            delay = step
            if self.withholds:
                reason = self._withheld(step, outcome)
                if reason is not None:
                    delay = None
        if delay is not None:
            self.delay_so_far += delay
            self.last_delay = delay
            if self.resume is not None:
                self.resume.add_failure(delay)
            self.sleep_scopes = NO_SCOPES  # the wait's own, if an instrument opens any
        elif reason is None:
            self.outcome = "success" if error is None else "failure"
        else:
            self.reason = reason
            self.outcome = OUTCOME_OF_REASON[reason]
        if self.dispatch.reports_attempts or self.attempt_scopes is not NO_SCOPES:
            if (
                delay is None
                and error is None
                and adapter is not None
                and self._follows_body(result)
            ):
                # The attempt lasts until the returned response's body ends.
                self.pending = (outcome, matched, now)
            else:
                self._report_attempt(outcome, now, matched, delay)
        return delay

    def _hand_on(self) -> None:
        """The call gave up: if its front door sends the request on to another origin (HTTP
        failover, `HandsOn`), its outcome is ``failover``, not a failure the caller sees."""
        hands_on = getattr(self.adapter, "hands_on", None)  # optional: `HandsOn`
        if hands_on is not None and hands_on(self.result, self.error):
            self.outcome = "failover"

    def _follows_body(self, result: object) -> bool:
        """Whether the front door reports the end of ``result``'s body to `body_ended`."""
        follow = getattr(self.adapter, "follow_body", None)  # optional: `BodyFollower`
        return follow is not None and bool(follow(result, self.body_ended))

    def _report_attempt(
        self, outcome: Outcome, now: float, matched: bool, delay: float | None
    ) -> None:
        """Tell the instruments how the attempt ended and what follows: a wait or a denial.

        The time their hooks take is the instruments' own (`CallState.instrument_time`).
        """
        reported_from = self._instruments_from()
        dispatch = self.dispatch
        hooks = dispatch.attempt_finished
        if hooks:
            reports.attempt_finished(self, hooks, outcome, now, matched, delay is not None)
        if self.attempt_scopes is not NO_SCOPES:
            self.attempt_scopes.exit()
            self.attempt_scopes = NO_SCOPES
        if delay is not None:
            hooks = dispatch.retry_scheduled
            if hooks:
                self.sleep_scopes = reports.retry_scheduled(self, hooks, outcome, delay)
        elif self.reason is not None and dispatch.retry_denied:
            reports.retry_denied(self, dispatch.retry_denied, self.reason, outcome)
        self._instruments_took(reported_from)

    def conclude(self) -> Any:
        """Finish the call: emit its end, then return the value or raise, per the policy."""
        if self.resume is not None:
            self.resume.finish(ended=True)
        error = self.error
        if error is None and self.outcome == "success" and self.budget is not None:
            self.budget.record_success()
        if self.reason is not None:
            self._hand_on()
        hooks = self.dispatch.call_finished
        if self.pending is not None:
            # Reported when the body ends (`body_ended`); what the scopes made current must not
            # stay current in the caller's code meanwhile.
            self.attempt_scopes.suspend()
            self.call_scopes.suspend()
        elif hooks or self.call_scopes is not NO_SCOPES:
            reported_from = self._instruments_from()
            if hooks:
                reports.call_finished(self, hooks, error)
            if self.call_scopes is not NO_SCOPES:
                self.call_scopes.exit()
            self._instruments_took(reported_from)
        reason = self.reason
        # Retry at one layer: a call that retried, or whose retry was refused by the server or
        # by protection, hands on a final outcome; one that ran once by its policy does not.
        final = reason is not None and (
            self.attempt > 1 or (self.attempt == 1 and reason in FINAL_REASONS)
        )
        if final:
            mark_final(self.result if error is None else error)
        if error is None:
            adapter = self.adapter
            return (
                self.result
                if adapter is None
                else adapter.returned(self.result, self.deadline_left())
            )
        if self.reason is None:
            raise error
        policy = self.policy
        last = error  # what a fallback receives, whatever is raised
        error = ending_error(policy, self, self.reason, error)
        if final and error is not last:
            mark_final(error)
        if policy.on_failure == "continue":
            return None
        if policy.on_failure == "fallback" and policy.fallback is not None:
            return policy.fallback(last)
        raise error

    def body_ended(self, body: BodyRead, error: Exception | None) -> None:
        """The returned response's body was read or closed: report its attempt and the call.

        Called once by the body (`BodyFollower.follow_body`), in whatever task or thread read
        it, never raising (instruments are guarded). A body cut or stalled (``error``) makes
        the attempt ``failed`` and a successful call a ``failure``: the caller saw the error.
        """
        pending, self.pending = self.pending, None
        if pending is None:
            return
        outcome, matched, head_at = pending
        now = self.runtime.clock.now()
        first = body.time_to_first_byte
        # The body's first byte came ``first`` seconds after the head, which came when the
        # attempt's outcome was decided.
        self.body = body._replace(
            time_to_first_byte=None if first is None else head_at - self.attempt_started_at + first
        )
        if error is not None:
            outcome = outcome._replace(exception=error)
            self.error = error
            if self.outcome == "success":
                self.outcome = "failure"
        self.call_scopes.resume()
        self.attempt_scopes.resume()
        self._report_attempt(outcome, now, matched, None)
        hooks = self.dispatch.call_finished
        if hooks:
            reports.call_finished(self, hooks, error)
        self.call_scopes.exit()

    def abort(self, error: BaseException) -> None:
        """The call ends by an error outside the attempts: close everything; the caller re-raises.

        Cancellation, ``KeyboardInterrupt`` and ``SystemExit`` are ``cancelled``; anything else
        (a ``retry_on`` predicate or a fallback that raised) is a ``failure``. A cancelled
        call keeps its resume record: the next process goes on from it.
        """
        if self.resume is not None:
            self.resume.finish(ended=isinstance(error, Exception))
        if self.admitted:
            self.admitted = False
            for guard in (self.breaker, self.throttle):
                if guard is not None:
                    guard.release()
        if self.retry_admitted and self.throttle is not None:  # cancelled during the wait
            self.retry_admitted = False
            self.throttle.release()
        if self.pending is not None:  # the call ends before it returns the response
            outcome, matched, now = self.pending
            self.pending = None
            self._report_attempt(outcome, now, matched, None)
        self.attempt_scopes.exit(error)
        self.sleep_scopes.exit(error)
        self.outcome = "failure" if isinstance(error, Exception) else "cancelled"
        hooks = self.dispatch.call_finished
        if hooks:
            reports.call_finished(self, hooks, error)
        self.call_scopes.exit(error)

    # -- helpers -------------------------------------------------------------------------------

    def _instruments_from(self) -> float:
        """When the instruments' hooks start, if they are timed (`times_instruments`)."""
        return self.runtime.clock.now() if self.times_instruments else 0.0

    def _instruments_took(self, reported_from: float) -> None:
        """Add the time the hooks took since ``reported_from`` to `instrument_time`, if timed."""
        if self.times_instruments:
            self.instrument_time += self.runtime.clock.now() - reported_from

    def _withheld(self, delay: float, outcome: Outcome) -> RetryReason | None:
        """Why the retry the policy granted (after ``delay``) does not happen, if it does not."""
        if not self.policy.retry_below and retried_below(outcome, self.since):
            # Retry at one layer: what a call nested in this one retried and gave up on is
            # final here too, whichever front door (coroutine, function, transport, helper).
            return "retried_below"
        if self.breaker is not None and self.breaker.state == "open":
            return "circuit_open"
        if self.budget is not None and not self.budget.try_acquire():
            return "throttled"
        if self.resume is not None and not self.resume.allows(delay):
            return "budget_exhausted"  # the budget's wall-clock expiry
        if self.throttle is not None and self.adapter is not None and self.result is not None:
            # The wait disposes of the last result (closes the response): the throttle is
            # asked first, so that a shed retry ends the call with the response it got, open.
            # Any other retry is asked for after the wait, with the throttle's newer verdicts.
            if not self.throttle.allow_request():
                return "shed"
            self.retry_admitted = True
        return None

    def _teach_pacer(self, outcome: Outcome, now: float) -> None:
        """Tell the pacer the attempt's answer: the front door's reading of it (an HTTP
        response's status and rate-limit headers: `PacerTeacher`), else its status."""
        pacer = self.pacer
        assert pacer is not None
        teach = getattr(self.adapter, "teach", None)  # optional: `PacerTeacher`
        if teach is not None:
            if outcome.exception is None:
                teach(pacer, outcome.result, now)
            return
        status = outcome.status
        if status is None and outcome.exception is not None:
            status = status_of(outcome.exception)
        if status is not None:
            pacer.learn(now, status=status)

    def _report_verdict(self, failed: bool, outcome: Outcome) -> None:
        """Tell the breaker and the throttle the admitted attempt's verdict.

        The throttle also learns whether a failure was an explicit overload refusal (a status
        in `OVERLOAD_STATUSES`): evidence of load, where a refused connection or a 502 is
        evidence of loss. The status is read here, only for a failure and a throttle, since
        `finish_attempt` reads it lazily (for matchers and listeners).
        """
        breaker, throttle = self.breaker, self.throttle
        if breaker is not None:
            if failed:
                breaker.record_failure()
            else:
                breaker.record_success()
        if throttle is not None:
            if not failed:
                throttle.record_success()
                return
            status = outcome.status
            if status is None:
                error = outcome.exception
                status = status_of(error if error is not None else outcome.result)
            throttle.record_failure(overloaded=status in OVERLOAD_STATUSES)

    def _refuse(self, reason: RetryReason, error: Exception) -> None:
        """The next attempt is refused (by the breaker, the throttle, the pacer, or a deadline
        that passed meanwhile): end the call for ``reason``."""
        if self.attempt:
            self._deny(reason, self._last_outcome())
        # Nothing ran in this process (a resumed call counts earlier processes' attempts too),
        # or the last result was already disposed of.
        ran_here = self._ran_here()
        if not ran_here or (self.adapter is not None and self.result is not None):
            # Before any attempt, or after the last result was already disposed of (a closed
            # response must not be returned): the call fails fast with the refusal itself.
            # Only a call that made no attempt here is refused; one that did keeps
            # the outcome its attempts got (`_deny`).
            self.result = None
            if not ran_here:
                self.outcome = OUTCOME_OF_REFUSAL[reason]
            self.error = error
            self.reason = reason

    def _ran_here(self) -> bool:
        """Whether an attempt ran in this process (a resumed call's count includes earlier
        processes' attempts)."""
        return self.error is not None or self.result is not None

    def _resume(self) -> float | None:
        """Adopt the stored progress of a resumed call: the wait before its next attempt."""
        assert self.resume is not None
        wait, stop = self.resume.load(self)
        if stop is not None:
            self._exhausted(stop)
            return None
        return wait

    def _exhausted(self, reason: RetryReason) -> None:
        """A resumed call has no attempt left: end it with the last outcome of this process,
        or with `ResumeExhausted` when none ran here (or its result was disposed of)."""
        assert self.resume is not None
        self._deny(reason, self._last_outcome())
        if self.error is None and (self.result is None or self.adapter is not None):
            self.result = None
            self.error = self.resume.exhausted(self.attempt, reason)

    def _last_outcome(self) -> Outcome:
        return Outcome(
            attempt=self.attempt, exception=self.error, result=self.result, status=self.status
        )

    def _deny(self, reason: RetryReason, outcome: Outcome) -> None:
        self.reason = reason
        self.outcome = OUTCOME_OF_REASON[reason]
        hooks = self.dispatch.retry_denied
        if hooks:
            reports.retry_denied(self, hooks, reason, outcome)
