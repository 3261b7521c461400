"""The delay timeline of a policy, for ``retrymw plan``: waits, jitter ranges and the stop.

The timeline follows the planned (un-jittered) delays of `RetryPolicy.delay_for` and stops
where a call does, because `RetryPolicy.decide` itself takes every stop: ``attempts``, then
``retry_budget`` (cumulative waits above it), then ``deadline`` (the next attempt would start
at or after it). Jitter ranges are `jitter_bounds`, the very ranges `apply_jitter` draws from,
not samples; ``decide`` also judges their ends, and a limit that falls inside the jittered
cumulative range is flagged, because there the draw decides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from random import Random

from .._core.backoff import CustomBackoff, FixedBackoff, jitter_bounds
from .._core.events import Outcome, RetryReason
from .._core.policy import CallState, GiveUp, RetryPolicy
from ._common import human_duration

__all__ = ["Plan", "Stop", "Wait", "build_plan", "jitter_range"]


@dataclass(frozen=True, slots=True)
class Wait:
    """The wait before attempts ``attempt`` … ``last_attempt`` (one row; several when equal).

    Cumulative figures are the totals once the wait before ``last_attempt`` is slept.
    """

    attempt: int
    last_attempt: int
    delay: float
    jitter_min: float
    jitter_max: float
    cumulative: float
    cumulative_min: float
    cumulative_max: float
    note: str | None


@dataclass(frozen=True, slots=True)
class Stop:
    """Why and when the call gives up in the plan."""

    after_attempt: int
    reason: str
    limit: str
    detail: str
    depends_on_jitter: bool


@dataclass(frozen=True, slots=True)
class Plan:
    """A policy's timeline: the waits, then where it stops."""

    policy: RetryPolicy
    attempt_time: float
    waits: tuple[Wait, ...]
    stop: Stop


def jitter_range(policy: RetryPolicy, delay: float, previous_max: float) -> tuple[float, float]:
    """Return the smallest and largest wait jitter can turn ``delay`` into (`jitter_bounds`).

    Args:
        policy: gives the jitter kind, factor, initial delay and cap.
        delay: the planned, capped delay.
        previous_max: for decorrelated jitter, the largest possible previous wait
            (``initial_delay`` before the first retry).
    """
    if policy.jitter is None:
        return delay, delay
    return jitter_bounds(
        policy.jitter,
        delay,
        initial_delay=policy.initial_delay,
        max_delay=policy.max_delay,
        factor=policy.jitter_factor,
        previous=previous_max,
    )


@dataclass(slots=True)
class _Cursor:
    """The plan's running totals after the wait before attempt ``attempt``."""

    attempt: int = 1
    cumulative: float = 0.0
    cumulative_min: float = 0.0
    cumulative_max: float = 0.0


@dataclass(frozen=True, slots=True)
class _Given:
    """A backoff that always answers ``seconds``: how `_Limits` puts a jitter bound to decide."""

    seconds: float

    def delay(self, n: int, /, initial_delay: float, max_delay: float) -> float:
        """See `Backoff.delay`."""
        return self.seconds


# The planning policies retry any exception (no retry_on) and draw nothing (no jitter).
_FAILURE = Exception("a planned failure")
_NO_DRAWS = Random(0)


class _Limits:
    """Where `RetryPolicy.decide` itself stops a call, so the plan cannot drift from a real run.

    It asks ``decide`` about a call that has waited ``waited`` seconds in all when attempt
    ``at.attempt`` fails, each attempt having taken ``attempt_time``. A copy of the policy
    without jitter and ``retry_on`` leaves only its limit checks to decide: the copy keeps the
    policy's backoff for the planned wait, and a `_Given` backoff for a jitter bound.
    """

    __slots__ = ("_bounds", "_planned", "attempt_time")

    def __init__(self, policy: RetryPolicy, attempt_time: float) -> None:
        self._planned = policy.replace(jitter=False, retry_on=None)
        self.attempt_time = attempt_time
        self._bounds: dict[float, RetryPolicy] = {}

    def stop(self, at: _Cursor, waited: float, bound: float | None = None) -> RetryReason | None:
        """Why ``decide`` gives up after attempt ``at.attempt``, or ``None`` if it retries.

        Args:
            at: the attempt that failed.
            waited: the backoff slept so far in the call.
            bound: a jitter bound to wait instead of the planned delay.
        """
        policy = self._planned if bound is None else self._bound(bound)
        state = CallState(0.0)
        state.attempt, state.delay_so_far = at.attempt, waited
        now = at.attempt * self.attempt_time + waited
        outcome = Outcome(at.attempt, now, _FAILURE)
        decision = policy.decide(state, outcome, now=now, rng=_NO_DRAWS)
        return decision.reason if isinstance(decision, GiveUp) else None

    def _bound(self, seconds: float) -> RetryPolicy:
        policy = self._bounds.get(seconds)
        if policy is None:
            # initial_delay only feeds the backoff and jitter, both fixed here; zero keeps a
            # custom list's initial_delay above max_delay from failing validation.
            policy = self._planned.replace(backoff=_Given(seconds), initial_delay=0.0)
            self._bounds[seconds] = policy
        return policy


