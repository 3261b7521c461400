"""The delay timeline of a policy, for ``retrymw plan``: waits, jitter ranges and the stop.

The timeline follows the planned (un-jittered) delays of `RetryPolicy.delay_for` and stops
where `RetryPolicy.decide` would: ``attempts``, then ``retry_budget`` (cumulative waits above
it), then ``deadline`` (the next attempt would start at or after it). Jitter ranges come from
the jitter formulas of ``_backoff.py``, not from sampling, and a limit that falls inside the
jittered cumulative range is flagged, because there the draw decides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ._backoff import CustomBackoff, FixedBackoff
from ._cli_common import human_duration
from ._policy import RetryPolicy

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
    """Return the smallest and largest wait jitter can turn ``delay`` into.

    Args:
        policy: gives the jitter kind, factor, initial delay and cap.
        delay: the planned, capped delay.
        previous_max: for decorrelated jitter, the largest possible previous wait
            (``initial_delay`` before the first retry).
    """
    kind, cap = policy.jitter, policy.max_delay
    if kind is None:
        return delay, delay
    if kind == "full":
        return 0.0, delay
    if kind == "equal":
        return delay / 2.0, delay
    if kind == "decorrelated":
        low = min(policy.initial_delay, cap)
        high = min(cap, 3.0 * max(previous_max, low))
        return (low, high) if high > low else (high, high)
    low, high = delay * (1.0 - policy.jitter_factor), delay * (1.0 + policy.jitter_factor)
    if high > cap:
        low, high = max(0.0, low - (high - cap)), cap
    return low, high


@dataclass(slots=True)
class _Cursor:
    """The plan's running totals after the wait before attempt ``attempt``."""

    attempt: int = 1
    cumulative: float = 0.0
    cumulative_min: float = 0.0
    cumulative_max: float = 0.0


def build_plan(policy: RetryPolicy, *, attempt_time: float = 0.0) -> Plan:
    """Compute the delay timeline of ``policy``.

    Args:
        policy: the policy to plan.
        attempt_time: assumed duration of every attempt, which counts against the deadline.

    Returns:
        The waits (identical consecutive waits merged into one row) and the stop.
    """
    waits: list[Wait] = []
    at = _Cursor()
    previous_max = policy.initial_delay
    while at.attempt < policy.attempts:
        retry = at.attempt  # retry n follows attempt n
        delay = policy.delay_for(retry)
        low, high = jitter_range(policy, delay, previous_max)
        stop = _cut(policy, attempt_time, at, delay, low, high)
        if stop is not None:
            return Plan(policy, attempt_time, tuple(waits), stop)
        note = _note(policy, attempt_time, at, delay, low, high)
        # Every strategy ends in a constant tail (the cap, or past a custom list): jump over
        # it to the next row where a note or a stop changes, so 10**6 attempts cost nothing.
        count = 1
        if _steady(policy, retry, delay, high, previous_max):
            count = _run_length(policy, attempt_time, at, delay, low, high, note)
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
    policy: RetryPolicy, attempt_time: float, at: _Cursor, delay: float, low: float, high: float
) -> Stop | None:
    """The stop before the next retry, if the planned delay crosses a limit."""
    del high  # a longer draw only matters before the planned stop: see _note
    budget, deadline = policy.retry_budget, policy.deadline
    total, total_min = at.cumulative + delay, at.cumulative_min + low
    if budget is not None and total > budget:
        detail = (
            f"retry_budget {human_duration(budget)}: {human_duration(at.cumulative)} waited "
            f"+ {human_duration(delay)} > {human_duration(budget)}"
        )
        jittery = total_min <= budget
        return Stop(at.attempt, "budget_exhausted", "retry_budget", detail, jittery)
    elapsed = at.attempt * attempt_time + at.cumulative
    if deadline is not None and elapsed + delay >= deadline:
        detail = (
            f"deadline {human_duration(deadline)}: the next attempt would start at "
            f"{human_duration(elapsed + delay)}"
        )
        jittery = at.attempt * attempt_time + total_min < deadline
        return Stop(at.attempt, "deadline_exceeded", "deadline", detail, jittery)
    return None


def _note(
    policy: RetryPolicy, attempt_time: float, at: _Cursor, delay: float, low: float, high: float
) -> str | None:
    """A warning for a retry that the planned delays allow but a jitter draw may not."""
    del delay, low
    budget, deadline = policy.retry_budget, policy.deadline
    total_max = at.cumulative_max + high
    if budget is not None and total_max > budget:
        return "retry_budget may stop here (jitter)"
    if deadline is not None and at.attempt * attempt_time + total_max >= deadline:
        return "deadline may stop here (jitter)"
    return None


def _steady(policy: RetryPolicy, retry: int, delay: float, high: float, previous: float) -> bool:
    """Whether every later retry has the same planned delay and jitter range as this one."""
    backoff = policy.backoff
    if isinstance(backoff, CustomBackoff):
        constant = retry > len(backoff.delays) or delay == policy.max_delay
    else:
        constant = delay == policy.max_delay or isinstance(backoff, FixedBackoff)
    if policy.jitter == "decorrelated":
        constant = constant and high == previous
    return constant


def _run_length(
    policy: RetryPolicy,
    attempt_time: float,
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
            _cut(policy, attempt_time, before, delay, low, high) is None
            and _note(policy, attempt_time, before, delay, low, high) == note
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
