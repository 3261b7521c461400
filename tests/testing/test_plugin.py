"""The pytest plugin, as users get it: loaded through its entry point in a separate pytest run.

Each run is a fresh ``pytest`` process (pytester's subprocess mode) that finds the plugin
through the installed package's ``pytest11`` entry point, with ``filterwarnings = error``, under
pytest-asyncio's strict and auto modes, anyio's plugin (asyncio and trio), and in sync tests.
"""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

# A user's test module; {mark} makes its async tests run under one plugin and mode.
USER_TESTS = """
import asyncio
import time

import httpx
import pytest
import sniffio

import retrymw.instrumentation
from retrymw import Retrier, RetryPolicy
from retrymw._core import clock as core_clock
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.testing import FakeClock, FaultTransport, Recorder

MARK = {mark}


class Flaky(Exception):
    pass


def flaky_policy(**fields):
    fields = {"attempts": 3, "retry_on": [Flaky], "initial_delay": 1.0, "max_delay": 60.0, **fields}
    return RetryPolicy(**fields)


# Built at import time, before any fixture: it must still follow the test's clock.
IMPORTED = Retrier(flaky_policy(), instruments=())


async def always_down():
    raise Flaky("down")


def always_down_sync():
    raise Flaky("down")


def test_plugin_came_from_the_entry_point(request):
    plugin = request.config.pluginmanager.get_plugin("retrymw")
    assert plugin.__name__ == "retrymw.testing._plugin"


@MARK
async def test_three_attempts_then_give_up(retrymw_instant, retrymw_recorder):
    clock = FakeClock()
    retrier = Retrier(flaky_policy(initial_delay=10.0), clock=clock)
    with pytest.raises(Flaky):
        await retrier.call(always_down)
    retrymw_recorder.assert_call(attempts=3, gave_up="max_attempts", delays=[10.0, 20.0])
    assert clock.sleeps == []


@MARK
async def test_clock_is_every_objects_default(retrymw_clock, retrymw_recorder):
    with pytest.raises(Flaky):
        await Retrier(flaky_policy()).call(always_down)
    with pytest.raises(Flaky):
        await IMPORTED.call(always_down)
    assert retrymw_clock.sleeps == [1.0, 2.0, 1.0, 2.0]
    assert retrymw_clock.now() == 6.0
    retrymw_recorder.assert_call(0, attempts=3, outcome="exhausted", gave_up="max_attempts")


@MARK
async def test_loop_clock_moves_with_the_event_loop(retrymw_loop_clock):
    clock = retrymw_loop_clock
    order = []

    async def call():
        with pytest.raises(Flaky):
            await Retrier(flaky_policy(backoff="fixed"), instruments=()).call(always_down)
        order.append(("retrier", clock.now()))

    if sniffio.current_async_library() == "trio":
        await call()  # trio keeps its own clock: a plain FakeClock for retrymw
        assert order == [("retrier", 2.0)]
        return

    async def poller():
        await asyncio.sleep(2.5)
        order.append(("poller", clock.now()))

    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.gather(poller(), call())
    assert order == [("retrier", 2.0), ("poller", 2.5)]
    assert loop.time() - started == 2.5
    assert clock.sleeps == [1.0, 1.0]


@MARK
async def test_recorder_explains_a_failed_assertion(retrymw_instant, retrymw_recorder):
    with pytest.raises(Flaky):
        await Retrier(flaky_policy()).call(always_down)
    with pytest.raises(AssertionError) as failed:
        retrymw_recorder.assert_call(attempts=2, gave_up=None)
    assert "expected 2 attempts, got 3" in str(failed.value)
    assert "expected gave_up=None, got 'max_attempts'" in str(failed.value)
    assert "1. always_down (policy 'default'" in str(failed.value)


@MARK
async def test_fault_transport_under_the_clock(retrymw_clock, retrymw_recorder):
    faults = FaultTransport(script=[503, "reset", 200], latency=0.25)
    policy = RetryPolicy(attempts=3, initial_delay=1.0, jitter=False)
    transport = AsyncRetryTransport(faults, policy=policy)
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get("http://upstream.test/items")
    assert response.status_code == 200
    assert faults.injected == ["503", "reset", "200"]
    retrymw_recorder.assert_call(attempts=3, outcome="success", delays=[1.0, 2.0])
    assert retrymw_clock.now() == 3.75


def test_sync_three_attempts_then_give_up(retrymw_instant, retrymw_recorder):
    with pytest.raises(Flaky):
        Retrier(flaky_policy(initial_delay=30.0)).call_sync(always_down_sync)
    retrymw_recorder.assert_call(attempts=3, gave_up="max_attempts", delays=[30.0, 60.0])


def test_sync_clocks_and_faults(retrymw_clock, retrymw_recorder):
    faults = FaultTransport(script=[429, 200])
    with httpx.Client(transport=RetryTransport(faults)) as client:
        assert client.get("http://upstream.test/").status_code == 200
    with pytest.raises(Flaky):
        IMPORTED.call_sync(always_down_sync)
    assert len(retrymw_clock.sleeps) == 3
    retrymw_recorder.assert_call(0, attempts=2, outcome="success", status=200)


def test_sync_loop_clock_is_a_fake_clock(retrymw_loop_clock):
    with pytest.raises(Flaky):
        IMPORTED.call_sync(always_down_sync)
    assert retrymw_loop_clock.sleeps == [1.0, 2.0]
    assert not retrymw_loop_clock.attached


def test_zz_every_default_is_back():
    assert core_clock._default_clock is None
    assert not core_clock.waits_disabled()
    assert not any(isinstance(i, Recorder) for i in retrymw.instrumentation.default_instruments())
    assert 1.0 < time.monotonic() == pytest.approx(IMPORTED.clock.now(), abs=5.0)
"""

