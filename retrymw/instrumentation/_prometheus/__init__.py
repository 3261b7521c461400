"""`PrometheusInstrument` and what it needs: the instrument, its live gauges and its exemplars.

Importing this package needs prometheus_client (the ``prometheus`` extra); the instrumentation
namespace imports it only when `PrometheusInstrument` is first asked for.
"""

from .instrument import PrometheusInstrument as PrometheusInstrument

__all__ = ["PrometheusInstrument"]
