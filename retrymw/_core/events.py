"""Frozen event payloads: what instruments receive, and the outcome matchers see.

Events are flat and immutable so that instruments can keep them (``RecordingInstrument``), and
new fields are only ever added at the end, with a default, so that nobody breaks. They are
`typing.NamedTuple`s rather than frozen dataclasses because several are built on every call:
a frozen dataclass sets each field through ``object.__setattr__`` and costs about five times as
much to build (measured: 1.9 µs against 0.38 µs for ten fields). Read them by attribute name.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = [
    "Attached",
    "AttemptFinished",
    "AttemptOutcome",
    "AttemptStarted",
    "BodyRead",
    "BodyState",
    "BreakerStateChanged",
    "CallFinished",
    "CallOutcome",
    "CallStarted",
    "CircuitState",
    "FailoverFinished",
    "FailoverStarted",
    "OVERLOAD_STATUSES",
    "Outcome",
    "RetryDenied",
    "RetryReason",
    "RetryScheduled",
]

CallOutcome = Literal[
    "success",
    "failure",
    "exhausted",
    "budget_exhausted",
    "throttled",
    "circuit_open",
    "shed",
    "deadline_exceeded",
    "cancelled",
    "failover",
    "paced",
]
#: What became of an attempt; ``hedge``: an extra copy sent by a `Hedge` (its ``error_type`` is
#: empty when its answer won, ``cancelled`` when another copy won first, else its failure).
AttemptOutcome = Literal["success", "retried", "failed", "hedge"]
RetryReason = Literal[
    "max_attempts",
    "budget_exhausted",
    "throttled",
    "deadline_exceeded",
    "circuit_open",
    "shed",
    "not_idempotent",
    "body_not_replayable",
    "retry_after_exceeds_limit",
    "server_said_no",
    "retried_below",
    "paced",
]
CircuitState = Literal["closed", "open", "half_open"]
#: How reading a response body ended: read to its ``completed`` end, ``closed`` by the caller
#: before its end, ``cut`` by an error (the connection dropped), or ``stalled`` (no byte within
#: the transport's stall or first-byte limit, or the call's deadline passed).
BodyState = Literal["completed", "closed", "cut", "stalled"]

#: The HTTP statuses of an explicit overload refusal: 429 Too Many Requests, 503 Service
#: Unavailable, and Anthropic's 529 "overloaded". A failed attempt carrying one of them is
#: evidence of load (`AdaptiveThrottle.record_failure` with ``overloaded=True``).
OVERLOAD_STATUSES: frozenset[int] = frozenset({429, 503, 529})


class Outcome(NamedTuple):
    """What one attempt produced, as matchers and predicates see it.

    Attributes:
        attempt: 1 for the first execution.
        elapsed: seconds since the call started (0.0 when nobody measured it).
        exception: the exception the attempt raised, or ``None``.
        result: the value the attempt returned (an ``httpx.Response`` for the transport).
        status: the HTTP status of the result or of the exception, if any.
        retry_after: a server's ``Retry-After`` hint in seconds, if any.
        veto: a reason that forbids a retry whatever the matcher says (e.g. ``not_idempotent``).
        retry_after_header: the response header that set ``retry_after`` (``retry-after-ms``,
            ``x-ratelimit-reset-tokens``...), if any.
    """

    attempt: int
    elapsed: float = 0.0
    exception: Exception | None = None
    result: object = None
    status: int | None = None
    retry_after: float | None = None
    veto: RetryReason | None = None
    retry_after_header: str | None = None


class CallStarted(NamedTuple):
    """A logical call begins (before its first attempt)."""

    policy: str
    target: str
    operation: str
    max_attempts: int
    request: object = None


class AttemptStarted(NamedTuple):
    """An attempt begins; ``attempt`` is 1 for the first execution. ``hedge``: an extra copy
    of attempt ``attempt`` sent by a `Hedge` (docs/hedging.md)."""

    policy: str
    target: str
    operation: str
    attempt: int
    max_attempts: int
    request: object = None
    hedge: bool = False


class BodyRead(NamedTuple):
    """How the body of the response a call returned was read (HTTP transports).

    Attributes:
        state: how reading ended (`BodyState`).
        size: body bytes received, as sent (before any decoding).
        time_to_first_byte: seconds from the attempt's start to the body's first byte, or
            ``None`` when no byte came.
    """

    state: BodyState
    size: int
    time_to_first_byte: float | None


class AttemptFinished(NamedTuple):
    """An attempt ended; ``attempt_outcome`` says whether another attempt follows.

    ``result`` is what the attempt returned (the response, for the HTTP transports), or
    ``None`` when it raised; instruments read details from it (``network.protocol.version``)
    and must not keep it alive. The attempt that produced the response an HTTP call returns
    ends when its body has been read or closed, and ``body`` says how; a body cut
    or stalled makes that attempt ``failed`` with the read's exception. ``paced_for`` is the
    time the attempt waited for its pacer's slot before it was sent (``None`` without a
    pacer); ``duration`` does not include it.

    ``hedge``: an extra copy sent by a `Hedge`, whose ``attempt_outcome`` is ``"hedge"`` and
    ``error_type`` ``None`` when its answer won, ``"cancelled"`` when another copy won first,
    else its failure. The attempt ``attempt`` itself is reported as usual, with the outcome of
    the copy that won.
    """

    policy: str
    target: str
    operation: str
    attempt: int
    attempt_outcome: AttemptOutcome
    duration: float
    error_type: str | None
    status: int | None = None
    exception: BaseException | None = None
    result: object = None
    body: BodyRead | None = None
    hedge: bool = False
    paced_for: float | None = None


class RetryScheduled(NamedTuple):
    """Attempt ``attempt`` failed and the next one runs after ``delay`` seconds.

    ``retry_after`` is the server's least delay, if it gave one, and ``retry_after_header`` the
    header that gave it (``retry-after``, ``retry-after-ms``, ``x-ratelimit-reset-tokens``...).
    """

    policy: str
    target: str
    operation: str
    attempt: int
    max_attempts: int
    delay: float
    error_type: str
    retry_after: float | None = None
    exception: BaseException | None = None
    budget_available: float | None = None
    retry_after_header: str | None = None


class RetryDenied(NamedTuple):
    """Attempt ``attempt`` failed in a retryable way, but no retry follows, for ``reason``."""

    policy: str
    target: str
    operation: str
    attempt: int
    max_attempts: int
    reason: RetryReason
    error_type: str
    budget_available: float | None = None


class CallFinished(NamedTuple):
    """A logical call ended with ``outcome`` after ``attempts`` executions."""

    policy: str
    target: str
    operation: str
    outcome: CallOutcome
    attempts: int
    duration: float
    error_type: str | None
    status: int | None = None
    exception: BaseException | None = None
    budget_available: float | None = None


class FailoverStarted(NamedTuple):
    """A request that may fail over (``failover=`` on a transport) begins, to its primary
    origin; its calls, one per origin tried, follow (docs/hedging.md). ``target``: the
    primary's host."""

    policy: str
    target: str
    operation: str


