"""The testing kit users get: FakeClock, RecordingInstrument and instant()."""

from __future__ import annotations

import threading

import anyio
import pytest

from retrymw._core.clock import waits_disabled
from retrymw.testing import FakeClock, instant

pytestmark = pytest.mark.anyio


async def test_fake_clock_sleep_advances_time_and_records() -> None:
    """Sleeping on the fake clock moves now() and wall() forward and records the delay."""
    clock = FakeClock(start=10.0, wall_start=1_000.0)
    await clock.sleep(2.5)
    clock.sleep_sync(0.5)
    clock.advance(1.0)
    assert clock.now() == 14.0
    assert clock.wall() == 1_004.0
    assert clock.sleeps == [2.5, 0.5]


def test_fake_clock_refuses_to_go_back() -> None:
    """advance() with a negative value is an error naming the argument."""
    with pytest.raises(ValueError, match="seconds: cannot go back in time"):
        FakeClock().advance(-1)


async def test_fake_clock_sleep_is_a_cancellation_point() -> None:
    """A cancelled scope stops at the fake sleep instead of running past it."""
    clock = FakeClock()
    reached = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        await clock.sleep(1)
        reached = True
    assert not reached


async def test_instant_is_scoped_to_its_block() -> None:
    """instant() switches waits off inside the block only."""
    assert not waits_disabled()
    with instant():
        assert waits_disabled()
        with instant():
            assert waits_disabled()
        assert waits_disabled()
    assert not waits_disabled()


def test_instant_does_not_leak_to_other_threads() -> None:
    """Another thread started inside instant() does not inherit the switch."""
    seen: list[bool] = []
    with instant():
        worker = threading.Thread(target=lambda: seen.append(waits_disabled()))
        worker.start()
        worker.join()
    assert seen == [False]
