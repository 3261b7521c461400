"""`Recorder`: every event of a test, grouped into calls, with readable assertions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._core.events import (
    AttemptFinished,
    AttemptStarted,
    CallFinished,
    CallStarted,
    RetryDenied,
    RetryScheduled,
)
from ._fakes import RecordingInstrument

__all__ = ["CallRecord", "Recorder"]

_ANY: Any = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecord:
    """One logical call as the events told it.

    Attributes:
        operation: the operation (``GET`` for HTTP, the function's name for coroutines).
        target: the target label (the host for HTTP).
        policy: the policy name.
        attempts: how many attempts ran.
        delays: the backoff delay scheduled before each retry, in order.
        errors: the error type of each failed attempt (status code or exception class name).
        outcome: the call's outcome (``success``, ``exhausted`` ...), ``None`` while it runs.
        gave_up: why no further retry followed (``max_attempts`` ...), ``None`` if none was
            refused.
        status: the last HTTP status, if any.

    .. versionadded:: 0.2
    """

    operation: str
    target: str
    policy: str
    attempts: int = 0
    delays: tuple[float, ...] = ()
    errors: tuple[str, ...] = ()
    outcome: str | None = None
    gave_up: str | None = None
    status: int | None = None

    def describe(self) -> str:
        """One line: what ran, how often, how it ended."""
        delays = ", ".join(f"{delay:.3g}s" for delay in self.delays)
        ending = self.outcome or "still running"
        if self.gave_up is not None:
            ending += f", gave up: {self.gave_up}"
        errors = f", errors [{', '.join(self.errors)}]" if self.errors else ""
        return (
            f"{self.operation} (policy {self.policy!r}, target {self.target!r}): "
            f"{self.attempts} attempt{'s' * (self.attempts != 1)}, delays [{delays}]{errors}, "
            f"{ending}"
        )


@dataclass(slots=True)
class _Open:
    operation: str
    target: str
    policy: str
    attempts: int = 0
    delays: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    gave_up: str | None = None
    status: int | None = None

    def freeze(self, outcome: str | None) -> CallRecord:
        return CallRecord(
            operation=self.operation,
            target=self.target,
            policy=self.policy,
            attempts=self.attempts,
            delays=tuple(self.delays),
            errors=tuple(self.errors),
            outcome=outcome,
            gave_up=self.gave_up,
            status=self.status,
        )


class Recorder(RecordingInstrument):
    """A `RecordingInstrument` that also groups events into calls and asserts on them.

    Calls are told apart by policy, target and operation; concurrent calls that share all three
    are matched first in, first out.

    .. versionadded:: 0.2
    """

    def __init__(self) -> None:
        super().__init__()
        self._finished: list[CallRecord] = []
        self._open: dict[tuple[str, str, str], list[_Open]] = {}
        self._order: list[_Open | CallRecord] = []

    # -- grouping ---------------------------------------------------------------------------

    def _current(self, event: Any, *, new: bool = False) -> _Open:
        key = (event.policy, event.target, event.operation)
        stack = self._open.setdefault(key, [])
        if new or not stack:
            record = _Open(event.operation, event.target, event.policy)
            stack.append(record)
            self._order.append(record)
        return stack[0]

    def call_started(self, event: CallStarted, /) -> None:
        """Record the event and open a call."""
        super().call_started(event)
        self._current(event, new=True)

    def attempt_started(self, event: AttemptStarted, /) -> None:
        """Record the event and count the attempt."""
        super().attempt_started(event)
        self._current(event).attempts = event.attempt

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        """Record the event and its error type."""
        super().attempt_finished(event)
        record = self._current(event)
        if event.error_type is not None and event.attempt_outcome != "success":
            record.errors.append(event.error_type)
        record.status = event.status

    def retry_scheduled(self, event: RetryScheduled, /) -> None:
        """Record the event and its delay."""
        super().retry_scheduled(event)
        self._current(event).delays.append(event.delay)

    def retry_denied(self, event: RetryDenied, /) -> None:
        """Record the event and the give-up reason."""
        super().retry_denied(event)
        self._current(event).gave_up = event.reason

    def call_finished(self, event: CallFinished, /) -> None:
        """Record the event and close the call."""
        super().call_finished(event)
        record = self._current(event)
        self._open[(event.policy, event.target, event.operation)].remove(record)
        record.attempts = event.attempts
        if event.status is not None:
            record.status = event.status
        index = next(i for i, item in enumerate(self._order) if item is record)
        self._order[index] = record.freeze(event.outcome)

    # -- reading ----------------------------------------------------------------------------

    @property
    def calls(self) -> list[CallRecord]:
        """Every call, in the order it started (a running call has ``outcome=None``)."""
        return [item if isinstance(item, CallRecord) else item.freeze(None) for item in self._order]

    @property
    def attempts(self) -> int:
        """Attempts of every call, added up."""
        return sum(call.attempts for call in self.calls)

    @property
    def delays(self) -> list[float]:
        """Every scheduled backoff delay, in order."""
        return [delay for call in self.calls for delay in call.delays]

    @property
    def reasons(self) -> list[str]:
        """Every give-up reason, in order."""
        return [call.gave_up for call in self.calls if call.gave_up is not None]

    def clear(self) -> None:
        """Forget every event and call."""
        self.events.clear()
        self._open.clear()
        self._order.clear()

    # -- asserting --------------------------------------------------------------------------

    def assert_call(
        self,
        index: int = -1,
        *,
        operation: str | None = None,
        attempts: int | None = None,
        outcome: str | None = None,
        gave_up: str | None = _ANY,
        delays: list[float] | tuple[float, ...] | None = None,
        status: int | None = None,
    ) -> CallRecord:
        """Assert what one call did; return its record.

        Args:
            index: which call (of those with ``operation``, if given): the last by default.
            operation: only look at calls of this operation.
            attempts: the number of attempts it made.
            outcome: its outcome (``success``, ``exhausted``, ``failure`` ...).
            gave_up: its give-up reason (``max_attempts`` ...); ``None`` asserts it never gave
                up.
            delays: the backoff delays scheduled, compared to 1e-9.
            status: the last HTTP status.

        Raises:
            AssertionError: naming each difference and listing every recorded call.
        """
        calls = [c for c in self.calls if operation is None or c.operation == operation]
        if not calls or not -len(calls) <= index < len(calls):
            which = f" of {operation!r}" if operation is not None else ""
            raise AssertionError(f"no retrymw call{which} at index {index}\n{self._listing()}")
        call = calls[index]
        problems = []
        if attempts is not None and call.attempts != attempts:
            problems.append(f"expected {attempts} attempts, got {call.attempts}")
        if outcome is not None and call.outcome != outcome:
            problems.append(f"expected outcome {outcome!r}, got {call.outcome!r}")
        if gave_up is not _ANY and call.gave_up != gave_up:
            problems.append(f"expected gave_up={gave_up!r}, got {call.gave_up!r}")
        if delays is not None and (
            len(delays) != len(call.delays)
            or any(abs(a - b) > 1e-9 for a, b in zip(delays, call.delays, strict=False))
        ):
            problems.append(f"expected delays {list(delays)}, got {list(call.delays)}")
        if status is not None and call.status != status:
            problems.append(f"expected status {status}, got {call.status}")
        if problems:
            raise AssertionError(
                f"retrymw call {call.describe()}\n  " + "\n  ".join(problems) + "\n"
                f"{self._listing()}"
            )
        return call

    def assert_no_retries(self) -> None:
        """Assert that no call of the test retried."""
        retried = [call for call in self.calls if call.attempts > 1]
        if retried:
            raise AssertionError(f"expected no retries, but\n{self._listing(retried)}")

    def _listing(self, calls: list[CallRecord] | None = None) -> str:
        calls = self.calls if calls is None else calls
        if not calls:
            return "retrymw recorded no call (was the object created before the fixture?)"
        lines = [f"  {n}. {call.describe()}" for n, call in enumerate(calls, 1)]
        return "retrymw recorded:\n" + "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Recorder calls={len(self._order)} events={len(self.events)}>"
