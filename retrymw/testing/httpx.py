"""`FaultTransport` for httpx clients (`retrymw.testing.FaultTransport` is the httpx one).

.. versionadded:: 0.2
"""

from __future__ import annotations

try:
    import httpx  # noqa: F401  (checked first, for this message; the flavour uses it)
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("retrymw.testing.httpx needs httpx: pip install 'retrymw[httpx]'") from None

from .._http.flavour import flavour_named
from ._faults import Fault as Fault
from ._faults import fault_transport_class

__all__ = ["Fault", "FaultTransport"]

FaultTransport = fault_transport_class(flavour_named("httpx"), __name__)
