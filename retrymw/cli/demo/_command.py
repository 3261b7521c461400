"""``retrymw demo``: retrymw at work against a flaky upstream, with metrics, traces and a summary.

The demo starts a `FlakyUpstream` on 127.0.0.1, sends it a steady load through
`AsyncRetryTransport` with a protection setup (``_setup``: the recommended one by default),
serves the Prometheus metrics on ``/metrics``, prints a live progress line and a trace
summary, and ends with a summary table. The default script puts an outage in the middle of a
20-second run so that the protection acts and then everything recovers; the summary counts
what the protection refused while the upstream was up, its price.

This module is the command: its arguments and what they mean (`configure`, the upstream's
script); `DemoRun` (``_run``) runs one demo and ``_fleet`` runs ``--fleet``.
"""

from __future__ import annotations

import argparse
import asyncio

from .._common import (
    EXIT_OK,
    CliError,
    duration,
    fraction,
    port,
    positive_duration,
    positive_int,
    rate,
)
from ._fleet import add_fleet_arguments, run_fleet
from ._run import DemoRun
from ._setup import DEFAULT_ATTEMPTS, RECOMMENDED, DemoSetup, setup_name, short_name
from ._upstream import Outage, UpstreamScript, parse_outage

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "configure", "run"]

NAME = "demo"
HELP = "watch retries and their protection work against a flaky upstream, and what it costs"
DESCRIPTION = """\
Run a flaky HTTP upstream on 127.0.0.1 and send it a steady load through retrymw's
AsyncRetryTransport with a protection setup: by default the recommended one for a single
dependency that is up or down, retries with the default retry budget and a circuit breaker
with the default settings (one of each per host). While it runs:
Prometheus metrics on /metrics, a live progress line, breaker transitions and a one-line
summary of every retried or failed call's trace (or OTLP export of the spans and the
OpenTelemetry metrics when OTEL_EXPORTER_OTLP_ENDPOINT is set). It ends with a summary
table: calls, attempts, amplification, outcomes, the calls the protection refused while the
upstream was up (its price) and while it was down, breaker transitions and latency.

The default script: 10% 5xx, 3% 429 with Retry-After, ~20ms latency, and an outage from 6s
to 11s, so that the breaker opens, probes once the outage is over and closes again.
--no-breaker, --throttle, --no-budget or --setup NAME show what another setup costs."""
EPILOG = """\
examples:
  retrymw demo                                      20 seconds with the default script
  retrymw demo --duration 1m --rate 200 --failure-rate 20%
  retrymw demo --outage none --rate-limited 10%     no outage, more 429s
  retrymw demo --no-breaker --seed 5                the budget alone; repeatable draws
  retrymw demo --throttle                           + an adaptive throttle
  retrymw demo --setup retries-alone                no protection, to compare
  retrymw demo --failure-rate 40% --no-budget       a heavy brownout without the budget
  retrymw demo --forever --metrics-host 0.0.0.0     until Ctrl-C (the compose stack)
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 retrymw demo

--setup NAME: one of the simulator's setups (retrymw.simulate.SETUPS): no-retries,
retries-alone, budget, budget+breaker (the default, recommended), budget+throttle,
retries+throttle; --breaker/--no-breaker, --throttle/--no-throttle and --budget/--no-budget
add or remove one protection. "refused while up" counts the calls whose first attempt or
retry the breaker, throttle or budget refused while the upstream was answering.

--outage START:DURATION[:EVERY]: e.g. 6s:5s, or 6s:5s:1m to repeat every minute (the default
with --forever), or none. Ctrl-C (or SIGTERM) stops the load, lets the calls in flight finish
and prints the summary; a second Ctrl-C stops waiting for them."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``demo`` arguments to ``parser``."""
    length = parser.add_mutually_exclusive_group()
    length.add_argument(
        "--duration",
        type=positive_duration,
        default=20.0,
        metavar="DURATION",
        help="longer than 0s (default 20s)",
    )
    length.add_argument("--forever", action="store_true", help="run until Ctrl-C or SIGTERM")
    load = parser.add_argument_group("load and policy")
    add = load.add_argument
    add("--rate", type=rate, default=50.0, metavar="N", help="calls per second (default 50)")
    add(
        "--attempts",
        type=positive_int,
        metavar="N",
        help=f"per call (default {DEFAULT_ATTEMPTS}; 1 with --setup no-retries)",
    )
    protection = parser.add_argument_group("protection")
    add = protection.add_argument
    add(
        "--setup",
        type=setup_name,
        default=RECOMMENDED,
        metavar="NAME",
        help=f"one of retrymw.simulate.SETUPS (default {short_name(RECOMMENDED)}, recommended)",
    )
    on_off = argparse.BooleanOptionalAction
    add("--breaker", action=on_off, help="add (or remove) a circuit breaker, default settings")
    add("--throttle", action=on_off, help="add (or remove) an adaptive throttle")
    add("--budget", action=on_off, help="keep (or, --no-budget, remove) the retry budget")
    upstream = parser.add_argument_group("the flaky upstream")
    add = upstream.add_argument
    add("--failure-rate", type=fraction, default=0.1, metavar="SHARE", help="502/503/504 (10%%)")
    add("--rate-limited", type=fraction, default=0.03, metavar="SHARE", help="429s (3%%)")
    add("--retry-after", type=positive_int, default=1, metavar="SECONDS", help="on 429s (1)")
    add("--latency", type=duration, default=0.02, metavar="DURATION", help="mean (20ms)")
    add(
        "--outage",
        type=parse_outage,
        default=argparse.SUPPRESS,  # absent: the default below, which depends on --forever
        metavar="WINDOW",
        help="START:DURATION[:EVERY] or none (6s:5s; 6s:5s:1m with --forever)",
    )
    add("--upstream-port", type=port, default=0, metavar="PORT", help="(0: any free port)")
    add(
        "--seed",
        type=int,
        metavar="N",
        help="make the upstream's faults and latencies and the throttle's draws repeatable",
    )
    add_fleet_arguments(parser)
    output = parser.add_argument_group("output")
    add = output.add_argument
    add("--metrics-host", default="127.0.0.1", metavar="HOST", help="(127.0.0.1)")
    add("--metrics-port", type=port, default=9464, metavar="PORT", help="(9464; 0: any free)")
    add(
        "--traces",
        choices=("interesting", "all", "none"),
        default="interesting",
        help="print the traces of retried or failed calls (at most 2/s), all calls, or none",
    )