ANYIO_CONFTEST = """
import pytest

@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
"""

MODES = [
    pytest.param("strict", "pytest.mark.asyncio", 10, id="pytest-asyncio-strict"),
    pytest.param("auto", "(lambda test: test)", 10, id="pytest-asyncio-auto"),
    pytest.param("strict", "pytest.mark.anyio", 15, id="anyio-asyncio-and-trio"),
]


def _user_suite(pytester: pytest.Pytester, mode: str, mark: str) -> None:
    pytester.makeini(
        f"""
        [pytest]
        asyncio_mode = {mode}
        asyncio_default_fixture_loop_scope = function
        asyncio_default_test_loop_scope = function
        filterwarnings = error
        """
    )
    if "anyio" in mark:
        pytester.makeconftest(ANYIO_CONFTEST)
    pytester.makepyfile(test_user=USER_TESTS.replace("{mark}", mark))


@pytest.mark.parametrize(("mode", "mark", "passed"), MODES)
def test_every_fixture_works_in_a_users_suite(
    pytester: pytest.Pytester, mode: str, mark: str, passed: int
) -> None:
    """Each fixture works in sync tests and under pytest-asyncio or anyio, warning-free."""
    _user_suite(pytester, mode, mark)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--durations=0", "-vv")
    result.assert_outcomes(passed=passed)
    # The figure the issue asks for: "3 attempts then give up" in well under 10 ms of wall time
    # (reported by pytest; not asserted, as no test here asserts wall-clock time).
    timings = re.findall(
        r"([\d.]+)s call +\S*test_three_attempts_then_give_up", result.stdout.str()
    )
    assert timings


def test_the_plugin_can_be_turned_off(pytester: pytest.Pytester) -> None:
    """``-p no:retrymw`` leaves the fixtures undefined."""
    _user_suite(pytester, "strict", "pytest.mark.asyncio")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:retrymw")
    result.assert_outcomes(passed=1, failed=1, errors=8)
    result.stdout.fnmatch_lines(["*fixture 'retrymw_instant' not found*"])