class FailoverFinished(NamedTuple):
    """A request that may fail over ended: ``tried``, the origins it was sent to in order
    (``scheme://host[:port]``), and ``answered``, the one whose answer it returns; or
    ``exception``, the error it ends with (``answered`` is then ``None``; both ``None``: it
    was cancelled)."""

    policy: str
    target: str
    operation: str
    tried: tuple[str, ...]
    answered: str | None
    exception: BaseException | None = None


class BreakerStateChanged(NamedTuple):
    """Circuit ``circuit`` moved from ``previous_state`` to ``state`` at monotonic ``time``."""

    circuit: str
    previous_state: CircuitState
    state: CircuitState
    time: float


class Attached(NamedTuple):
    """A policy, breaker, budget or throttle now governs the calls of ``policy`` to ``target``.

    Announced once per live object: the `RetryPolicy` and a shared protection when a `Retrier`
    is built (``target`` empty), a `PerTarget`'s instance when it is created for ``target``. It
    lets instruments export every series the object can have from the start (a healthy circuit
    reads ``closed`` = 1 and its transitions 0, so ``increase()`` sees the first trip) and read
    live gauges from it. ``subject`` is the `RetryPolicy`, `CircuitBreaker`, `RetryBudget` or
    `AdaptiveThrottle` itself (never a `PerTarget`); instruments must not keep it alive.
    """

    policy: str
    target: str
    subject: object