def build_plan(policy: RetryPolicy, *, attempt_time: float = 0.0) -> Plan:
    """Compute the delay timeline of ``policy``.

    Args:
        policy: the policy to plan.
        attempt_time: assumed duration of every attempt, which counts against the deadline.

    Returns:
        The waits (identical consecutive waits merged into one row) and the stop.
    """
    limits = _Limits(policy, attempt_time)
    waits: list[Wait] = []
    at = _Cursor()
    previous_max = policy.initial_delay
    while at.attempt < policy.attempts:
        retry = at.attempt  # retry n follows attempt n
        delay = policy.delay_for(retry)
        low, high = jitter_range(policy, delay, previous_max)
        stop = _cut(policy, limits, at, delay, low)
        if stop is not None:
            return Plan(policy, attempt_time, tuple(waits), stop)
        note = _note(limits, at, high)
        # Every strategy ends in a constant tail (the cap, or past a custom list): jump over
        # it to the next row where a note or a stop changes, so 10**6 attempts cost nothing.
        count = 1
        if _steady(policy, retry, delay, high, previous_max):
            count = _run_length(policy, limits, at, delay, low, high, note)
        at = _Cursor(
            at.attempt + count,
            at.cumulative + count * delay,
            at.cumulative_min + count * low,
            at.cumulative_max + count * high,
        )
        row = Wait(retry + 1, at.attempt, delay, low, high, *_totals(at), note)
        if waits and _same_row(waits[-1], row):
            waits[-1] = replace(row, attempt=waits[-1].attempt)
        else:
            waits.append(row)
        previous_max = high
    detail = f"attempts={policy.attempts} reached"
    stop = Stop(policy.attempts, "max_attempts", "attempts", detail, False)
    return Plan(policy, attempt_time, tuple(waits), stop)


def _totals(at: _Cursor) -> tuple[float, float, float]:
    return at.cumulative, at.cumulative_min, at.cumulative_max


def _same_row(a: Wait, b: Wait) -> bool:
    return (a.delay, a.jitter_min, a.jitter_max, a.note) == (
        b.delay,
        b.jitter_min,
        b.jitter_max,
        b.note,
    )


def _cut(
    policy: RetryPolicy, limits: _Limits, at: _Cursor, delay: float, low: float
) -> Stop | None:
    """The stop before the next retry, if ``decide`` refuses the planned delay."""
    reason = limits.stop(at, at.cumulative)
    if reason is None:
        return None
    # Would the shortest draw still be retried? (A longer draw only matters before the
    # planned stop: see _note.)
    jittery = limits.stop(at, at.cumulative_min, low) is None
    if reason == "budget_exhausted":
        budget = human_duration(policy.retry_budget or 0.0)
        detail = (
            f"retry_budget {budget}: {human_duration(at.cumulative)} waited "
            f"+ {human_duration(delay)} > {budget}"
        )
        return Stop(at.attempt, reason, "retry_budget", detail, jittery)
    start = at.attempt * limits.attempt_time + at.cumulative + delay
    detail = (
        f"deadline {human_duration(policy.deadline or 0.0)}: the next attempt would start at "
        f"{human_duration(start)}"
    )
    return Stop(at.attempt, reason, "deadline", detail, jittery)


_JITTER_NOTES: dict[RetryReason | None, str] = {
    "budget_exhausted": "retry_budget may stop here (jitter)",
    "deadline_exceeded": "deadline may stop here (jitter)",
}


def _note(limits: _Limits, at: _Cursor, high: float) -> str | None:
    """A warning for a retry that the planned delays allow but the longest draw may not."""
    return _JITTER_NOTES.get(limits.stop(at, at.cumulative_max, high))


def _steady(policy: RetryPolicy, retry: int, delay: float, high: float, previous: float) -> bool:
    """Whether every later retry has the same planned delay and jitter range as this one."""
    backoff = policy.backoff
    if isinstance(backoff, CustomBackoff):
        # Past the list every wait is max_delay; within it, only capped entries may follow.
        constant = all(listed >= policy.max_delay for listed in backoff.delays[retry - 1 :])
    else:
        constant = delay == policy.max_delay or isinstance(backoff, FixedBackoff)
    if policy.jitter == "decorrelated":
        constant = constant and high == previous
    return constant


def _run_length(
    policy: RetryPolicy,
    limits: _Limits,
    at: _Cursor,
    delay: float,
    low: float,
    high: float,
    note: str | None,
) -> int:
    """How many retries from ``at`` on are identical rows (no new note, no stop)."""

    def same(count: int) -> bool:
        # The totals just before the count-th retry of the run.
        k = count - 1
        before = _Cursor(
            at.attempt + k,
            at.cumulative + k * delay,
            at.cumulative_min + k * low,
            at.cumulative_max + k * high,
        )
        return (
            _cut(policy, limits, before, delay, low) is None and _note(limits, before, high) == note
        )

    good, bad = 1, policy.attempts - at.attempt + 1  # same(1) holds; bad is past the end
    # The predicates are monotone in the count: bisect instead of walking the tail.
    while bad - good > 1:
        middle = (good + bad) // 2
        if same(middle):
            good = middle
        else:
            bad = middle
    return good
