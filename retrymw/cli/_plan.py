"""``retrymw plan``: a policy's delay timeline as a table or JSON (computed by `_timeline`)."""

from __future__ import annotations

import argparse
import functools
import json
import math
import warnings
from dataclasses import asdict
from typing import Any

from .._core.backoff import (
    Backoff,
    CustomBackoff,
    ExponentialBackoff,
    FibonacciBackoff,
    FixedBackoff,
    LinearBackoff,
)
from .._core.errors import ConfigError
from .._core.policy import RetryPolicy
from ._common import EXIT_OK, CliError, duration, human_duration, optional_duration, table
from ._timeline import Plan, build_plan

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "configure", "describe", "render", "run"]

NAME = "plan"
HELP = "print a policy's delay timeline: delays, jitter ranges, cumulative wait, cut-offs"
DESCRIPTION = """\
Print the delay timeline of a retry policy: the planned wait before every retry, its jitter
range (computed from the jitter formula, not sampled), the cumulative wait, and where
attempts, retry_budget or deadline stop the call. Take the policy from a config file
(--policy picks a named one; the defaults otherwise), from options, or both: options
override the file's fields."""
EPILOG = """\
examples:
  retrymw plan                                          the default policy
  retrymw plan --attempts 6 --backoff exponential:3 --initial-delay 200ms --jitter full
  retrymw plan --attempts 100 --max-delay 30s --retry-budget 2m
  retrymw plan policies.yaml --policy payments
  retrymw plan policies.yaml --policy search --deadline 5s --attempt-time 300ms --json

--backoff takes fixed, linear[:INCREMENT], exponential[:BASE], fibonacci or
custom:DELAY,DELAY,... (e.g. custom:500ms,1s,5s). Durations need a unit: 250ms, 5s, 1m30s.
The deadline counts attempt time too; --attempt-time sets how long each attempt is assumed
to take (0s by default)."""

