"""``retrymw simulate``: retry storms in virtual time, through `retrymw.simulate`.

The default ``compare`` scenario runs one outage four times (no retries; retries without the
cross-call budget; with it; with it and a breaker) so that the table shows what each layer buys.
``setups`` runs the issue's situations (partial failure, brownouts, outages, recovery, overload,
many low-rate clients, clients in step) with every protection setup (`retrymw.simulate.compare`).
``ratelimit`` runs clients against a rate-limited server without a pacer, with a learned one and
with the limit given (`retrymw.simulate.compare_pacing`). The other scenarios are
`retrymw.simulate.suite`'s groups. Scenario and policy options
override every scenario that runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
from collections.abc import Mapping
from typing import Any

from ._common import (
    EXIT_OK,
    CliError,
    duration,
    fraction,
    human_duration,
    positive_float,
    positive_int,
)
from ._plan import describe

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "configure", "run", "scenarios"]

NAME = "simulate"
HELP = "compare policies in a simulated retry storm (virtual time, real retrymw objects)"
DESCRIPTION = """\
Run retry storms in virtual time: simulated clients call a dependency that fails, through
retrymw's real Retrier, RetryBudget, CircuitBreaker and AdaptiveThrottle on a virtual clock,
so minutes of traffic take a moment. The table reports, for the calls that arrive during the
fault, the amplification (attempts per call) and the success rate, plus the peak load,
retries admitted and denied, and the breaker's behaviour.

Scenarios: compare (the default: one outage without retries, with retries but no budget, with
the default budget, and with budget and breaker), outage (120s outages at 2 to 1000 calls/s),
brownout (5% to 50% failures for 10 minutes), breaker, synchronized (50 clients calling in
step, without and with jitter), situations (partial failure, overload, recovery, 1000 clients),
fleet (1000 processes x 1 call/s: per-process budgets, one budget shared through a simulated
store whose synchroniser runs every sync interval in virtual time, and the store down),
setups (every situation with every protection setup: no retries, retries alone, + budget,
+ budget + breaker, + budget + throttle, retries + throttle; about 30 seconds), ratelimit
(4 clients x 30 calls/s against a server allowing 50/s, burst 10, answering 429 with
Retry-After and x-ratelimit-* headers: without a pacer, with Pacer() learning the limit, and
with Pacer(rate="50/s", burst=10)), or all (every group but ratelimit)."""
EPILOG = """\
examples:
  retrymw simulate                                  compare: what budget and breaker buy
  retrymw simulate --rate 1000 --fault 2m --attempts 5
  retrymw simulate --scenario brownout --jitter full
  retrymw simulate --scenario outage --seed 7 --json
  retrymw simulate --scenario setups                which protection for which failure
  retrymw simulate --scenario fleet                 per-process vs shared budgets, 1000 processes
  retrymw simulate --scenario ratelimit --limit 20  pacing against a server's rate limit

