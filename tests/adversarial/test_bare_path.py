"""A first attempt run bare tells the instruments what the full path tells them.

When no instrument hears of starts and nothing guards the call, its first attempt runs outside
a `CallRun` (`Retrier.run_async`, `run_sync`), and instruments of endings hear of it
afterwards. Whatever the attempt does (succeed, fail then succeed, fail for good, be cancelled
or interrupted), they must hear the same endings as an instrument that also hears of starts,
which sends every call down the full path. The cancelled and interrupted cases once told
nothing (tests/adversarial/test_cancelled_calls.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from retrymw import (
    AttemptFinished,
    CallFinished,
    Retrier,
    RetryDenied,
    RetryPolicy,
    RetryScheduled,
)
from retrymw.instrumentation import Instrument
from retrymw.testing import FakeClock, RecordingInstrument
from tests.instruments import EndingsRecorder

ENDINGS = (AttemptFinished, RetryScheduled, RetryDenied, CallFinished)

POLICIES = {
    "any exception": RetryPolicy(initial_delay=0),
    "connection errors": RetryPolicy(initial_delay=0, retry_on=[ConnectionError]),
    "one attempt": RetryPolicy(attempts=1),
}

BEHAVIOURS = ("succeeds", "fails once", "fails always", "refused error", "interrupted")


def _told(events: list[Any]) -> list[tuple[str, dict[str, object]]]:
    """The endings, without what differs from run to run (times, the budget's gauge), and
    with each exception by its type."""
    told = []
    for event in events:
        if not isinstance(event, ENDINGS):
            continue
        fields = event._asdict()
        for varying in ("duration", "delay", "budget_available"):
            fields.pop(varying, None)
        exception = fields.pop("exception", None)
        fields["exception"] = None if exception is None else type(exception).__name__
        told.append((type(event).__name__, fields))
    return told


def _behaviour(name: str) -> Callable[[], object]:
    """What the first attempt does; later attempts succeed."""
    made = 0

    def attempt() -> object:
        nonlocal made
        made += 1
        if name == "succeeds" or (name == "fails once" and made > 1):
            return made
        if name == "refused error":
            raise ValueError("not retried by connection-error policies")
        if name == "interrupted":
            raise KeyboardInterrupt
        raise ConnectionError("down")

    return attempt


def _run_sync(instrument: Instrument, policy: RetryPolicy, behaviour: str) -> None:
    retrier = Retrier(policy, instruments=[instrument], clock=FakeClock())
    with contextlib.suppress(Exception, KeyboardInterrupt):  # the endings are compared
        retrier.call_sync(_behaviour(behaviour))


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
@pytest.mark.parametrize("policy", POLICIES)
def test_a_function_call_tells_the_same_endings_either_way(policy: str, behaviour: str) -> None:
    bare, full = EndingsRecorder(), RecordingInstrument()
    for instrument in (bare, full):
        _run_sync(instrument, POLICIES[policy], behaviour)
    assert _told(bare.events) == _told(full.events)
    assert _told(bare.events)[-1][0] == "CallFinished"


async def _run_async(instrument: Instrument, policy: RetryPolicy, behaviour: str) -> None:
    retrier = Retrier(policy, instruments=[instrument], clock=FakeClock())
    attempt = _behaviour(behaviour)

    async def coroutine() -> object:
        if behaviour == "interrupted":  # a coroutine's caller gives up: cancellation
            caller.cancel()
            await anyio.sleep_forever()
        return attempt()

    with anyio.CancelScope() as caller:
        with contextlib.suppress(Exception):  # the endings are compared
            await retrier.call(coroutine)


@pytest.mark.anyio
@pytest.mark.parametrize("behaviour", BEHAVIOURS)
@pytest.mark.parametrize("policy", POLICIES)
async def test_a_coroutine_call_tells_the_same_endings_either_way(
    policy: str, behaviour: str
) -> None:
    bare, full = EndingsRecorder(), RecordingInstrument()
    for instrument in (bare, full):
        await _run_async(instrument, POLICIES[policy], behaviour)
    assert _told(bare.events) == _told(full.events)
    assert _told(bare.events)[-1][0] == "CallFinished"