_JITTER_CHOICES = ("none", "proportional", "full", "equal", "decorrelated")
_POLICY_OPTIONS = (
    *("attempts", "backoff", "initial_delay", "max_delay", "jitter", "jitter_factor"),
    *("retry_budget", "deadline"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``plan`` arguments to ``parser``."""
    parser.add_argument("config", nargs="?", metavar="CONFIG", help="a .yaml or .toml file")
    parser.add_argument("--policy", metavar="NAME", help="a named policy of CONFIG")
    # SUPPRESS leaves absent options off the namespace, so "--deadline none" (turn the file's
    # deadline off) differs from no --deadline at all.
    fields = parser.add_argument_group("policy fields (override CONFIG)")
    add = functools.partial(fields.add_argument, default=argparse.SUPPRESS)
    add("--attempts", type=int, metavar="N", help="total executions, first included (>= 1)")
    add("--backoff", type=_backoff, metavar="SPEC", help="strategy, see below")
    add("--initial-delay", type=duration, metavar="DURATION", help="base of every strategy")
    add("--max-delay", type=duration, metavar="DURATION", help="cap of every wait")
    add("--jitter", choices=_JITTER_CHOICES, help="jitter kind")
    add("--jitter-factor", type=float, metavar="F", help="proportional jitter width, in [0, 1]")
    add("--retry-budget", type=optional_duration, metavar="DURATION", help="or none")
    add("--deadline", type=optional_duration, metavar="DURATION", help="or none")
    parser.add_argument(
        "--attempt-time",
        type=duration,
        default=0.0,
        metavar="DURATION",
        help="assumed duration of each attempt, counted against the deadline (default 0s)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    """Print the plan of the policy the arguments describe."""
    if args.policy is not None and args.config is None:
        raise CliError("--policy needs a CONFIG file to look the name up in")
    policy = _policy_from(args)
    plan = build_plan(policy, attempt_time=args.attempt_time)
    print(json.dumps(plan_to_json(plan), indent=2) if args.json else render(plan))
    return EXIT_OK


def _policy_from(args: argparse.Namespace) -> RetryPolicy:
    policy = RetryPolicy()
    if args.config is not None:
        from .._config.loader import load_config

        # `retrymw check` reports warnings; here only the timeline matters.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                config = load_config(args.config)
            except ConfigError as error:  # an invalid file, not a bad option: exit code 1
                raise CliError(str(error)) from None
        if args.policy is None:
            policy = config.defaults
        else:
            try:
                policy = config.policy(args.policy)
            except KeyError as error:
                raise CliError(error.args[0]) from None
    changes = {key: getattr(args, key) for key in _POLICY_OPTIONS if hasattr(args, key)}
    if changes.get("jitter") == "none":
        changes["jitter"] = False
    return policy.replace(**changes) if changes else policy


def _backoff(text: str) -> Backoff:
    name, _, option = text.partition(":")
    try:
        if name == "fixed" and not option:
            return FixedBackoff()
        if name == "fibonacci" and not option:
            return FibonacciBackoff()
        if name == "linear":
            return LinearBackoff(duration(option) if option else None)
        if name == "exponential":
            return ExponentialBackoff(float(option)) if option else ExponentialBackoff()
        if name == "custom" and option:
            return CustomBackoff([duration(part) for part in option.split(",")])
    except (ConfigError, ValueError) as error:
        raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None
    raise argparse.ArgumentTypeError(
        f"unknown backoff {text!r}; use fixed, linear[:INCREMENT], exponential[:BASE], "
        "fibonacci or custom:DELAY,DELAY,..."
    )


# -- output ------------------------------------------------------------------------------------


def describe(policy: RetryPolicy) -> str:
    """One line that says what ``policy`` does."""
    backoff = policy.backoff
    if isinstance(backoff, ExponentialBackoff):
        strategy = f"exponential backoff (x{backoff.base:g})"
    elif isinstance(backoff, LinearBackoff):
        step = policy.initial_delay if backoff.increment is None else backoff.increment
        strategy = f"linear backoff (+{human_duration(step)})"
    elif isinstance(backoff, CustomBackoff):
        listed = ", ".join(human_duration(d) for d in backoff.delays) or "empty"
        strategy = f"custom delays [{listed}]"
    else:
        strategy = f"{type(backoff).__name__.removesuffix('Backoff').lower()} backoff"
    parts = [
        f"policy {policy.name!r}: {policy.attempts} attempt{'s' * (policy.attempts != 1)}",
        f"{strategy} from {human_duration(policy.initial_delay)}",
        f"max {human_duration(policy.max_delay)}",
    ]
    if policy.jitter == "proportional":
        parts.append(f"proportional jitter ±{policy.jitter_factor:.0%}")
    elif policy.jitter is not None:
        parts.append(f"{policy.jitter} jitter")
    if policy.retry_budget is not None:
        parts.append(f"retry_budget {human_duration(policy.retry_budget)}")
    if policy.deadline is not None:
        parts.append(f"deadline {human_duration(policy.deadline)}")
    return ", ".join(parts)


def render(plan: Plan) -> str:
    """The plan as a text table, then where it stops and a one-line total."""
    jitter = plan.policy.jitter is not None
    notes = any(wait.note for wait in plan.waits)
    header = ["attempt", "wait before", "cumulative"]
    if jitter:
        header[2:2] = ["jitter range"]
        header.append("with jitter")
    if notes:
        header.append("note")
    rows: list[list[str]] = [["1", "-", *(["-"] * jitter), "0s", *(["0s"] * jitter)]]
    for wait in plan.waits:
        label, each = str(wait.attempt), ""
        if wait.last_attempt != wait.attempt:
            label, each = f"{wait.attempt:,}-{wait.last_attempt:,}", " each"
        row = [label, human_duration(wait.delay) + each, human_duration(wait.cumulative)]
        if jitter:
            row[2:2] = [_range(wait.jitter_min, wait.jitter_max)]
            row.append(_range(wait.cumulative_min, wait.cumulative_max))
        rows.append(row)
    if notes:
        rows[0].append("")
        for row, wait in zip(rows[1:], plan.waits, strict=True):
            row.append(wait.note or "")
    lines = [describe(plan.policy)]
    if plan.attempt_time:
        lines.append(f"assuming each attempt takes {human_duration(plan.attempt_time)}")
    lines += ["", table(header, rows, align=">" * (len(header) - notes)), ""]
    stop = plan.stop
    lines.append(f"✗ after attempt {stop.after_attempt:,}: {stop.reason} ({stop.detail})")
    if stop.depends_on_jitter:
        lines.append("  with jitter, shorter draws may leave room for another retry")
    if plan.policy.retry_budget is not None:
        lines.append(_resume(plan.policy.retry_budget))
    lines.append(_verdict(plan))
    return "\n".join(lines)


def _resume(budget: float) -> str:
    """What the budget means for a call resumed across restarts (docs/resume.md)."""
    return (
        f"With store= and a resume key, the budget expires {human_duration(budget)} after the "
        "first failure (wall clock):\n"
        "a call resumed after a restart keeps its attempt count and never retries past it."
    )


def _range(low: float, high: float) -> str:
    return human_duration(low) if low == high else f"{human_duration(low)}-{human_duration(high)}"


def _verdict(plan: Plan) -> str:
    runs = plan.stop.after_attempt
    waited = plan.waits[-1].cumulative if plan.waits else 0.0
    text = f"At most {runs:,} attempt{'s' * (runs != 1)}, {human_duration(waited)} of waiting"
    if plan.waits and plan.policy.jitter is not None:
        last = plan.waits[-1]
        text += f" ({_range(last.cumulative_min, last.cumulative_max)} with jitter)"
    return text + "."


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready data; durations are seconds."""
    from .._config.dump import backoff_form

    policy = plan.policy

    def seconds(value: float | None) -> float | None:
        return None if value is None or not math.isfinite(value) else round(value, 9)

    return {
        "policy": {
            "name": policy.name,
            "attempts": policy.attempts,
            "backoff": backoff_form(policy.backoff),
            "initial_delay": seconds(policy.initial_delay),
            "max_delay": seconds(policy.max_delay),
            "jitter": policy.jitter or False,
            "jitter_factor": policy.jitter_factor,
            "retry_budget": seconds(policy.retry_budget),
            "deadline": seconds(policy.deadline),
        },
        "attempt_time": plan.attempt_time,
        "waits": [
            {
                key: seconds(value) if isinstance(value, float) else value
                for key, value in asdict(wait).items()
            }
            for wait in plan.waits
        ],
        "stop": asdict(plan.stop),
        "max_attempts_run": plan.stop.after_attempt,
        "total_delay": seconds(plan.waits[-1].cumulative if plan.waits else 0.0),
        # With a store and a resume key (docs/resume.md): the wall-clock expiry of the budget,
        # counted from the first failure, that a resumed call never retries past.
        "resume": None
        if policy.retry_budget is None
        else {"budget_expires_after_first_failure": seconds(policy.retry_budget)},
    }
