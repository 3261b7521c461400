"""A first attempt run bare tells the instruments what the full path tells them.

When nothing guards the call, its first attempt runs outside a `CallRun` (`Retrier.run_async`,
`run_sync`); one is built only if that attempt does not settle the call. Whatever the attempt
does (succeed, fail then succeed, fail for good, be cancelled or interrupted, return what
cannot be awaited), the instruments must hear the same events, and their scopes be entered
and left in the same order, as on the full path, which a policy with a deadline takes. The
cancelled and interrupted cases once told nothing (tests/adversarial/test_cancelled_calls.py),
and a misuse refused on the bare path told an instrument of endings nothing while the full
path told it the call failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from retrymw import (
    AttemptFinished,
    AttemptStarted,
    CallFinished,
    CallStarted,
    Retrier,
    RetryDenied,
    RetryPolicy,
    RetryScheduled,
)
from retrymw.instrumentation import Instrument
from retrymw.testing import FakeClock
from tests.instruments import EndingsRecorder

EVENTS = (CallStarted, AttemptStarted, AttemptFinished, RetryScheduled, RetryDenied, CallFinished)

POLICIES = {
    "any exception": RetryPolicy(initial_delay=0),
    "connection errors": RetryPolicy(initial_delay=0, retry_on=[ConnectionError]),
    "one attempt": RetryPolicy(attempts=1),
}

BEHAVIOURS = ("succeeds", "fails once", "fails always", "refused error", "interrupted")


def full_path(policy: RetryPolicy) -> RetryPolicy:
    """``policy`` with a deadline that never comes: a bounded call never runs bare."""
    return policy.replace(deadline=3600)


class ScopedRecorder(Instrument):
    """Hears every event, and returns a scope from each hook that may return one, whose
    entering and leaving (with the error it was left by) it records among the events."""

    def __init__(self) -> None:
        self.told: list[object] = []

    @contextlib.contextmanager
    def _scope(self, name: str) -> Iterator[None]:
        self.told.append(f"enter {name}")
        try:
            yield
        except BaseException as error:
            self.told.append(f"leave {name} by {type(error).__name__}")
            raise
        self.told.append(f"leave {name}")

    def call_started(self, event: CallStarted, /) -> contextlib.AbstractContextManager[None]:
        self.told.append(event)
        return self._scope("call")

    def attempt_started(self, event: AttemptStarted, /) -> contextlib.AbstractContextManager[None]:
        self.told.append(event)
        return self._scope(f"attempt {event.attempt}")

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        self.told.append(event)

    def retry_scheduled(self, event: RetryScheduled, /) -> None:
        self.told.append(event)

    def retry_denied(self, event: RetryDenied, /) -> None:
        self.told.append(event)

    def call_finished(self, event: CallFinished, /) -> None:
        self.told.append(event)


Told = str | tuple[str, dict[str, object]]  # a scope entered or left, or an event's fields


def _told(events: list[Any]) -> list[Told]:
    """The events, without what differs from run to run (times, the budget's gauge), and
    with each exception by its type; the scopes' records as they are."""
    told: list[Told] = []
    for event in events:
        if isinstance(event, str):
            told.append(event)
            continue
        if not isinstance(event, EVENTS):
            continue
        fields = event._asdict()
        for varying in ("duration", "delay", "budget_available"):
            fields.pop(varying, None)
        exception = fields.pop("exception", None)
        fields["exception"] = None if exception is None else type(exception).__name__
        told.append((type(event).__name__, fields))
    return told


def _heard(instrument: EndingsRecorder | ScopedRecorder) -> list[Told]:
    return _told(instrument.told if isinstance(instrument, ScopedRecorder) else instrument.events)


def _last_event(told: list[Told]) -> str:
    """The name of the last event told (after it, only scopes are left)."""
    return next(item[0] for item in reversed(told) if not isinstance(item, str))


def _behaviour(name: str) -> Callable[[], object]:
    """What the first attempt does; later attempts succeed."""
    made = 0

    def attempt() -> object:
        nonlocal made
        made += 1
        if name in ("succeeds", "misused") or (name == "fails once" and made > 1):
            return made
        if name == "refused error":
            raise ValueError("not retried by connection-error policies")
        if name == "interrupted":
            raise KeyboardInterrupt
        raise ConnectionError("down")

    return attempt


def _run_sync(instrument: Instrument, policy: RetryPolicy, behaviour: str) -> None:
    retrier = Retrier(policy, instruments=[instrument], clock=FakeClock())
    attempt = _behaviour(behaviour)

    async def coroutine() -> object:
        return attempt()

    def returns_a_coroutine() -> object:  # call_sync() given a coroutine function's twin
        return coroutine()

    with contextlib.suppress(Exception, KeyboardInterrupt):  # the events are compared
        retrier.call_sync(returns_a_coroutine if behaviour == "misused" else attempt)


@pytest.mark.parametrize("behaviour", [*BEHAVIOURS, "misused"])
@pytest.mark.parametrize("policy", POLICIES)
def test_a_function_call_tells_the_same_either_way(policy: str, behaviour: str) -> None:
    for make in (EndingsRecorder, ScopedRecorder):
        bare, full = make(), make()
        _run_sync(bare, POLICIES[policy], behaviour)
        _run_sync(full, full_path(POLICIES[policy]), behaviour)
        assert _heard(bare) == _heard(full)
        assert _last_event(_heard(bare)) == "CallFinished"


async def _run_async(instrument: Instrument, policy: RetryPolicy, behaviour: str) -> None:
    retrier = Retrier(policy, instruments=[instrument], clock=FakeClock())
    attempt = _behaviour(behaviour)

    async def coroutine() -> object:
        if behaviour == "interrupted":  # a coroutine's caller gives up: cancellation
            caller.cancel()
            await anyio.sleep_forever()
        return attempt()

    def not_awaitable() -> object:  # call() given a function: refused at its first return
        return attempt()

    with anyio.CancelScope() as caller:
        with contextlib.suppress(Exception):  # the events are compared
            await retrier.call(not_awaitable if behaviour == "misused" else coroutine)  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize("behaviour", [*BEHAVIOURS, "misused"])
@pytest.mark.parametrize("policy", POLICIES)
async def test_a_coroutine_call_tells_the_same_either_way(policy: str, behaviour: str) -> None:
    for make in (EndingsRecorder, ScopedRecorder):
        bare, full = make(), make()
        await _run_async(bare, POLICIES[policy], behaviour)
        await _run_async(full, full_path(POLICIES[policy]), behaviour)
        assert _heard(bare) == _heard(full)
        assert _last_event(_heard(bare)) == "CallFinished"


class InterruptedInAttemptStart(ScopedRecorder):
    """Interrupted (Ctrl-C) while it hears of an attempt's start, its call scope entered."""

    def attempt_started(self, event: AttemptStarted, /) -> contextlib.AbstractContextManager[None]:
        self.told.append(event)
        raise KeyboardInterrupt


@pytest.mark.parametrize("policy", POLICIES)
def test_an_interruption_in_a_start_hook_leaves_the_scopes_as_the_full_path(policy: str) -> None:
    """The call's scope is left, and the call told cancelled, whichever path it took. Before,
    on the bare path, the call scope stayed entered: the call's span stayed current in the
    caller's context after the call raised."""
    bare, full = InterruptedInAttemptStart(), InterruptedInAttemptStart()
    for instrument, chosen in ((bare, POLICIES[policy]), (full, full_path(POLICIES[policy]))):
        retrier = Retrier(chosen, instruments=[instrument], clock=FakeClock())
        with pytest.raises(KeyboardInterrupt):
            retrier.call_sync(_behaviour("succeeds"))
    assert _heard(bare) == _heard(full)
    assert _heard(bare)[-1] == "leave call by KeyboardInterrupt"


@pytest.mark.anyio
@pytest.mark.parametrize("policy", POLICIES)
async def test_an_interruption_in_a_coroutine_call_start_hook_leaves_the_scopes_too(
    policy: str,
) -> None:
    bare, full = InterruptedInAttemptStart(), InterruptedInAttemptStart()

    async def succeeds() -> int:
        return 1

    for instrument, chosen in ((bare, POLICIES[policy]), (full, full_path(POLICIES[policy]))):
        retrier = Retrier(chosen, instruments=[instrument], clock=FakeClock())
        with pytest.raises(KeyboardInterrupt):
            await retrier.call(succeeds)
    assert _heard(bare) == _heard(full)
    assert _heard(bare)[-1] == "leave call by KeyboardInterrupt"
