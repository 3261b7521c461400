"""`RetryPolicy`, the immutable configuration, and the pure decision core shared by all drivers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import timedelta
from random import Random
from typing import Any, Literal

from .backoff import (
    JITTER_KINDS,
    Backoff,
    CustomBackoff,
    JitterKind,
    apply_jitter,
    backoff_from_name,
)
from .durations import parse_duration
from .errors import CircuitOpenError, ConfigError
from .events import Outcome, RetryReason
from .matchers import DEFAULT_VERDICTS, Matcher, compile_matcher, retryable_by_default

__all__ = ["Accept", "CallState", "GiveUp", "Retry", "RetryPolicy"]

DurationLike = float | int | str | timedelta | dict[str, int]
OnFailure = Literal["raise", "continue", "fallback"]


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class RetryPolicy:
    """How to retry: immutable, hashable-free configuration shared by every call.

    Durations accept seconds as numbers, `timedelta`, or strings such as ``"500ms"`` or
    ``"1m30s"``; they are stored as float seconds.

    Args:
        name: bounded label for telemetry.
        attempts: total executions including the first; ``1`` never retries.
        backoff: a strategy object or one of ``"fixed"``, ``"linear"``, ``"exponential"``,
            ``"fibonacci"``.
        initial_delay: base of every strategy.
        max_delay: hard cap on every sleep, jitter and server hints included.
        jitter: ``False``; ``True``/``"proportional"``; ``"full"``; ``"equal"``; ``"decorrelated"``.
            ``None`` (the default) leaves it unset: no jitter for a `Retrier`, the transports'
            full jitter on an HTTP transport (`with_default_jitter`).
        jitter_factor: width of proportional jitter, in ``[0, 1]``.
        retry_on: matchers (see `Matcher`); empty means any `Exception` but the programming
            errors retrying cannot fix (``NameError``, ``TypeError``, ``AttributeError``...).
        retry_budget: cap on the cumulative backoff delay of one call.
        timeout: per-attempt timeout (async attempts are cancelled when it expires).
        deadline: whole-call time; no retry is scheduled that would start past it.
        on_failure: ``"raise"``, ``"continue"`` (return ``None``) or ``"fallback"``.
        fallback: with ``on_failure="fallback"``, called with the last exception; its result is
            returned.
        retry_below: retry even what a retrymw call nested in this one already retried and gave
            up on. ``False`` (the default) retries at one layer: such an error or response is
            final, reason ``retried_below`` (docs/layers.md).

    Raises:
        ConfigError: a field is invalid; the message names the field, the value and an example.

    .. versionadded:: 0.1
    """

    name: str
    attempts: int
    backoff: Backoff
    initial_delay: float
    max_delay: float
    jitter: JitterKind | None
    jitter_factor: float
    retry_on: Matcher | None
    retry_budget: float | None
    timeout: float | None
    deadline: float | None
    on_failure: OnFailure
    fallback: Callable[[BaseException], Any] | None = field(compare=False)
    retry_below: bool = False
    # Whether ``jitter`` was given (False, a kind...) rather than left unset: provenance, not
    # data, so neither compared nor shown (`with_default_jitter` reads it).
    _jitter_given: bool = field(default=True, init=False, compare=False, repr=False)

    def __init__(
        self,
        *,
        name: str = "default",
        attempts: int = 3,
        backoff: Backoff | str = "exponential",
        initial_delay: DurationLike = 1.0,
        max_delay: DurationLike = 30.0,
        jitter: bool | str | None = None,
        jitter_factor: float = 0.3,
        retry_on: Any = None,
        retry_budget: DurationLike | None = None,
        timeout: DurationLike | None = None,
        deadline: DurationLike | None = None,
        on_failure: OnFailure = "raise",
        fallback: Callable[[BaseException], Any] | None = None,
        retry_below: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError("name", name, "must be a non-empty string", '"payments"')
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ConfigError("attempts", attempts, "must be an integer >= 1", "attempts=3")
        initial = parse_duration(initial_delay, field="initial_delay")
        cap = parse_duration(max_delay, field="max_delay")
        strategy = _normalise_backoff(backoff)
        if initial > cap and not isinstance(strategy, CustomBackoff):
            raise ConfigError(
                "initial_delay",
                initial_delay,
                f"exceeds max_delay ({cap:g}s)",
                'initial_delay="1s"',
            )
        if (
            isinstance(jitter_factor, bool)
            or not isinstance(jitter_factor, (int, float))
            or not 0.0 <= jitter_factor <= 1.0
        ):
            raise ConfigError("jitter_factor", jitter_factor, "must be within [0, 1]", "0.3")
        if on_failure not in ("raise", "continue", "fallback"):
            raise ConfigError(
                "on_failure", on_failure, 'must be "raise", "continue" or "fallback"', '"raise"'
            )
        if (on_failure == "fallback") != (fallback is not None):
            raise ConfigError(
                "fallback",
                fallback,
                'is required with on_failure="fallback" and only then',
                'on_failure="fallback", fallback=lambda exc: None',
            )
        if fallback is not None and not callable(fallback):
            raise ConfigError("fallback", fallback, "must be callable", "lambda exc: None")
        if not isinstance(retry_below, bool):
            raise ConfigError(
                "retry_below", retry_below, "must be True or False", "retry_below=True"
            )
        values = {
            "name": name,
            "attempts": attempts,
            "backoff": strategy,
            "initial_delay": initial,
            "max_delay": cap,
            "jitter": _normalise_jitter(jitter),
            "jitter_factor": float(jitter_factor),
            "retry_on": compile_matcher(retry_on),
            "retry_budget": _optional_duration(retry_budget, "retry_budget", positive=False),
            "timeout": _optional_duration(timeout, "timeout", positive=True),
            "deadline": _optional_duration(deadline, "deadline", positive=True),
            "on_failure": on_failure,
            "fallback": fallback,
            "retry_below": retry_below,
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "_jitter_given", jitter is not None)

    def replace(self, **changes: Any) -> RetryPolicy:
        """Return a copy with ``changes`` applied and validated like the constructor's arguments.

        Raises:
            ConfigError: an unknown field name, or an invalid value.
        """
        known = {item.name for item in fields(self) if item.init}
        for key, value in changes.items():
            if key not in known:
                raise ConfigError(key, value, "unknown policy field", "attempts=3")
        current = {name: getattr(self, name) for name in known}
        if changes.get("on_failure", "fallback") != "fallback" and "fallback" not in changes:
            current["fallback"] = None  # leaving "fallback" mode drops the old fallback
        # Stored ``None`` is "no jitter": given (False) stays given, unset stays unset.
        current["jitter"] = (self.jitter or False) if self._jitter_given else None
        try:
            return RetryPolicy(**{**current, **changes})
        except ConfigError as error:
            if error.field == "initial_delay" and "max_delay" in changes.keys() - {"initial_delay"}:
                # Only max_delay changed: the conflict is with the value the caller gave.
                problem = f"is shorter than initial_delay ({self.initial_delay:g}s)"
                example = f'max_delay="{self.initial_delay:g}s" or more'
                raise ConfigError("max_delay", changes["max_delay"], problem, example) from None
            raise

    @property
    def sets_jitter(self) -> bool:
        """Whether ``jitter`` was chosen (``False`` included), rather than left unset."""
        return self._jitter_given

    def with_default_jitter(self, kind: JitterKind) -> RetryPolicy:
        """This policy with ``kind`` jitter if its ``jitter`` was left unset, else itself.

        A context whose default jitters (the HTTP transports: full jitter, so that clients do
        not retry in lockstep) keeps it under a policy that did not choose its own.
        """
        if self.sets_jitter:
            return self
        return self.replace(jitter=kind)

    def delay_for(self, n: int) -> float:
        """Return the capped, un-jittered delay before retry ``n`` (1 after the first failure)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError("n", n, "must be an integer >= 1", "delay_for(1)")
        return self.backoff.delay(n, self.initial_delay, self.max_delay)

    def attempt_limit(self, elapsed: float) -> float | None:
        """The time an attempt starting ``elapsed`` seconds into the call may take.

        That is the per-attempt ``timeout``, cut by what the ``deadline`` leaves; ``None`` when
        neither is set.
        """
        if self.deadline is None:
            return self.timeout
        left = max(self.deadline - elapsed, 0.0)
        return left if self.timeout is None else min(self.timeout, left)

    def matches(self, outcome: Outcome) -> bool:
        """Return whether ``outcome`` is a retryable failure under ``retry_on``.

        A breaker's `CircuitOpenError` is never retryable, and the implicit "any exception"
        (no ``retry_on``) leaves out retrymw's own errors, so that an outer retrier does not
        retry what an inner one already gave up on, and the programming errors retrying cannot
        fix (``NameError``, ``TypeError``...: see `retryable_by_default`).
        """
        exception = outcome.exception
        if self.retry_on is None:
            return retryable_by_default(exception)
        if isinstance(exception, CircuitOpenError):
            return False
        return self.retry_on(outcome)

    def decide(
        self, state: CallState, outcome: Outcome, *, now: float, rng: Random
    ) -> Accept | Retry | GiveUp:
        """Decide what follows ``outcome``; pure apart from drawing jitter from ``rng``.

        ``state`` describes the call so far (``state.attempt`` is the attempt that produced
        ``outcome``); ``now`` is the clock's monotonic time.
        """
        step = self.next_step(state, outcome, now, rng)
        if step is None:
            return ACCEPT
        if isinstance(step, str):
            return GiveUp(step)
        return Retry(step)

    def next_step(
        self, state: CallState, outcome: Outcome, now: float, rng: Random
    ) -> float | RetryReason | None:
        """`decide` as plain values, which the engine asks after every attempt: the delay of a
        retry, the reason of a give-up, or ``None`` to accept ``outcome``."""
        retry_on = self.retry_on
        if retry_on is None:  # `matches` inlined: this runs after every failed attempt
            exception = outcome.exception
            if exception is None:
                return None
            verdict = DEFAULT_VERDICTS.get(type(exception))
            if not (retryable_by_default(exception) if verdict is None else verdict):
                return None
        elif not self.matches(outcome):
            return None
        if outcome.veto is not None:
            return outcome.veto
        if state.attempt >= self.attempts:
            return "max_attempts"
        delay = self.backoff.delay(state.attempt, self.initial_delay, self.max_delay)
        if self.jitter is not None:
            delay = apply_jitter(
                self.jitter,
                delay,
                initial_delay=self.initial_delay,
                max_delay=self.max_delay,
                factor=self.jitter_factor,
                previous=state.last_delay if state.last_delay is not None else self.initial_delay,
                rng=rng,
            )
        elapsed = now - state.started_at - state.instrument_time
        hint = outcome.retry_after
        if hint is not None and hint > 0.0:
            if (
                hint > self.max_delay
                or (self.retry_budget is not None and state.delay_so_far + hint > self.retry_budget)
                or (self.deadline is not None and elapsed + hint >= self.deadline)
            ):
                return "retry_after_exceeds_limit"
            delay = max(delay, hint)
        if self.retry_budget is not None and state.delay_so_far + delay > self.retry_budget:
            return "budget_exhausted"
        if self.deadline is not None and elapsed + delay >= self.deadline:
            return "deadline_exceeded"
        return delay