def run(args: argparse.Namespace) -> int:
    """Run the demo until its duration ends or it is interrupted, then print the summary.

    Returns:
        ``0``, also when the reader of stdout went away (``retrymw demo | head``): it has read
        what it wanted, as when ``head`` stops ``yes``, and the demo then stops quietly rather
        than fail a ``set -o pipefail`` script. ripgrep makes the same choice.
    """
    try:
        import httpx  # noqa: F401  (checked here for a clear message; used by DemoRun)

        from ...httpx import AsyncRetryTransport  # noqa: F401
    except ImportError:
        raise CliError("the demo needs httpx: pip install 'retrymw[httpx]'") from None
    if args.fleet is not None:
        if _protection_flags(args):
            raise CliError(
                "--fleet compares budgets with its own setup; "
                f"drop {', '.join(_protection_flags(args))}"
            )
        if args.forever:
            raise CliError("--fleet runs for a --duration, to compare the two groups at its end")
        if args.attempts is None:
            args.attempts = DEFAULT_ATTEMPTS
        return run_fleet(args, _script(args))
    demo = DemoRun(args, _script(args), DemoSetup.from_args(args))
    try:
        asyncio.run(demo.main())
    except KeyboardInterrupt:  # no signal handlers on this platform: Ctrl-C lands here
        demo.console.finish()
    demo.report()
    return EXIT_OK


def _protection_flags(args: argparse.Namespace) -> list[str]:
    """The protection options given on the command line (``--fleet`` takes none of them)."""
    flags = [f"--{kind}" for kind in ("breaker", "throttle", "budget") if getattr(args, kind)]
    flags += [
        f"--no-{kind}" for kind in ("breaker", "throttle", "budget") if getattr(args, kind) is False
    ]
    if args.setup != RECOMMENDED:
        flags.append("--setup")
    return flags


def _outage(args: argparse.Namespace) -> Outage | None:
    if hasattr(args, "outage"):
        return args.outage  # type: ignore[no-any-return]
    # A run that never ends gets an outage every minute, so that its dashboards keep moving.
    return Outage(6.0, 5.0, every=60.0 if args.forever else None)


def _script(args: argparse.Namespace) -> UpstreamScript:
    return UpstreamScript(
        failure_rate=args.failure_rate,
        rate_limited=args.rate_limited,
        retry_after=args.retry_after,
        latency=args.latency,
        outage=_outage(args),
    )
