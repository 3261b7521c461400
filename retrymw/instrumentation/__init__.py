"""Instruments: the `Instrument` interface and the logging, Prometheus and OpenTelemetry ones."""

from __future__ import annotations

from collections.abc import Iterable

from ._base import Instrument as Instrument
from ._logging import LoggingInstrument as LoggingInstrument

__all__ = [
    "Instrument",
    "LoggingInstrument",
    "default_instruments",
    "set_default_instruments",
]

_defaults: tuple[Instrument, ...] | None = None


def default_instruments() -> tuple[Instrument, ...]:
    """The instruments a `Retrier` or transport uses when given ``instruments=None``."""
    if _defaults is not None:
        return _defaults
    return (LoggingInstrument(),)


def set_default_instruments(instruments: Iterable[Instrument] | None) -> None:
    """Replace the process-wide default instruments; ``None`` restores the built-in defaults.

    Objects created afterwards use the new defaults; existing ones keep theirs.
    """
    global _defaults
    _defaults = None if instruments is None else tuple(instruments)
