"""Instruments: the `Instrument` interface and the logging, Prometheus and OpenTelemetry ones.

`PrometheusInstrument` and `OpenTelemetryInstrument` are imported on first access, so that
``import retrymw`` never imports prometheus_client or opentelemetry.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._core.forks import ForkSafeLock
from .._core.instruments import Instrument as Instrument
from ._logging import LoggingInstrument as LoggingInstrument

if TYPE_CHECKING:
    from ._otel import OpenTelemetryInstrument as OpenTelemetryInstrument
    from ._prometheus import PrometheusInstrument as PrometheusInstrument

__all__ = [
    "Instrument",
    "LoggingInstrument",
    "OpenTelemetryInstrument",
    "PrometheusInstrument",
    "default_instruments",
    "set_default_instruments",
]

_defaults: tuple[Instrument, ...] | None = None
_builtin: tuple[Instrument, ...] | None = None
_builtin_lock = ForkSafeLock()


def default_instruments() -> tuple[Instrument, ...]:
    """The instruments a `Retrier` or transport uses when given ``instruments=None``.

    Those set by `set_default_instruments`, else the built-in defaults, created once per
    process: a `LoggingInstrument`; a `PrometheusInstrument` on prometheus_client's default
    registry if prometheus_client is installed; an `OpenTelemetryInstrument` on the global
    providers if opentelemetry-api is installed.
    """
    if _defaults is not None:
        return _defaults
    return _builtin if _builtin is not None else _build_builtin()


def set_default_instruments(instruments: Iterable[Instrument] | None) -> None:
    """Replace the process-wide default instruments; ``None`` restores the built-in defaults.

    Objects created afterwards use the new defaults; existing ones keep theirs.
    """
    global _defaults
    _defaults = None if instruments is None else tuple(instruments)


def _build_builtin() -> tuple[Instrument, ...]:
    global _builtin
    with _builtin_lock:
        if _builtin is None:
            instruments: list[Instrument] = [LoggingInstrument()]
            for name in ("PrometheusInstrument", "OpenTelemetryInstrument"):
                instrument = _create_optional(name)
                if instrument is not None:
                    instruments.append(instrument)
            _builtin = tuple(instruments)
        return _builtin


def _create_optional(name: str) -> Instrument | None:
    """One built-in instrument of an extra, or ``None`` when the extra is not installed."""
    try:
        instrument: Instrument = __getattr__(name)()
    except ImportError:
        return None
    except Exception:
        # Telemetry never breaks the code it observes, not even at construction.
        logging.getLogger("retrymw").exception(
            "could not create the default %s; continuing without it", name
        )
        return None
    return instrument


def __getattr__(name: str) -> Any:
    if name == "PrometheusInstrument":
        from ._prometheus import PrometheusInstrument

        return PrometheusInstrument
    if name == "OpenTelemetryInstrument":
        from ._otel import OpenTelemetryInstrument

        return OpenTelemetryInstrument
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
