"""A deterministic, virtual-time retry-storm simulator that runs retrymw's real objects.

`simulate` runs one `Scenario` with real `Retrier`, `RetryBudget` and `CircuitBreaker` objects
on a virtual clock; `suite` lists the scenario groups the docs and `retrymw simulate` report;
`render_table` lays results out; `jitter_spread` measures one jitter kind at the cap.

    >>> from retrymw.simulate import Scenario, simulate
    >>> simulate(Scenario("outage", rate=10, duration=20, warmup=10)).amplification <= 1.1
    True

.. versionadded:: 0.1
"""

from __future__ import annotations

from ._core.exports import publish
from ._simulate.engine import Scenario as Scenario
from ._simulate.engine import SimulatedFailure as SimulatedFailure
from ._simulate.engine import SimulationResult as SimulationResult
from ._simulate.engine import simulate as simulate
from ._simulate.engine import suite as suite
from ._simulate.report import JitterSpread as JitterSpread
from ._simulate.report import jitter_spread as jitter_spread
from ._simulate.report import render_table as render_table

__all__ = [
    "JitterSpread",
    "Scenario",
    "SimulatedFailure",
    "SimulationResult",
    "jitter_spread",
    "render_table",
    "simulate",
    "suite",
]

publish(globals(), __all__, __name__)

if __name__ == "__main__":
    print(render_table(simulate(scenario) for scenario in suite()))
