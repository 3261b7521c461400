"""``retrymw demo``: retrymw at work against a flaky upstream, with metrics, traces and a summary.

The command (`_command`) runs one demo (`_run`: the `FlakyUpstream` of `_upstream`, the load,
the console of `_console` and `_report`, the spans of `_trace`, OTLP metrics of `_otlp`) or,
with ``--fleet N``, N client processes (`_fleet`, `_fleet_member`) sharing a budget on a
redis-server it starts itself (`_redis_server`).
"""

from __future__ import annotations

from ._command import DESCRIPTION as DESCRIPTION
from ._command import EPILOG as EPILOG
from ._command import HELP as HELP
from ._command import NAME as NAME
from ._command import configure as configure
from ._command import run as run

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "configure", "run"]
