"""Test without sleeping: `FakeClock`, `RecordingInstrument` and `instant`.

These ship with the package so that users test their own retrying code the way retrymw's suite
does: in virtual time, with every event recorded.

.. versionadded:: 0.1
"""

from __future__ import annotations

from .._core.exports import publish
from ._fakes import FakeClock as FakeClock
from ._fakes import RecordingInstrument as RecordingInstrument
from ._fakes import instant as instant

__all__ = ["FakeClock", "RecordingInstrument", "instant"]

publish(globals(), __all__, __name__)