class CallState:
    """Per-call progress, created inside each call and never stored on the policy.

    ``instrument_time`` is the time the call spent in its instruments' hooks: the deadline
    does not count it, so a slow exporter never changes a call's result.
    """

    __slots__ = ("attempt", "delay_so_far", "instrument_time", "last_delay", "started_at")

    def __init__(self, started_at: float) -> None:
        self.attempt = 0
        self.started_at = started_at
        self.delay_so_far = 0.0
        self.last_delay: float | None = None
        self.instrument_time = 0.0

    def elapsed(self, now: float) -> float:
        """The time the call has taken by ``now``, as its deadline counts it."""
        return now - self.started_at - self.instrument_time

    def __repr__(self) -> str:
        return f"<CallState attempt #{self.attempt}; slept for {self.delay_so_far:.3g}s>"


@dataclass(frozen=True, slots=True)
class Retry:
    """Decision: sleep ``delay`` seconds, then run the next attempt."""

    delay: float


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Decision: a retryable failure, but no retry follows, for ``reason``."""

    reason: RetryReason


class Accept:
    """Decision: the outcome is final and is not a retryable failure."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ACCEPT"


ACCEPT = Accept()


def _normalise_backoff(value: Any) -> Backoff:
    if isinstance(value, str):
        return backoff_from_name(value)
    if isinstance(value, Backoff):
        return value
    raise ConfigError(
        "backoff", value, "not a backoff strategy", '"exponential" or ExponentialBackoff(base=3.0)'
    )


def _normalise_jitter(value: Any) -> JitterKind | None:
    if value is False or value is None or value == "none":
        return None
    if value is True:
        return "proportional"
    if value in JITTER_KINDS:
        return value  # type: ignore[no-any-return]
    raise ConfigError(
        "jitter", value, f"must be a boolean or one of {', '.join(JITTER_KINDS)}", '"full"'
    )


def _optional_duration(value: Any, name: str, *, positive: bool) -> float | None:
    if value is None:
        return None
    seconds = parse_duration(value, field=name)
    if positive and seconds <= 0.0:
        raise ConfigError(name, value, "must be greater than zero (None disables it)", '"5s"')
    return seconds
