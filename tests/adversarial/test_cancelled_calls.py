"""A call cancelled during its first attempt is counted, whichever path ran that attempt.

A call whose instruments only hear of endings (`PrometheusInstrument`) runs its first attempt
outside a `CallRun` when nothing else needs one. Cancelled there (a caller's deadline, a task
group shutting down) or interrupted (``KeyboardInterrupt``), it used to vanish from the
telemetry: no ``retrymw_call_duration_seconds{retrymw_outcome="cancelled"}``, during exactly
the incidents where callers give up on a hung dependency. It is now told as the full path tells
it: the call ends ``cancelled``, with the error, and no attempt outcome
(tests/adversarial/test_bare_path.py compares the two paths' endings).
"""

from __future__ import annotations

import anyio
import pytest
from prometheus_client import CollectorRegistry

from retrymw import Retrier
from retrymw.instrumentation import PrometheusInstrument
from retrymw.instrumentation import _names as names

pytestmark = pytest.mark.anyio


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
