"""retrymw's pytest plugin: fixtures for testing code that retries.

Loaded automatically when retrymw is installed (the ``pytest11`` entry point ``retrymw``); turn
it off with ``-p no:retrymw``. Nothing happens unless a test asks for a fixture by name (or the
suite sets the ``retrymw_fresh_protection`` ini option), so a suite that does neither runs
exactly as without the plugin. Every fixture works in sync tests and under pytest-asyncio
(strict or auto mode) and anyio's plugin (asyncio or trio).

- ``retrymw_instant``: every retry waits 0 s (`retrymw.testing.instant`, for every task);
- ``retrymw_clock``: a `FakeClock` that every retrymw object without ``clock=`` uses;
- ``retrymw_loop_clock``: a `LoopClock`, which asyncio's loop runs on too, so ``asyncio.sleep``
  in the code under test and retrymw's waits move together, in virtual time;
- ``retrymw_recorder``: a `Recorder` among the default instruments, with ``assert_call``;
- ``retrymw_fresh_protection``: the protection retrymw made by default (the budget of every
  retrier and transport built without ``budget=``, a module-level ``@retry``'s included) is as
  if new when the test starts; ``retrymw_fresh_protection = true`` in the ini file gives it to
  every test of the suite;
- ``retrymw_reset``: what the others build on: the default instruments, clock, instant switch
  and cached helper retrier are put back after the test, and default protection is fresh.

.. versionadded:: 0.2
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import sniffio

from .. import instrumentation
from .._core import clock as _clock
from .._engine.retrier_args import reset_default_protection
from ._clocks import LoopClock, use_clock
from ._fakes import FakeClock
from ._recorder import Recorder

__all__ = [
    "pytest_addoption",
    "retrymw_clock",
    "retrymw_fresh_protection",
    "retrymw_instant",
    "retrymw_loop_clock",
    "retrymw_recorder",
    "retrymw_reset",
]

#: The ini option that gives every test of a suite `retrymw_fresh_protection`.
FRESH_PROTECTION_INI = "retrymw_fresh_protection"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the ``retrymw_fresh_protection`` ini option (off by default)."""
    parser.addini(
        FRESH_PROTECTION_INI,
        "give every test the retrymw_fresh_protection fixture: default retry budgets as if new",
        type="bool",
        default=False,
    )


@pytest.fixture
def retrymw_reset() -> Iterator[None]:
    """Put retrymw's process-wide defaults back as they were after the test; default
    protection is fresh before and after it."""
    instruments = instrumentation._defaults
    default_clock, everywhere = _clock._default_clock, _clock._instant_everywhere
    reset_default_protection()
    try:
        yield
    finally:
        instrumentation.set_default_instruments(instruments)
        _clock.replace_default_clock(default_clock)
        _clock.set_instant_everywhere(everywhere)
        reset_default_protection()


@pytest.fixture
def retrymw_fresh_protection() -> Iterator[None]:
    """The protection retrymw made by default is as if new for the test, and again after it.

    That is the budget of every `Retrier` and transport built without ``budget=``, including a
    module-level ``@retry``'s, built once at import and so shared by every test: without this,
    the tests that run first spend its tokens and later ones are denied retries. Protection
    the code under test was given (``budget=``, ``breaker=``, ``throttle=``) is left alone.
    """
    reset_default_protection()
    yield
    reset_default_protection()


@pytest.fixture(autouse=True)
def _retrymw_fresh_protection_for_the_suite(request: pytest.FixtureRequest) -> None:
    """Every test gets `retrymw_fresh_protection` when the ini option says so."""
    if request.config.getini(FRESH_PROTECTION_INI):
        request.getfixturevalue("retrymw_fresh_protection")


@pytest.fixture
def retrymw_instant(retrymw_reset: None) -> None:
    """Every retry of the test waits 0 s, in every task and thread; attempts are unchanged."""
    _clock.set_instant_everywhere(True)


@pytest.fixture
def retrymw_clock(retrymw_reset: None) -> Iterator[FakeClock]:
    """A `FakeClock` that every retrymw object built without ``clock=`` reads and sleeps on."""
    clock = FakeClock()
    with use_clock(clock):
        yield clock


@pytest.fixture
def retrymw_loop_clock(request: pytest.FixtureRequest, retrymw_reset: None) -> Iterator[LoopClock]:
    """A `LoopClock`: the default clock, and the asyncio loop's clock while the test runs.

    An async test runs on the loop's virtual time from its first line (async fixtures set up
    before it do not). Under trio it is a plain `FakeClock`; give trio a
    ``trio.testing.MockClock(autojump_threshold=0)`` for the code's own sleeps.
    """
    clock = LoopClock()
    node = request.node
    test = getattr(node, "obj", None)
    wrap = isinstance(node, pytest.Function) and inspect.iscoroutinefunction(test)
    if wrap:
        # The fixture runs before the test's event loop does: the test itself attaches it.
        node.obj = _on_clock(test, clock)
    try:
        with use_clock(clock):
            yield clock
    finally:
        if wrap:
            node.obj = test


def _on_clock(test: Any, clock: LoopClock) -> Any:
    """Wrap an async test so that its event loop runs on ``clock`` while it runs."""

    @functools.wraps(test)
    async def run_on_clock(*args: Any, **kwargs: Any) -> Any:
        attach = sniffio.current_async_library() == "asyncio"
        if attach:
            clock.attach()
        try:
            return await test(*args, **kwargs)
        finally:
            if attach:
                clock.detach()

    return run_on_clock


@pytest.fixture
def retrymw_recorder(retrymw_reset: None) -> Recorder:
    """A `Recorder`: the default instrument of every retrymw object built in the test.

    It joins the instruments set with `retrymw.set_default_instruments`, if any; the built-in
    ones (logging, and Prometheus and OpenTelemetry on their global registries) are left out,
    so that no test's calls show up in another test's metrics.
    """
    recorder = Recorder()
    instrumentation.set_default_instruments((*(instrumentation._defaults or ()), recorder))
    return recorder
