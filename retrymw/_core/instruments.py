"""The `Instrument` interface, and the dispatcher that shields calls from instrument failures."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from .events import (
    Attached,
    AttemptFinished,
    AttemptStarted,
    BreakerStateChanged,
    CallFinished,
    CallStarted,
    FailoverFinished,
    FailoverStarted,
    RetryDenied,
    RetryScheduled,
)
from .redact import redact_text, safe_repr

__all__ = ["Dispatch", "Instrument", "Scopes", "Suspendable"]

logger = logging.getLogger("retrymw")

Scope = AbstractContextManager[None]


class Instrument:
    """Receives the engine's events; every method is optional (the base class does nothing).

    Methods that may return a context manager (`call_started`, `attempt_started`,
    `retry_scheduled`) have it entered around the call, the attempt or the backoff sleep, which is
    how the OpenTelemetry instrument makes its spans current. An instrument that raises is logged
    once, disabled, and never changes the call's result.

    .. versionadded:: 0.1
    """

    def call_started(self, event: CallStarted, /) -> Scope | None:
        """A logical call begins; a returned context manager wraps the whole call."""
        return None

    def attempt_started(self, event: AttemptStarted, /) -> Scope | None:
        """An attempt begins; a returned context manager wraps it, through `attempt_finished`."""
        return None

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        """An attempt ended (emitted inside the attempt's context manager)."""

    def retry_scheduled(self, event: RetryScheduled, /) -> Scope | None:
        """A retry follows after ``event.delay``; a returned context manager wraps the sleep."""
        return None

    def retry_denied(self, event: RetryDenied, /) -> None:
        """A retryable failure gets no retry, for ``event.reason``."""

    def call_finished(self, event: CallFinished, /) -> None:
        """A logical call ended (emitted inside the call's context manager)."""

    def breaker_state_changed(self, event: BreakerStateChanged, /) -> None:
        """A circuit breaker changed state."""

    def attached(self, event: Attached, /) -> None:
        """A policy, breaker, budget or throttle starts governing calls (see `Attached`).

        .. versionadded:: 0.2
        """

    def failover_started(self, event: FailoverStarted, /) -> Scope | None:
        """A request that may fail over begins; a returned context manager wraps its calls,
        one per origin tried, through `failover_finished`.

        .. versionadded:: 0.5
        """
        return None

    def failover_finished(self, event: FailoverFinished, /) -> None:
        """A request that may fail over ended (emitted inside its context manager).

        .. versionadded:: 0.5
        """

    def listening(self) -> bool:
        """Whether the per-call hooks would record anything now (checked once per call).

        Override it in an instrument that can be idle, such as the OpenTelemetry one with no
        SDK configured: while it answers False, calls skip its hooks.
        """
        return True


HOOKS = (
    "call_started",
    "attempt_started",
    "attempt_finished",
    "retry_scheduled",
    "retry_denied",
    "call_finished",
    "breaker_state_changed",
    "attached",
    "failover_started",
    "failover_finished",
)


class _Guard:
    """One instrument's switch: the first exception it raises disables it for good."""

    __slots__ = ("enabled", "instrument")

    def __init__(self, instrument: Any) -> None:
        self.instrument = instrument
        self.enabled = True

    def fail(self, hook: str) -> None:
        """Disable the instrument and log why, once (called inside the ``except`` block)."""
        self.enabled = False
        # The traceback is formatted and redacted here rather than by `logger.exception`: it
        # chains to the user's exception (an instrument fails while handling it), whose message
        # may carry a URL with credentials.
        try:
            details = redact_text(traceback.format_exc())
        except Exception:  # pragma: no cover - format_exc survives hostile exceptions
            details = ""
        logger.error(
            "instrument %s raised in %s and has been disabled; the call's result is unaffected\n%s",
            safe_repr(self.instrument),
            hook,
            details.rstrip(),
        )


Hook = tuple[_Guard, Callable[..., Any]]


class Suspendable:
    """A scope that can be left before it ends, and taken up again to end it.

    The attempt that produced the response an HTTP call returns lasts until that response's
    body is read or closed, but the caller's code runs meanwhile: the engine
    suspends the call's and that attempt's scopes (`suspend`) when it returns the response
    (what they made current must not stay current in the caller's code), resumes them
    (`resume`) when the body ends to report it, then exits them. The OpenTelemetry
    instrument's span scopes are such scopes (their spans end with the body); any other scope
    is exited when the call returns.
    """

    __slots__ = ()

    def suspend(self) -> None:
        """Undo what entering made current, keep the rest (an open span) for `resume`."""

    def resume(self) -> None:
        """Make current again what `suspend` undid (maybe in another task or thread)."""


class Scopes:
    """Context managers returned by instruments, entered together and exited in reverse."""

    __slots__ = ("_entered",)

    def __init__(self, entered: list[tuple[_Guard, Scope]]) -> None:
        self._entered = entered

    def suspend(self) -> None:
        """Leave the scopes until `resume`: `Suspendable` ones are suspended, any other is
        exited now (it cannot outlive the caller's code taking over)."""
        kept: list[tuple[_Guard, Scope]] = []
        for guard, scope in reversed(self._entered):
            try:
                if isinstance(scope, Suspendable):
                    scope.suspend()
                    kept.append((guard, scope))
                else:
                    scope.__exit__(None, None, None)
            except Exception:  # noqa: PERF203 - each instrument fails alone; streams only
                guard.fail("suspend")
        kept.reverse()
        self._entered[:] = kept

    def resume(self) -> None:
        """Enter again the scopes `suspend` kept, in their order, before they are exited."""
        for guard, scope in self._entered:
            try:
                scope.resume()  # type: ignore[attr-defined]  # only Suspendable ones are kept
            except Exception:  # noqa: PERF203 - each instrument fails alone; streams only
                guard.fail("resume")

    def exit(self, error: BaseException | None = None) -> None:
        """Exit every scope; an instrument's failure here is isolated like any other."""
        exc_info: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
        exc_info = _NO_ERROR if error is None else (type(error), error, error.__traceback__)
        while self._entered:
            guard, scope = self._entered.pop()
            try:
                # A scope that returns True would swallow the error: telemetry never changes an
                # outcome, so the return value is ignored.
                scope.__exit__(*exc_info)
            except Exception:
                guard.fail("__exit__")


NO_SCOPES = Scopes([])
_NO_ERROR = (None, None, None)


def _table(guards: list[_Guard], hook: str) -> tuple[Hook, ...]:
    """The bound methods of the instruments that override ``hook``."""
    table: list[Hook] = []
    for guard in guards:
        method = getattr(type(guard.instrument), hook, None)
        if method is not None and method is not getattr(Instrument, hook):
            table.append((guard, getattr(guard.instrument, hook)))
    return tuple(table)


class Dispatch:
    """Per-hook tables built once, so that hooks nobody implements cost nothing per call."""

    __slots__ = (
        *HOOKS,
        "_idle_listening",
        "guards",
        "idle_guards",
        "instruments",
        "observes_calls",
        "observes_outcomes",
        "reports_attempts",
        "times_attempts",
    )

    def __init__(self, instruments: Iterable[object], *, guards: list[_Guard] | None = None):
        self.instruments = tuple(instruments)
        if guards is None:
            guards = [_Guard(instrument) for instrument in self.instruments]
        self.guards = guards
        self.call_started = _table(guards, "call_started")
        self.attempt_started = _table(guards, "attempt_started")
        self.attempt_finished = _table(guards, "attempt_finished")
        self.retry_scheduled = _table(guards, "retry_scheduled")
        self.retry_denied = _table(guards, "retry_denied")
        self.call_finished = _table(guards, "call_finished")
        self.breaker_state_changed = _table(guards, "breaker_state_changed")
        self.attached = _table(guards, "attached")
        self.failover_started = _table(guards, "failover_started")
        self.failover_finished = _table(guards, "failover_finished")
        # Whether any hook hears of calls or attempts: a first attempt run bare is then
        # announced and reported as the full path would (`BareCall`).
        self.observes_calls = bool(
            self.call_started or self.attempt_started or self.attempt_finished or self.call_finished
        )
        # Whether any hook reads an attempt's or a call's status (read only then).
        self.observes_outcomes = bool(
            self.attempt_finished or self.retry_scheduled or self.retry_denied or self.call_finished
        )
        # Whether the end of an attempt is reported: see `CallRun.finish_attempt`.
        self.reports_attempts = bool(
            self.attempt_finished or self.retry_scheduled or self.retry_denied
        )
        # Whether an attempt's start is taken (and announced): see `CallRun.start_attempt`.
        self.times_attempts = bool(self.attempt_started or self.attempt_finished)
        # The guards of instruments that can be idle (they override `listening`).
        self.idle_guards = tuple(
            guard
            for guard in guards
            if getattr(type(guard.instrument), "listening", None)
            not in (None, Instrument.listening)
        )
        self._idle_listening = tuple(
            (guard, guard.instrument.listening) for guard in self.idle_guards
        )

    def quiet(self) -> Dispatch | None:
        """The same dispatch without the instruments that can be idle; None if there are none."""
        if not self.idle_guards:
            return None
        guards = [guard for guard in self.guards if guard not in self.idle_guards]
        return Dispatch([guard.instrument for guard in guards], guards=guards)

    def listening(self) -> bool:
        """Whether any enabled instrument that can be idle is listening now (never raises)."""
        for guard, listening in self._idle_listening:
            if guard.enabled:
                try:
                    if listening():
                        return True
                except Exception:  # a failing instrument is disabled, not fatal
                    guard.fail("listening")
        return False

    @staticmethod
    def emit(hooks: tuple[Hook, ...], event: object) -> None:
        """Deliver ``event`` to every enabled hook of one table."""
        for guard, method in hooks:
            if guard.enabled:
                try:
                    method(event)
                except Exception:
                    guard.fail(method.__name__)

    @staticmethod
    def enter(hooks: tuple[Hook, ...], event: object) -> Scopes:
        """Deliver ``event`` and enter the context managers the hooks return."""
        entered: list[tuple[_Guard, Scope]] | None = None
        for guard, method in hooks:
            if not guard.enabled:
                continue
            try:
                scope = method(event)
                if scope is not None:
                    scope.__enter__()
                    if entered is None:
                        entered = [(guard, scope)]
                    else:
                        entered.append((guard, scope))
            except Exception:
                guard.fail(method.__name__)
        return NO_SCOPES if entered is None else Scopes(entered)

    def attach(self, policy: str, target: str, subject: object) -> None:
        """Announce a live policy, breaker, budget or throttle to the instruments (never raises).

        The `Retrier` calls it once per live object: at construction for its policy and for a
        protection shared by every target (``target`` ""), and when a `PerTarget` creates a
        target's instance. Instruments tolerate a repeated announcement.
        """
        if self.attached:
            self.emit(self.attached, Attached(policy, target, subject))

    def breaker_listener(self, event: BreakerStateChanged) -> None:
        """Forward a breaker transition to the instruments (registered on breakers)."""
        self.emit(self.breaker_state_changed, event)
