"""The pieces behind the pytest plugin: Recorder, use_clock, LoopClock and the process switches."""

from __future__ import annotations

import asyncio
import time

import pytest

from retrymw import Retrier, RetryPolicy
from retrymw._core import clock as core_clock
from retrymw._core.clock import SYSTEM_CLOCK, waits_disabled
from retrymw.testing import FakeClock, LoopClock, Recorder, use_clock

pytestmark = pytest.mark.anyio


class Flaky(Exception):
    pass


def _retrier(recorder: Recorder, clock: FakeClock, **fields: object) -> Retrier:
    fields = {"attempts": 3, "retry_on": [Flaky], "initial_delay": 1.0, **fields}
    return Retrier(RetryPolicy(**fields), instruments=(recorder,), clock=clock)  # type: ignore[arg-type]


async def test_recorder_groups_events_into_calls() -> None:
    """Two calls of different operations are two records, with their attempts and delays."""
    recorder, clock = Recorder(), FakeClock()
    retrier = _retrier(recorder, clock)
    outcomes = iter([Flaky("a"), None])

    async def sometimes() -> str:
        error = next(outcomes)
        if error is not None:
            raise error
        return "ok"

    async def never() -> None:
        raise Flaky("down")

    assert await retrier.call(sometimes) == "ok"
    with pytest.raises(Flaky):
        await retrier.call(never)
    first, second = recorder.calls
    assert (first.operation, first.attempts, first.outcome, first.gave_up) == (
        "sometimes",
        2,
        "success",
        None,
    )
    assert first.errors == ("Flaky",)
    assert second.delays == (1.0, 2.0)
    assert recorder.attempts == 5
    assert recorder.delays == [1.0, 1.0, 2.0]
    assert recorder.reasons == ["max_attempts"]
    recorder.assert_call(operation="sometimes", attempts=2, gave_up=None)
    recorder.assert_call(0, outcome="success")
    with pytest.raises(AssertionError, match="expected no retries"):
        recorder.assert_no_retries()
    recorder.clear()
    assert recorder.calls == []
    recorder.assert_no_retries()


async def test_recorder_sees_a_call_that_is_still_running() -> None:
    """A call in progress is listed with outcome None and the attempts so far."""
    recorder, clock = Recorder(), FakeClock()
    seen = []

    async def peek() -> None:
        seen.append(recorder.calls[-1])
        raise Flaky("down")

    with pytest.raises(Flaky):
        await _retrier(recorder, clock, attempts=2).call(peek)
    assert [(c.attempts, c.outcome) for c in seen] == [(1, None), (2, None)]
    assert "still running" in seen[0].describe()


def test_recorder_failures_say_what_differs() -> None:
    """Every mismatch is named, and every recorded call is listed."""
    recorder = Recorder()
    with pytest.raises(AssertionError, match="recorded no call"):
        recorder.assert_call()

    def down() -> None:
        raise Flaky("down")

    with pytest.raises(Flaky):
        _retrier(recorder, FakeClock(), attempts=2).call_sync(down)
    with pytest.raises(AssertionError) as failed:
        recorder.assert_call(outcome="success", delays=[2.0], status=503)
    message = str(failed.value)
    assert "expected outcome 'success', got 'exhausted'" in message
    assert "expected delays [2.0], got [1.0]" in message
    assert "expected status 503, got None" in message
    assert "1. down (policy 'default', target 'down'): 2 attempts, delays [1s]" in message
    with pytest.raises(AssertionError, match="no retrymw call of 'other' at index -1"):
        recorder.assert_call(operation="other")
    with pytest.raises(AssertionError, match="at index 3"):
        recorder.assert_call(3)
    assert repr(recorder).startswith("<Recorder calls=1")