columns: amplif. = attempts per call arriving during the fault; success = share of those
calls that succeeded; peak/100ms = the busiest 100 ms of attempts; retries ok/denied =
admitted and throttled by the budget; open = share of the run the breaker was not closed;
to open = time and calls from the fault's start to the first trip; recover = from the
fault's end to the last failed call. ratelimit (counted from 2 s on): 429s = share of
attempts refused; served/s = attempts served per second; calls ok = calls ending in a 200;
wait p50/p99 = time an attempt waited for its pacer's slot (the calls have no deadline, so a
client offering more than the limit queues: its waits grow)."""

_GROUPS = (
    *("compare", "outage", "brownout", "breaker", "synchronized", "situations", "fleet"),
    *("setups", "ratelimit", "all"),
)
_SHAPE = ("rate", "duration", "failure", "warmup", "fault", "clients", "latency")
_POLICY = ("attempts", "backoff", "initial_delay", "max_delay", "jitter")


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``simulate`` arguments to ``parser``."""
    parser.add_argument("--scenario", choices=_GROUPS, default="compare", help="(compare)")
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="(0)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    shape = parser.add_argument_group("scenario (overrides every scenario that runs)")
    add = functools.partial(shape.add_argument, default=argparse.SUPPRESS)
    add(
        "--rate",
        type=positive_float,
        metavar="N",
        help="calls per second per client (compare: 100)",
    )
    add("--duration", type=duration, metavar="DURATION", help="arrivals stop (compare: 1m)")
    add("--failure", type=fraction, metavar="SHARE", help="failures during the fault (100%%)")
    add("--warmup", type=duration, metavar="DURATION", help="healthy start (compare: 10s)")
    add("--fault", type=duration, metavar="DURATION", help="fault length (compare: 30s)")
    add("--clients", type=positive_int, metavar="N", help="independent clients (1)")
    add("--latency", type=duration, metavar="DURATION", help="each attempt's duration (0s)")
    limited = parser.add_argument_group("rate-limited server (--scenario ratelimit)")
    add = functools.partial(limited.add_argument, default=argparse.SUPPRESS)
    add("--limit", type=positive_float, metavar="N", help="requests/s the server allows (50)")
    add("--burst", type=positive_int, metavar="N", help="requests it allows at once (10)")
    policy = parser.add_argument_group("policy (overrides every scenario's policy)")
    add = functools.partial(policy.add_argument, default=argparse.SUPPRESS)
    add("--attempts", type=positive_int, metavar="N")
    add("--backoff", choices=("fixed", "linear", "exponential", "fibonacci"))
    add("--initial-delay", type=duration, metavar="DURATION")
    add("--max-delay", type=duration, metavar="DURATION")
    add("--jitter", choices=("none", "proportional", "full", "equal", "decorrelated"))


def scenarios(args: argparse.Namespace) -> list[Any]:
    """The scenarios the arguments ask for, with their overrides applied."""
    from ..simulate import Scenario, SimulatedFailure, suite

    changes = {key: getattr(args, key) for key in _POLICY if hasattr(args, key)}
    if changes.get("jitter") == "none":
        changes["jitter"] = False
    shape = {key: getattr(args, key) for key in _SHAPE if hasattr(args, key)}
    if args.scenario == "compare":
        base = Scenario(
            name="",
            **{"rate": 100.0, "duration": 60.0, "warmup": 10.0, "fault": 30.0, **shape},
        )
        policy = base.policy.replace(**changes)
        return [
            dataclasses.replace(base, name="no retries", policy=policy.replace(attempts=1)),
            dataclasses.replace(base, name="retries, no budget", policy=policy, budget=None),
            dataclasses.replace(base, name="retries + budget", policy=policy),
            dataclasses.replace(base, name="retries + budget + breaker", policy=policy, breaker={}),
        ]
    group = "situations" if args.scenario == "setups" else args.scenario
    chosen = suite(None if group == "all" else group)
    result = []
    for scenario in chosen:
        # retry_on stays the simulator's failure, whatever policy fields change.
        policy = scenario.policy.replace(**changes, retry_on=SimulatedFailure)
        result.append(dataclasses.replace(scenario, policy=policy, **shape))
    return result


def rate_limit_scenario(args: argparse.Namespace) -> Any:
    """The ``ratelimit`` scenario the arguments ask for (rate, duration, clients, latency,
    limit and burst override its defaults)."""
    from ..simulate import RateLimitScenario

    for key in ("failure", "warmup", "fault", *_POLICY):
        if hasattr(args, key):
            option = "--" + key.replace("_", "-")
            raise CliError(f"{option} does not apply to --scenario ratelimit")
    keys = ("rate", "duration", "clients", "latency", "limit", "burst")
    given = {key: getattr(args, key) for key in keys if hasattr(args, key)}
    settle = RateLimitScenario().settle
    if given.get("duration", math.inf) <= settle:
        raise CliError(
            f"--duration {human_duration(given['duration'])} must be longer than the "
            f"{human_duration(settle)} the figures start from"
        )
    return RateLimitScenario(**given)


