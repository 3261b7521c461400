"""Test without sleeping: clocks, recorders, `instant`, fault injection and a pytest plugin.

These ship with the package so that users test their own retrying code the way retrymw's suite
does: in virtual time, with every event recorded. `FaultTransport` (httpx; the httpx2 one is in
`retrymw.testing.httpx2`) is imported on first access, so that this module never imports httpx.
The pytest plugin (`retrymw.testing._plugin`) is loaded by pytest itself.

.. versionadded:: 0.1
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core.exports import publish
from ._clocks import LoopClock as LoopClock
from ._clocks import use_clock as use_clock
from ._fakes import FakeClock as FakeClock
from ._fakes import RecordingInstrument as RecordingInstrument
from ._fakes import instant as instant
from ._faults import Fault as Fault
from ._recorder import CallRecord as CallRecord
from ._recorder import Recorder as Recorder

if TYPE_CHECKING:
    from .httpx import FaultTransport as FaultTransport

__all__ = [
    "CallRecord",
    "FakeClock",
    "Fault",
    "FaultTransport",
    "LoopClock",
    "Recorder",
    "RecordingInstrument",
    "instant",
    "use_clock",
]

publish(globals(), [name for name in __all__ if name != "FaultTransport"], __name__)


def __getattr__(name: str) -> Any:
    if name == "FaultTransport":
        from .httpx import FaultTransport

        return FaultTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