async def test_use_clock_makes_the_system_clock_follow_a_fake_one() -> None:
    """Inside use_clock every default-clock read and sleep goes to the fake clock; then back."""
    outer, inner = FakeClock(start=5.0), FakeClock(start=50.0, wall_start=10.0)
    with use_clock(outer):
        assert SYSTEM_CLOCK.now() == 5.0
        with use_clock(inner) as current:
            assert current is inner
            await SYSTEM_CLOCK.sleep(2.0)
            SYSTEM_CLOCK.sleep_sync(1.0)
            assert SYSTEM_CLOCK.wall() == 13.0
        assert SYSTEM_CLOCK.now() == 5.0
        with use_clock(SYSTEM_CLOCK):  # the real clock as default means "no override"
            assert core_clock._default_clock is None
    assert inner.sleeps == [2.0, 1.0]
    assert core_clock._default_clock is None
    assert abs(SYSTEM_CLOCK.now() - time.monotonic()) < 60.0
    assert abs(SYSTEM_CLOCK.wall() - time.time()) < 60.0


def test_instant_everywhere_is_a_process_switch() -> None:
    """The plugin's switch turns waits off for every context until it is put back."""
    previous = core_clock.set_instant_everywhere(True)
    try:
        assert waits_disabled()
    finally:
        core_clock.set_instant_everywhere(previous)
    assert not waits_disabled()


def test_loop_clock_drives_asyncio_in_virtual_time() -> None:
    """Attached, asyncio timers fire in virtual order at once; detached, the loop is real again."""
    clock = LoopClock(start=100.0)
    order: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await asyncio.sleep(seconds)
        order.append((name, clock.now()))

    async def main() -> float:
        loop = asyncio.get_running_loop()
        clock.attach()
        clock.attach(loop)  # attaching the same loop again changes nothing
        assert clock.attached
        started = loop.time()
        await clock.sleep(3600.0)
        await asyncio.gather(sleeper("late", 7200.0), sleeper("early", 60.0))
        # I/O from another thread still wakes the loop: no timer pending, a real wait.
        await loop.run_in_executor(None, time.sleep, 0.001)
        elapsed = loop.time() - started
        clock.detach()
        clock.detach()
        assert abs(loop.time() - time.monotonic()) < 60.0
        return elapsed

    # loop.time() adds the virtual offset to a real base, and a timer's deadline is converted
    # back: compare within float rounding, which still rejects a real 1 ms wait leaking in.
    assert asyncio.run(main()) == pytest.approx(10800.0, abs=1e-6)
    assert [name for name, _ in order] == ["early", "late"]
    assert [at for _, at in order] == pytest.approx([3760.0, 10900.0], abs=1e-6)
    assert clock.sleeps == [3600.0]
    assert repr(clock) == "<LoopClock now=10900 sleeps=1 detached>"


def test_loop_clock_waits_for_io_within_its_threshold() -> None:
    """With a threshold, I/O that lands in time is handled before virtual time jumps."""
    clock = LoopClock(autojump_threshold=1.0)

    async def main() -> None:
        clock.attach()
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.call_later(60.0, lambda: None)  # a far timer: the loop would jump to it
        loop.call_soon_threadsafe(ready.set_result, "io")
        assert await ready == "io"
        await asyncio.sleep(5.0)
        clock.detach()

    asyncio.run(main())
    assert clock.now() == 5.0


async def test_loop_clock_is_a_fake_clock_when_detached() -> None:
    """Not attached (trio, or another loop), sleeping is a FakeClock's."""
    clock = LoopClock()
    await clock.sleep(2.0)
    clock.sleep_sync(1.0)
    assert (clock.now(), clock.sleeps) == (3.0, [2.0, 1.0])


def test_loop_clock_refuses_loops_it_cannot_drive() -> None:
    """A loop without a selector, or a second loop, is refused with the reason."""

    class NoSelectorLoop(asyncio.AbstractEventLoop):
        pass

    with pytest.raises(TypeError, match="NoSelectorLoop has no selector"):
        LoopClock().attach(NoSelectorLoop())  # type: ignore[abstract]
    clock = LoopClock()
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        clock.attach(first)
        with pytest.raises(RuntimeError, match="already attached"):
            clock.attach(second)
        clock.detach()
    finally:
        first.close()
        second.close()
