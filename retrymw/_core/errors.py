"""Exception types raised by retrymw."""

from __future__ import annotations

from typing import Any

from .redact import redact_text, safe_repr

__all__ = [
    "CircuitOpenError",
    "ConfigError",
    "IncompleteStreamError",
    "LoadShedError",
    "PacedError",
    "RetryBudgetExhausted",
    "RetrymwError",
    "add_note",
]


# Long enough for any real value (a RetryPolicy's repr is about 330 characters), short enough
# that an expanded YAML alias bomb cannot make an error message of megabytes.
_VALUE_LIMIT = 500


class RetrymwError(Exception):
    """Base class of every exception retrymw raises itself."""


class ConfigError(RetrymwError, ValueError):
    """Invalid configuration: names the field path, the bad value and an accepted example.

    Args:
        field: dotted path of the offending field, e.g. ``"policies.payments.backoff"``.
        value: the value that was rejected.
        problem: what is wrong with it, in a few words.
        example: an accepted value for that field.
    """

    def __init__(self, field: str, value: Any, problem: str, example: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        self.example = example
        # The value is shown bounded, redacted and safely: it may be huge (a YAML alias bomb),
        # carry credentials (an endpoint URL) or have a __repr__ that raises.
        shown = safe_repr(value, _VALUE_LIMIT)
        super().__init__(f"{field}: {problem}; got {shown}, expected e.g. {example}")

    def at(self, prefix: str) -> ConfigError:
        """Return the same error with ``prefix`` prepended to its field path."""
        return ConfigError(f"{prefix}.{self.field}", self.value, self.problem, self.example)


class RetryBudgetExhausted(RetrymwError):
    """The call's ``retry_budget`` (cumulative backoff delay) would be exceeded by one more retry.

    ``__cause__`` is the last exception the call raised.
    """

    def __init__(self, message: str, *, attempts: int, delay_so_far: float) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.delay_so_far = delay_so_far


class CircuitOpenError(RetrymwError):
    """The circuit breaker rejected the call before its first attempt."""

    def __init__(self, circuit: str, *, retry_in: float | None = None) -> None:
        hint = "" if retry_in is None else f"; next probe in {retry_in:.3g}s"
        super().__init__(f"circuit {circuit!r} is open{hint}")
        self.circuit = circuit
        self.retry_in = retry_in


class LoadShedError(RetrymwError):
    """An adaptive throttle shed the attempt locally, before it reached the dependency.

    Outcome ``shed``; never retried: shedding is the answer to a dependency that is already
    failing, and a retry would only ask again.
    """

    def __init__(self, throttle: str, *, reject_probability: float) -> None:
        super().__init__(
            f"throttle {throttle!r} shed the attempt "
            f"(rejecting {reject_probability:.0%} of attempts now)"
        )
        self.throttle = throttle
        self.reject_probability = reject_probability


class IncompleteStreamError(RetrymwError):
    """An LLM API's event stream (``text/event-stream``) ended without its terminal event:
    the answer may be cut short, though the connection ended cleanly.

    Raised while the body is read, on a transport with ``profile="sdk"`` or ``failover=``
    (docs/hedging.md); before the caller read any of it, the request goes to the next origin
    instead. The transports raise a twin that is also their library's
    ``RemoteProtocolError``.

    Attributes:
        missing: the terminal event that did not come (``data: [DONE]``,
            ``event: message_stop``).

    .. versionadded:: 0.5
    """

    def __init__(self, missing: str, *, received: int) -> None:
        super().__init__(
            f"retrymw: the event stream ended after {received} bytes without its terminal "
            f"event {missing!r}: the answer may be incomplete"
        )
        self.missing = missing
        self.received = received


class PacedError(RetrymwError):
    """A pacer's next free slot for the attempt lies past the call's deadline.

    Outcome ``paced`` when no attempt was made; raised at once, never waited for: a call is
    never silently late. ``wait`` is how long the slot was away; ``room`` the time the attempt
    must have after its slot before the deadline.
    """

    def __init__(self, pacer: str, *, wait: float, deadline_left: float, room: float = 0.0) -> None:
        needs = f", the attempt needs {room:.3g}s after it" if room > 0.0 else ""
        super().__init__(
            f"pacer {pacer!r} has no slot within the call's deadline "
            f"(next slot in {wait:.3g}s, {max(0.0, deadline_left):.3g}s left{needs})"
        )
        self.pacer = pacer
        self.wait = wait
        self.deadline_left = deadline_left
        self.room = room


def add_note(error: BaseException, note: str) -> None:
    """Attach a PEP 678 note to ``error`` (``__notes__`` by hand on Python 3.10).

    The note is redacted (no credentials or sensitive query values), and an exception that
    refuses notes (a hostile ``__setattr__``) goes without: a note never changes the outcome.
    """
    note = redact_text(note)
    try:
        method = getattr(error, "add_note", None)
        if method is not None:
            method(note)
        else:  # Python 3.10: the attribute PEP 678 defines, without the method.
            notes = getattr(error, "__notes__", None)
            if not isinstance(notes, list):
                notes = []
                error.__notes__ = notes  # type: ignore[attr-defined]
            notes.append(note)
    except Exception:
        pass
