"""A deterministic, virtual-time retry-storm simulator that runs retrymw's real objects.

`simulate` runs one `Scenario` with real `Retrier`, `RetryBudget`, `CircuitBreaker` and
`AdaptiveThrottle` objects on a virtual clock; `suite` lists the scenario groups the docs and
`retrymw simulate` report; `compare` runs the `situations` (partial failure, brownout, outage,
recovery, overload, many low-rate clients, clients in step) with each of the `SETUPS`;
`frontier` runs a blip and outages with each of the `FRONTIER_SETUPS` (what a setup rescues,
and what it costs); `render_table`, `render_comparison` and `render_frontier` lay results out;
`jitter_spread` measures one jitter kind at the cap; `simulate_rate_limit` runs clients against
a rate-limited server with each of the `PACING_SETUPS` (no pacer, a learned `Pacer`, a known
limit; `compare_pacing` runs them all), and `render_rate_limit` lays the runs out.

    >>> from retrymw.simulate import Scenario, simulate
    >>> simulate(Scenario("outage", rate=10, duration=20, warmup=10)).amplification <= 1.1
    True

.. versionadded:: 0.1
"""

from __future__ import annotations

from ._core.exports import publish
from ._simulate.engine import Comparison as Comparison
from ._simulate.engine import FrontierPoint as FrontierPoint
from ._simulate.engine import SimulationResult as SimulationResult
from ._simulate.engine import compare as compare
from ._simulate.engine import frontier as frontier
from ._simulate.engine import simulate as simulate
from ._simulate.ratelimit import PACING_SETUPS as PACING_SETUPS
from ._simulate.ratelimit import RateLimitResult as RateLimitResult
from ._simulate.ratelimit import RateLimitScenario as RateLimitScenario
from ._simulate.ratelimit import compare_pacing as compare_pacing
from ._simulate.ratelimit import simulate_rate_limit as simulate_rate_limit
from ._simulate.report import JitterSpread as JitterSpread
from ._simulate.report import jitter_spread as jitter_spread
from ._simulate.report import render_comparison as render_comparison
from ._simulate.report import render_frontier as render_frontier
from ._simulate.report import render_rate_limit as render_rate_limit
from ._simulate.report import render_table as render_table
from ._simulate.scenarios import FRONTIER_SETUPS as FRONTIER_SETUPS
from ._simulate.scenarios import SETUPS as SETUPS
from ._simulate.scenarios import Scenario as Scenario
from ._simulate.scenarios import SimulatedFailure as SimulatedFailure
from ._simulate.scenarios import frontier_scenarios as frontier_scenarios
from ._simulate.scenarios import http_defaults as http_defaults
from ._simulate.scenarios import situations as situations
from ._simulate.scenarios import suite as suite
from ._simulate.scenarios import with_setup as with_setup

__all__ = [
    "FRONTIER_SETUPS",
    "PACING_SETUPS",
    "SETUPS",
    "Comparison",
    "FrontierPoint",
    "JitterSpread",
    "RateLimitResult",
    "RateLimitScenario",
    "Scenario",
    "SimulatedFailure",
    "SimulationResult",
    "compare",
    "compare_pacing",
    "frontier",
    "frontier_scenarios",
    "http_defaults",
    "jitter_spread",
    "render_comparison",
    "render_frontier",
    "render_rate_limit",
    "render_table",
    "simulate",
    "simulate_rate_limit",
    "situations",
    "suite",
    "with_setup",
]

publish(globals(), __all__, __name__)

if __name__ == "__main__":
    print(render_table(simulate(scenario) for scenario in suite()))
