"""The machinery of the telemetry names: `MetricSpec`, the OTel → Prometheus name translation,
and `BoundedValues`, the cap on a label's distinct values. The names themselves are `_names`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .._core.forks import ForkSafeLock
from ._vocab import ATTRIBUTE_OF_LABEL

__all__ = ["BoundedValues", "Kind", "MetricSpec", "prometheus_label", "prometheus_name"]

Kind = Literal["counter", "histogram", "gauge"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric of the contract, as both instruments create it.

    Attributes:
        prometheus: the exposed name (counters include ``_total``).
        otel: the OTel instrument name.
        kind: ``counter``, ``histogram`` or ``gauge``.
        unit: the OTel unit (``s`` or an annotation such as ``{call}``).
        labels: Prometheus label names, in order; `ATTRIBUTE_OF_LABEL` gives the OTel keys.
        description: the help text.
        buckets: histogram bucket upper bounds (``+Inf`` implied).
        multiprocess_mode: how prometheus_client multiprocess mode merges a gauge's values.
        semconv: the OTel attribute keys, for a metric labelled by the HTTP semantic
            conventions (its labels are their `prometheus_label`); ``None`` for retrymw's own.
    """

    prometheus: str
    otel: str
    kind: Kind
    unit: str
    labels: tuple[str, ...]
    description: str
    buckets: tuple[float, ...] | None = None
    multiprocess_mode: str | None = None
    semconv: tuple[str, ...] | None = None

    @property
    def attributes(self) -> tuple[str, ...]:
        """The OTel attribute keys matching `labels`."""
        if self.semconv is not None:
            return self.semconv
        return tuple(ATTRIBUTE_OF_LABEL[label] for label in self.labels)

    @property
    def series(self) -> int:
        """Exposition series one label set adds: a histogram's buckets (``+Inf`` too),
        ``_count`` and ``_sum``; a counter's ``_total``; a gauge. retrymw exports no
        ``_created`` series (`_prometheus.live.Exported`), nor does OpenTelemetry's exporter."""
        if self.kind == "histogram":
            return len(self.buckets or ()) + 3
        return 1


_UNIT_SUFFIXES = {"s": "seconds", "ms": "milliseconds", "By": "bytes"}
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


def prometheus_name(otel_name: str, unit: str, kind: Kind) -> str:
    """Translate an OTel instrument to its Prometheus name, as the OTel exporters do.

    Args:
        otel_name: the instrument name, e.g. ``retrymw.retries.denied``.
        unit: its unit; annotations in braces add no suffix.
        kind: ``counter`` adds ``_total``.

    Returns:
        The exported metric name, e.g. ``retrymw_retries_denied_total``.
    """
    name = _INVALID.sub("_", otel_name)
    unit = re.sub(r"\{[^}]*\}", "", unit)
    suffix = _UNIT_SUFFIXES.get(unit, _INVALID.sub("_", unit))
    if suffix and not name.endswith("_" + suffix):
        name = f"{name}_{suffix}"
    if kind == "counter" and not name.endswith("_total"):
        name += "_total"
    return name


def prometheus_label(attribute: str) -> str:
    """Translate an OTel attribute key to its Prometheus label, as the OTel exporters do.

    Args:
        attribute: the key, e.g. ``server.address``.

    Returns:
        The label name, e.g. ``server_address``.
    """
    return _INVALID.sub("_", attribute)


class BoundedValues:
    """A label's set of admitted values: the first ``limit`` pass, later ones become ``overflow``.

    Thread-safe; admitted values are never evicted, so a series never changes meaning.

    Args:
        limit: how many distinct values keep their own series.
        overflow: the value reported for every later one.
    """

    __slots__ = ("_lock", "_seen", "limit", "overflow")

    def __init__(self, limit: int, overflow: str) -> None:
        self.limit = limit
        self.overflow = overflow
        self._seen: set[str] = set()
        self._lock = ForkSafeLock()

    def __call__(self, value: str) -> str:
        """Return ``value`` if it is (or can be) admitted, else the overflow value."""
        if value in self._seen:
            return value
        with self._lock:
            if value in self._seen or len(self._seen) < self.limit:
                self._seen.add(value)
                return value
        return self.overflow

    def __len__(self) -> int:
        return len(self._seen)
