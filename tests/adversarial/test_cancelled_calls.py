"""A call cancelled during its first attempt is counted, whichever path ran that attempt.

A call whose instruments only hear of endings (`PrometheusInstrument`) runs its first attempt
outside a `CallRun` when nothing else needs one. Cancelled there (a caller's deadline, a task
group shutting down) or interrupted (``KeyboardInterrupt``), it used to vanish from the
telemetry: no ``retrymw_call_duration_seconds{retrymw_outcome="cancelled"}``, during exactly
the incidents where callers give up on a hung dependency. It is now told as the full path tells
it: the call ends ``cancelled``, with the error, and no attempt outcome.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

from retrymw import CallFinished, Retrier, RetryPolicy
from retrymw.instrumentation import Instrument, PrometheusInstrument
from retrymw.instrumentation import _names as names
from retrymw.testing import RecordingInstrument

pytestmark = pytest.mark.anyio


class HearsEndings(Instrument):
    """An instrument of endings only, as Prometheus is: the first attempt may run bare."""

    def __init__(self) -> None:
        self.finished: list[CallFinished] = []

    def call_finished(self, event: CallFinished, /) -> None:
        self.finished.append(event)

    def of_type(self, kind: type[CallFinished]) -> list[CallFinished]:
        """What it heard, asked as a `RecordingInstrument` is asked."""
        return [event for event in self.finished if isinstance(event, kind)]


def _calls(registry: CollectorRegistry, outcome: str) -> float:
    value = registry.get_sample_value(
        names.count_of(names.CALL_DURATION),
        {
            names.LABEL_POLICY: "default",
            names.LABEL_TARGET: "hangs",
            names.LABEL_OUTCOME: outcome,
        },
    )
    return value or 0.0


async def test_a_call_cancelled_during_its_first_attempt_is_counted_cancelled() -> None:
    registry = CollectorRegistry()
    retrier = Retrier(instruments=[PrometheusInstrument(registry=registry)])
    attempts = 0

    async def hangs() -> None:
        nonlocal attempts
        attempts += 1
        outer.cancel()  # the caller gives up while the attempt waits on its dependency
        await anyio.sleep_forever()

    with anyio.CancelScope() as outer:
        await retrier.call(hangs)
    assert outer.cancelled_caught  # the cancellation reached the caller, never swallowed
    assert attempts == 1
    assert _calls(registry, "cancelled") == 1.0
    assert _calls(registry, "success") == 0.0


def test_a_call_interrupted_during_its_first_attempt_is_counted_cancelled() -> None:
    registry = CollectorRegistry()
    retrier = Retrier(instruments=[PrometheusInstrument(registry=registry)])
    attempts = 0

    def hangs() -> None:
        nonlocal attempts
        attempts += 1
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        retrier.call_sync(hangs)
    assert attempts == 1
    assert _calls(registry, "cancelled") == 1.0


async def _cancelled_ending(
    instrument: HearsEndings | RecordingInstrument,
) -> tuple[CallFinished, BaseException]:
    """The `CallFinished` ``instrument`` hears of a call cancelled during its first attempt,
    and the cancellation that attempt saw."""
    retrier = Retrier(RetryPolicy(attempts=3), instruments=[instrument], budget=None)
    seen: list[BaseException] = []

    async def hangs() -> None:
        outer.cancel()
        try:
            await anyio.sleep_forever()
        except BaseException as error:
            seen.append(error)
            raise

    with anyio.CancelScope() as outer:
        await retrier.call(hangs)
    [finished] = instrument.of_type(CallFinished)
    return finished, seen[0]


async def test_the_bare_path_reports_a_cancelled_call_as_the_full_path_does() -> None:
    """The same cancelled call, seen by an instrument of endings only (bare first attempt) and
    by one that also hears starts (the full path): the same ending."""
    endings: list[tuple[Any, ...]] = []
    for instrument in (HearsEndings(), RecordingInstrument()):
        finished, cancellation = await _cancelled_ending(instrument)
        assert finished.exception is cancellation
        endings.append((finished.outcome, finished.attempts, finished.error_type, finished.status))
    assert endings[0] == endings[1]
    assert endings[0][:2] == ("cancelled", 1)