def run(args: argparse.Namespace) -> int:
    """Run the scenarios and print the comparison table (or JSON)."""
    from ..simulate import compare, render_comparison, render_table, simulate

    if args.scenario == "ratelimit":
        return _run_rate_limit(args)
    for key in ("limit", "burst"):
        if hasattr(args, key):
            raise CliError(f"--{key} applies to --scenario ratelimit only")
    chosen = scenarios(args)
    for scenario in chosen:
        if scenario.warmup >= scenario.duration:
            start, end = human_duration(scenario.warmup), human_duration(scenario.duration)
            raise CliError(
                f"scenario {scenario.name!r}: the fault starts at {start} (--warmup), after "
                f"calls stop arriving at {end} (--duration), so no call would meet it"
            )
    if args.scenario == "setups":
        rows = compare(chosen, seed=args.seed)
        if args.json:
            print(json.dumps([_comparison_json(row) for row in rows], indent=2))
        else:
            print(render_comparison(rows))
        return EXIT_OK
    results = [simulate(scenario, seed=args.seed) for scenario in chosen]
    if args.json:
        print(json.dumps([_result_json(result) for result in results], indent=2))
        return EXIT_OK
    if args.scenario == "compare":
        print(_describe_compare(chosen[-1], args.seed))
        print()
    print(render_table(results))
    return EXIT_OK


def _run_rate_limit(args: argparse.Namespace) -> int:
    from ..simulate import compare_pacing, render_rate_limit

    scenario = rate_limit_scenario(args)
    results = compare_pacing(scenario)
    if args.json:
        print(json.dumps([_rate_limit_json(result) for result in results], indent=2))
        return EXIT_OK
    print(
        f"{scenario.clients} clients x {scenario.rate:g} calls/s for "
        f"{human_duration(scenario.duration)} against a server allowing {scenario.limit:g}/s "
        f"(burst {scenario.burst}); 429s, served/s and waits from "
        f"{human_duration(scenario.settle)} on (virtual time)"
    )
    print()
    print(render_rate_limit(results))
    return EXIT_OK


def _rate_limit_json(result: Any) -> dict[str, Any]:
    fields = {field.name: getattr(result, field.name) for field in dataclasses.fields(result)}
    scenario = result.scenario
    fields["scenario"] = {
        field.name: getattr(scenario, field.name) for field in dataclasses.fields(scenario)
    }
    fields["scenario"]["pacer"] = _component(scenario.pacer)
    return fields


def _describe_compare(scenario: Any, seed: int) -> str:
    fault = "to the end" if scenario.fault is None else f"for {human_duration(scenario.fault)}"
    clients = f"{scenario.clients} clients" if scenario.clients > 1 else "one client"
    return (
        f"{clients} at {scenario.rate:g} calls/s for {human_duration(scenario.duration)}: "
        f"healthy for {human_duration(scenario.warmup)}, then {scenario.failure:.0%} of attempts "
        f"fail {fault} (virtual time, seed {seed})\n{describe(scenario.policy)}"
    )


def _comparison_json(row: Any) -> dict[str, Any]:
    return {"situation": row.situation, "setup": row.setup, **_result_json(row.result)}


def _result_json(result: Any) -> dict[str, Any]:
    scenario = result.scenario
    fields = {field.name: getattr(result, field.name) for field in dataclasses.fields(result)}
    fields["scenario"] = {
        "name": scenario.name,
        "rate": scenario.rate,
        "duration": scenario.duration,
        "failure": scenario.failure,
        "warmup": scenario.warmup,
        "fault": scenario.fault,
        "clients": scenario.clients,
        "synchronized": scenario.synchronized,
        "latency": scenario.latency,
        "policy": _policy_json(scenario.policy),
        "budget": _component(scenario.budget),
        "breaker": _component(scenario.breaker),
        "throttle": _component(scenario.throttle),
        "backends": scenario.backends,
        "capacity": scenario.capacity,
        "rejection_cost": scenario.rejection_cost,
        "surge": scenario.surge,
        "failure_status": scenario.failure_status,
        "refusal_status": scenario.refusal_status,
        "fleet": _component(scenario.fleet),
    }
    return fields


def _policy_json(policy: Any) -> dict[str, Any]:
    from .._config.dump import backoff_form

    return {
        "attempts": policy.attempts,
        "backoff": backoff_form(policy.backoff),
        "initial_delay": policy.initial_delay,
        "max_delay": policy.max_delay,
        "jitter": policy.jitter or False,
    }


def _component(options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``None`` when off; else the options (``{}`` means the defaults)."""
    return None if options is None else {key: str(value) for key, value in options.items()}
