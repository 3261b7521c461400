"""What the simulator runs: `Scenario`, the standard `suite`, and the protection setups.

`SETUPS` are the five ways to protect a client the issue compares (no retries, retries alone,
+ budget, + budget + breaker, + budget + throttle) and the one the docs recommend behind a
balancer (retries + throttle); `situations` are the failures they are compared in, and
`with_setup` applies a setup to a scenario. `FRONTIER_SETUPS` and `frontier_scenarios` are
the frontier's: what the setups users pick rescue of a blip and cost in an outage, on the HTTP
transports' default policy. Each run builds the real objects from these arguments
(`retrymw._simulate.engine`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._core.errors import ConfigError
from .._core.policy import RetryPolicy

__all__ = [
    "FRONTIER_SETUPS",
    "SETUPS",
    "Scenario",
    "SimulatedFailure",
    "fleet_scenarios",
    "frontier_scenarios",
    "http_defaults",
    "situations",
    "suite",
    "with_setup",
]

_DEFAULTS: Mapping[str, Any] = MappingProxyType({})
_EXAMPLE = {
    **dict.fromkeys(("rate", "duration", "warmup", "fault"), "10"),
    "failure": "0.1",
    "clients": "1",
    "latency": "0.02",
    "backends": "2",
    "capacity": "100",
    "rejection_cost": "0.25",
    "surge": "3",
    "failure_status": "502",
    "refusal_status": "503",
}


class SimulatedFailure(Exception):
    """The failure a simulated dependency raises.

    Args:
        message: the error's text.
        status: the HTTP status it carries (``status_of`` reads it): 503 for a capacity-limited
            dependency's load refusals, ``None`` for a connection-like failure.
    """

    def __init__(self, message: str = "simulated failure", status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Scenario:
    """One simulated run. Times are virtual seconds from 0.

    Args:
        name: a label for the table.
        rate: calls per second per client, arriving open-loop at a fixed spacing.
        duration: arrivals stop here (retries of late calls still finish).
        failure: probability that an attempt fails during the fault (1.0 is a total outage).
        warmup: the fault starts here; before it the dependency is healthy.
        fault: how long the fault lasts; ``None`` until the end of the run.
        clients: independent clients, each with its own retrier, budget and breaker.
        synchronized: all clients call at the same instants (else their phases are staggered).
        latency: virtual duration of every attempt.
        policy: the retry policy; by default ``RetryPolicy()`` retrying `SimulatedFailure`.
        budget: `RetryBudget` arguments (defaults when empty); ``None`` turns the budget off.
        breaker: `CircuitBreaker` arguments (defaults when empty); ``None`` for no breaker.
        throttle: `AdaptiveThrottle` arguments (defaults when empty); ``None`` for none.
        backends: the dependency's backends; attempts go to them in turn (round robin, one
            counter for all clients) and only the first fails with ``failure`` during the fault,
            so ``failure=1.0, backends=2`` is one dead backend of two.
        capacity: attempts per second the dependency serves, all the time; ``None`` for no
            limit. Over the trailing second's offered attempts ``O``, an attempt is served with
            probability ``min(1, (capacity / O - c) / (1 - c))``, ``c`` being
            ``rejection_cost``: a refused attempt costs the dependency ``c`` of a served one,
            so load past capacity lowers what it serves and retries make an overload worse.
        rejection_cost: see ``capacity``, in ``[0, 1)``.
        surge: during the fault, calls arrive ``surge`` times faster (an overload's demand).
        failure_status: the HTTP status the fault's failures (``failure``, the dead backend)
            carry; ``None`` (the default): none, like a refused connection.
        refusal_status: the HTTP status a capacity-limited dependency's load refusals carry;
            503 by default, as an overloaded server sheds; ``None``: none.
        fleet: the clients are the processes of one fleet: their budgets are shared through a
            simulated store (`retrymw._simulate.fleet`), ``{}`` for the defaults or with
            ``sync_interval``, ``store_outage`` (``(start, duration)``), ``max_lease`` and
            ``assumed_members``; ``None``: per-process budgets.
    """

    name: str
    rate: float
    duration: float
    failure: float = 1.0
    warmup: float = 0.0
    fault: float | None = None
    clients: int = 1
    synchronized: bool = False
    latency: float = 0.0
    policy: RetryPolicy = field(default_factory=lambda: RetryPolicy(retry_on=SimulatedFailure))
    budget: Mapping[str, Any] | None = field(default_factory=lambda: _DEFAULTS)
    breaker: Mapping[str, Any] | None = None
    throttle: Mapping[str, Any] | None = None
    backends: int = 1
    capacity: float | None = None
    rejection_cost: float = 0.25
    surge: float = 1.0
    fleet: Mapping[str, Any] | None = None
    failure_status: int | None = None
    refusal_status: int | None = 503

    def __post_init__(self) -> None:
        for name, ok in (
            ("rate", self.rate > 0),
            ("duration", self.duration > 0),
            ("failure", 0.0 <= self.failure <= 1.0),
            ("warmup", self.warmup >= 0),
            ("fault", self.fault is None or self.fault >= 0),
            ("clients", self.clients >= 1),
            ("latency", self.latency >= 0),
            ("backends", self.backends >= 1),
            ("capacity", self.capacity is None or self.capacity > 0),
            ("rejection_cost", 0.0 <= self.rejection_cost < 1.0),
            ("surge", self.surge > 0),
            ("failure_status", self.failure_status is None or 100 <= self.failure_status <= 599),
            ("refusal_status", self.refusal_status is None or 100 <= self.refusal_status <= 599),
        ):
            if not ok:
                raise ConfigError(name, getattr(self, name), "is out of range", _EXAMPLE[name])

    @property
    def fault_end(self) -> float:
        """When the fault ends (``inf`` if it lasts to the end)."""
        return math.inf if self.fault is None else self.warmup + self.fault


#: The ways to protect a client the simulator compares, as `with_setup` applies them: the
#: policy's attempts (``1`` for no retries) and the budget, breaker and throttle arguments
#: (``{}`` for the defaults, ``None`` for none).
SETUPS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "no retries": {"attempts": 1, "budget": None},
        "retries alone": {"budget": None},
        "+ budget": {"budget": {}},
        "+ budget + breaker": {"budget": {}, "breaker": {}},
        "+ budget + throttle": {"budget": {}, "throttle": {}},
        "retries + throttle": {"budget": None, "throttle": {}},
    }
)


#: The setups users pick, as the frontier table names them (docs/choosing.md), in the form of
#: `SETUPS` (``policy``: changes to the scenario's policy): no protection (retries alone), the
#: transports' default (the default budget), the recommended one (retries + throttle: it keeps
#: a partial failure's retries) and a breaker (with the default budget); then the budgets the
#: default was chosen among, on the same policy: the 0.3 default (``burst`` 0.1, no ``blip``),
#: a larger bucket without ``blip``, and ``blip`` at 2 s and 5 s.
FRONTIER_SETUPS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "no protection": {"budget": None},
        "default": {"budget": {}},
        "recommended": {"budget": None, "throttle": {}},
        "breaker": {"budget": {}, "breaker": {}},
        "0.3: 3 attempts, burst 0.1": {
            "policy": {"attempts": 3, "initial_delay": 1.0},
            "budget": {"burst": 0.1, "blip": None},
        },
        "4 attempts, burst 0.1": {"budget": {"burst": 0.1, "blip": None}},
        "burst 0.6, no blip": {"budget": {"blip": None}},
        "blip 2 s": {"budget": {"blip": "2s"}},
        "blip 5 s": {"budget": {"blip": "5s"}},
    }
)


def with_setup(scenario: Scenario, setup: str | Mapping[str, Any]) -> Scenario:
    """``scenario`` with one of the `SETUPS` (its breaker and throttle replaced, not added).

    ``setup`` is a name of `SETUPS` or a setup of the same form (`FRONTIER_SETUPS`' values).
    """
    fields = dict(SETUPS[setup] if isinstance(setup, str) else setup)
    policy = scenario.policy.replace(**fields.pop("policy", {}))
    if "attempts" in fields:
        policy = policy.replace(attempts=fields.pop("attempts"))
    changes: dict[str, Any] = {"breaker": None, "throttle": None, "budget": _DEFAULTS, **fields}
    return dataclasses.replace(scenario, policy=policy, **changes)


def http_defaults() -> RetryPolicy:
    """The HTTP transports' default policy, retrying the simulator's failure."""
    from .._http.rules import http_policy

    return http_policy().replace(retry_on=SimulatedFailure)


def situations() -> list[Scenario]:
    """The failures the issue's goals name, each to be run with every one of the `SETUPS`.

    Partial failure (one dead backend of two, round robin, 100 calls/s, 10 minutes); brownouts
    (p = 0.1 and 0.2, 10 minutes); total outages at 2, 100 and 1000 calls/s; recovery (a 30 s
    outage at 100 calls/s, then 40 s healthy); overload (demand 1.5x capacity for 60 s: 50
    calls/s against a capacity of 100 attempts/s, tripled); 1 000 clients x 1 call/s through a
    10 s outage, staggered and in step (the latter on the HTTP transports' default policy).
    """
    many: dict[str, Any] = {"rate": 1, "duration": 50, "warmup": 30, "fault": 10, "clients": 1000}
    return [
        Scenario("partial failure 1 of 2", rate=100, duration=600, backends=2),
        Scenario("brownout p=0.1", rate=100, duration=600, failure=0.1),
        Scenario("brownout p=0.2", rate=100, duration=600, failure=0.2),
        Scenario("outage 2/s", rate=2, duration=150, warmup=30),
        Scenario("outage 100/s", rate=100, duration=150, warmup=30),
        Scenario("outage 1000/s", rate=1000, duration=90, warmup=30),
        Scenario("recovery", rate=100, duration=80, warmup=10, fault=30),
        Scenario(
            "overload 1.5x",
            rate=50,
            duration=120,
            warmup=30,
            fault=60,
            failure=0.0,
            capacity=100,
            surge=3,
        ),
        Scenario("1000 clients x 1/s", **many),
        Scenario("1000 clients in step", synchronized=True, policy=http_defaults(), **many),
    ]


def frontier_scenarios() -> list[Scenario]:
    """The frontier's runs, on the HTTP transports' default policy, after 30 s of health.

    A 3 s blip at 50 calls/s (what a setup rescues); a 10 s outage at 50 calls/s, and 1 000
    clients x 1 call/s through one (what rescuing blips costs, since an outage's first seconds
    look like a blip); a 120 s outage at 100 calls/s (what a long outage costs).
    """
    policy = http_defaults()
    return [
        Scenario("blip 3s 50/s", rate=50, duration=40, warmup=30, fault=3, policy=policy),
        Scenario("outage 10s 50/s", rate=50, duration=60, warmup=30, fault=10, policy=policy),
        Scenario(
            "outage 10s 1000 clients x 1/s",
            rate=1,
            duration=50,
            warmup=30,
            fault=10,
            clients=1000,
            policy=policy,
        ),
        Scenario("outage 120s 100/s", rate=100, duration=160, warmup=30, fault=120, policy=policy),
    ]


def fleet_scenarios() -> list[Scenario]:
    """1 000 processes x 1 call/s through a 10 s outage (after 30 s of health), default budgets.

    Per-process budgets; one budget shared by the fleet (a 250 ms sync interval, and a 1 s one);
    and shared with the store itself down from 5 s before the outage to its end, so that every
    process decides on its conservative local share.
    """
    many: dict[str, Any] = {"rate": 1, "duration": 50, "warmup": 30, "fault": 10, "clients": 1000}
    return [
        Scenario("fleet 1000 x 1/s per-process", **many),
        Scenario("fleet 1000 x 1/s shared", fleet={}, **many),
        Scenario("fleet 1000 x 1/s shared, 1s sync", fleet={"sync_interval": 1.0}, **many),
        Scenario("fleet 1000 x 1/s, store down", fleet={"store_outage": (25.0, 15.0)}, **many),
    ]


def suite(name: str | None = None) -> list[Scenario]:
    """Return the standard scenarios (all defaults), or one group of them.

    Groups: ``outage`` (a total outage after a 30 s warm-up, with calls arriving for 120 s at
    2, 10 and 100 calls/s and 60 s at 1000 calls/s; it outlasts their retries), ``brownout``
    (i.i.d. failures p = 0.05 to 0.5 at 100 calls/s for 10 minutes, with a default breaker),
    ``breaker`` (a 30 s outage at 100 calls/s with a default breaker and 20 ms attempts) and
    ``synchronized`` (50 clients calling in step through a 30 s outage, without and with full
    jitter), ``fleet`` (see `fleet_scenarios`) and ``situations`` (see `situations`: the
    failures each of the `SETUPS` is compared in).
    """
    breaker: Mapping[str, Any] = {}
    groups = {
        "outage": [
            Scenario(name=f"outage {rate}/s", rate=rate, duration=30 + span, warmup=30)
            for rate, span in ((2, 120), (10, 120), (100, 120), (1000, 60))
        ],
        "brownout": [
            Scenario(name=f"brownout p={p}", rate=100, duration=600, failure=p, breaker=breaker)
            for p in (0.05, 0.1, 0.2, 0.3, 0.5)
        ],
        "breaker": [
            Scenario(
                name="outage+breaker 100/s",
                rate=100,
                duration=70,
                warmup=10,
                fault=30,
                latency=0.02,
                breaker=breaker,
            )
        ],
        "synchronized": [
            Scenario(
                name=f"50 clients in step{label}",
                rate=2,
                duration=70,
                warmup=10,
                fault=30,
                clients=50,
                synchronized=True,
                breaker=breaker,
                policy=RetryPolicy(retry_on=SimulatedFailure, jitter=jitter),
            )
            for label, jitter in (("", False), (", full jitter", "full"))
        ],
    }
    groups["situations"] = situations()
    groups["fleet"] = fleet_scenarios()
    if name is None:
        return [scenario for group in groups.values() for scenario in group]
    if name not in groups:
        raise ValueError(f"unknown scenario group {name!r}; known: {', '.join(groups)}")
    return groups[name]
