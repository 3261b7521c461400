"""`FaultTransport` for httpx clients (`retrymw.testing.FaultTransport` is the httpx one).

.. versionadded:: 0.2
"""

from __future__ import annotations

try:
    import httpx
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("retrymw.testing.httpx needs httpx: pip install 'retrymw[httpx]'") from None

from ._faults import Fault as Fault
from ._faults import Flavour, fault_transport_class

__all__ = ["Fault", "FaultTransport"]

FaultTransport = fault_transport_class(Flavour.of(httpx), __name__)
