"""Shared fixtures: both async backends, a fake clock and a recording instrument."""

from __future__ import annotations

import pytest

from retrymw.testing import FakeClock, RecordingInstrument


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param("trio", id="trio")])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every anyio test on asyncio and on trio."""
    return str(request.param)


@pytest.fixture
def clock() -> FakeClock:
    """A virtual clock: sleeps advance it at once and are recorded."""
    return FakeClock()


@pytest.fixture
def recorder() -> RecordingInstrument:
    """An instrument that keeps every event."""
    return RecordingInstrument()
