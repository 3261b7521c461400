"""Retrying at one layer: the mark a call that retried and gave up leaves, and the request served.

Three layers that each try 3 times send 27 attempts to the bottom one. So what a retrymw call
retried and gave up on is *final*: `CallRun` marks the error it raises (or the response it
returns) with `mark`, and an enclosing retrymw call that sees the mark (`retried_below`) gives
up with reason ``retried_below`` instead of retrying it again. The mark is an attribute on the
object itself, never a note: notes are for people and may be rewritten.

Across services, `retrymw.server` serves each request inside `serving`: a call that gives up
for good while the request is served records it there (`Inbound.final`), and the middleware
answers a failed request with ``x-should-retry: false``, which the caller's transport honours.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .._core.events import Outcome, RetryReason

__all__ = [
    "FINAL_REASONS",
    "Inbound",
    "copy_mark",
    "current",
    "mark",
    "mark_time",
    "retried_below",
    "serving",
]

#: The attribute a final error or response carries: when it was marked (`mark_time`).
_ATTRIBUTE = "_retrymw_final"

#: Give-up reasons that end a call for good even after a single attempt: the server forbade a
#: retry, a layer below already retried, or protection (the cross-call budget, the breaker, the
#: throttle) refused a retry the policy granted: a layer above retrying instead would send the
#: very load the protection refused.
FINAL_REASONS: frozenset[RetryReason] = frozenset(
    {"server_said_no", "retried_below", "throttled", "circuit_open", "shed", "paced"}
)


def mark_time() -> int:
    """The time a mark bears, and a call reads before its first attempt (its ``since``): a
    mark later than a call's ``since`` was made inside that call (`time.monotonic_ns`)."""
    return time.monotonic_ns()


def mark(value: object) -> None:
    """Mark ``value`` (the exception raised or the response returned) as final.

    An object that takes no attribute (``None``, an int, a slotted class) stays unmarked: the
    layer above may then retry it, as before.
    """
    try:
        setattr(value, _ATTRIBUTE, time.monotonic_ns())
    except Exception:  # no attribute can be set on it: unmarked is the safe side
        return


def copy_mark(source: BaseException, target: BaseException) -> None:
    """Carry ``source``'s mark over to ``target``, an error raised in its place."""
    stamp = getattr(source, _ATTRIBUTE, None)
    if stamp is not None:
        setattr(target, _ATTRIBUTE, stamp)


def retried_below(outcome: Outcome, since: int) -> bool:
    """Whether ``outcome`` carries a mark left by a call nested in the one asking.

    Only a mark made after the asking call began (``since``, its `mark_time` before its first
    attempt) counts: one exception object raised again and again (a module-level instance)
    stays retryable on every later call. An error's ``response`` (``httpx.HTTPStatusError``) is
    looked at too.
    """
    error = outcome.exception
    try:
        values = (error, outcome.result, getattr(error, "response", None))
        for value in values:
            stamp = getattr(value, _ATTRIBUTE, None)
            if type(stamp) is int and stamp > since:
                return True
    except Exception:  # a hostile __getattr__: not marked
        return False
    return False


class Inbound:
    """The request a server is serving, as `retrymw.server`'s middleware describes it.

    Attributes:
        service: the service's name (a bounded label).
        attempt: the attempt number the caller sent (1 for a first attempt), or ``None``.
        final: a retrymw call made while serving the request gave up for good (after
            retrying, or because a server or a layer below said not to retry).
    """

    __slots__ = ("attempt", "final", "service")

    def __init__(self, service: str, attempt: int | None) -> None:
        self.service = service
        self.attempt = attempt
        self.final = False

    def __repr__(self) -> str:
        return f"<Inbound service={self.service!r} attempt={self.attempt} final={self.final}>"


_INBOUND: ContextVar[Inbound | None] = ContextVar("retrymw_inbound", default=None)


def current() -> Inbound | None:
    """The request being served in this context, or ``None`` outside `serving`."""
    return _INBOUND.get()


@contextmanager
def serving(inbound: Inbound) -> Iterator[Inbound]:
    """Make ``inbound`` the request served by the code run inside the block."""
    token = _INBOUND.set(inbound)
    try:
        yield inbound
    finally:
        _INBOUND.reset(token)
