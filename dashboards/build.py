"""Build dashboards/retrymw-overview.json from code, with Grafana's typed grafana-foundation-sdk.

The committed JSON is generated: edit this module, then regenerate it::

    .venv/bin/python -m dashboards.build            # writes dashboards/retrymw-overview.json
    .venv/bin/python -m dashboards.build --check    # exit 1 if the committed file is stale

tests/test_dashboards.py fails when the two differ, and evaluates every expression below against
a real Prometheus.

The dashboard answers, top to bottom: is a dependency failing, are we amplifying (and do our
callers retry into us: the inbound retry share of each service), what are the calls refused
without an attempt, how slow are admitted calls, is a budget, throttle or breaker saturating,
and which target is it. Calls the breaker or the throttle refused made no attempt
(outcomes ``circuit_open`` and ``shed``): amplification, retry ratio, latency and attempts per
call count admitted calls only, and refusals are shown beside them, never mixed in (a total
outage otherwise reads as a green amplification of 0.004 and a faster p50).

The stat row reads the same 5-minute windows as the alerts and the recording rules, as instant
queries: it shows the picture the alerts judge, not the last 20 seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import (
    bargauge,
    common,
    heatmap,
    stat,
    statetimeline,
    table,
    timeseries,
)
from grafana_foundation_sdk.builders import dashboard as builder
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_model
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import prometheus as prom_model

from retrymw.instrumentation import _names as names

OUTPUT = Path(__file__).resolve().parent / "retrymw-overview.json"
#: Grafana 10.4's classic JSON model (the SDK defaults to 36).
SCHEMA_VERSION = 39

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")

#: Every selector of a policy metric honours the four variables; circuit metrics have no
#: policy or target label (they are joined with `names.CIRCUIT_INFO`, `selected_circuits`), the
#: policy info metric no target label.
ALL = 'job=~"$job", instance=~"$instance", retrymw_policy=~"$policy", retrymw_target=~"$target"'
CIRCUIT = 'job=~"$job", instance=~"$instance"'
#: The circuits of the selected policies and targets: what a circuit selector is joined with.
CIRCUIT_JOIN = "on (job, instance, retrymw_circuit)"
JOB = 'job=~"$job"'
POLICY = 'job=~"$job", instance=~"$instance", retrymw_policy=~"$policy"'
#: The inbound metric (server companion) has neither: it counts requests, not policy calls.
INBOUND = CIRCUIT

#: Calls refused before any attempt: they are not part of amplification, latency or attempts.
REFUSED = 'retrymw_outcome=~"circuit_open|shed|paced"'
SUCCESS = 'retrymw_outcome="success"'
BUDGET_DENIALS = 'retrymw_reason=~"throttled|budget_exhausted"'
RETRIED = 'retrymw_attempt_outcome="retried"'
ADMITTED = 'retrymw_outcome!~"circuit_open|shed|paced"'
#: Calls and attempts are counted by the duration histograms' ``_count`` (no counters since
#: issue 18; same labels, the attempts one with ``error_type``).
CALLS = names.count_of(names.CALL_DURATION)
ATTEMPTS_PER_CALL = names.CALL_ATTEMPTS.prometheus
ATTEMPTS = names.count_of(names.ATTEMPT_DURATION)
#: The stat row's window: the one the alerts and recording rules use.
STAT_WINDOW = "5m"
RATE = "$__rate_interval"


def state_is(state: str) -> str:
    """The matcher of one circuit state."""
    return f'retrymw_circuit_state="{state}"'


def selected_circuits(expr: str) -> str:
    """``expr`` (circuit series) kept for the circuits that govern the selected policies and
    targets: ``$policy`` and ``$target`` filter the circuit panels too (issue 31)."""
    return f"({expr}) and {CIRCUIT_JOIN} {sel(names.CIRCUIT_INFO.prometheus)}"


def sel(metric: str, *matchers: str, base: str = ALL) -> str:
    """``metric{<variables>, <matchers>}``."""
    return f"{metric}{{{', '.join((base, *matchers))}}}"


def rate(metric: str, *matchers: str, window: str = RATE, by: str = "", base: str = ALL) -> str:
    """``sum [by (...)] (rate(metric{...}[window]))``."""
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} (rate({sel(metric, *matchers, base=base)}[{window}]))"


def amplification(window: str, by: str = "") -> str:
    """Attempts per admitted call."""
    return (
        f"{rate(ATTEMPTS, window=window, by=by)}\n/\n{rate(CALLS, ADMITTED, window=window, by=by)}"
    )


def retry_ratio(window: str, by: str = "") -> str:
    """Retries per admitted call."""
    retried = rate(ATTEMPTS, RETRIED, window=window, by=by)
    return f"{retried}\n/\n{rate(CALLS, ADMITTED, window=window, by=by)}"


def rescued(window: str, by: str = "") -> str:
    """Calls/s that succeeded after at least one retry.

    The attempts-per-call histogram observes only calls that made other than one attempt
    (issue 18: one attempt is the rule, and the call histogram's ``_count`` counts it), so its
    ``_count`` for outcome success is exactly the successes that needed a retry.
    """
    return rate(ATTEMPTS_PER_CALL + "_count", SUCCESS, window=window, by=by)


def attempts_per_call_buckets(window: str) -> str:
    """Admitted calls by attempts made, cumulative by ``le``, over ``window``.

    The histogram leaves out calls that made exactly one attempt: they are the call
    histogram's count less its own, and every bucket (the lowest is ``le="1.0"``) includes them.
    """

    def increase(metric: str, by: str = "") -> str:
        return rate(metric, ADMITTED, window=window, by=by).replace("rate(", "increase(", 1)

    one_attempt = f"{increase(CALLS)} - {increase(ATTEMPTS_PER_CALL + '_count')}"
    return f"{increase(ATTEMPTS_PER_CALL + '_bucket', by='le')}\n+ scalar({one_attempt})"


def inbound_retry_share(window: str) -> str:
    """Per service: inbound requests its callers marked as retries / those marked at all.

    Requests without an attempt header (``unknown``) are left out: they say nothing either way.
    """
    metric = names.INBOUND_REQUESTS.prometheus
    attempt = names.LABEL_INBOUND_ATTEMPT
    by = names.LABEL_SERVICE
    retries = rate(metric, f'{attempt}="retry"', window=window, by=by, base=INBOUND)
    marked = rate(metric, f'{attempt}=~"first|retry"', window=window, by=by, base=INBOUND)
    return f"{retries}\n/\n{marked}"


def quantile(q: float, metric: str, *matchers: str) -> str:
    """``histogram_quantile(q, sum by (le) (rate(metric_bucket{...}[$__rate_interval])))``."""
    return f"histogram_quantile({q:g}, {rate(f'{metric}_bucket', *matchers, by='le')})"


def query(expr: str, legend: str = "__auto", ref: str = "A") -> prom.Dataquery:
    """A range query of the panel."""
    return (
        prom.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DATASOURCE).range()
    )


def instant(expr: str, legend: str = "__auto", ref: str = "A") -> prom.Dataquery:
    """An instant query: the stat row and the tables read one value per series."""
    return query(expr, legend, ref).instant()


def thresholds(*steps: tuple[float | None, str]) -> builder.ThresholdsConfig:
    """Absolute thresholds; the first step's value is None (from -inf)."""
    return (
        builder.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps([model.Threshold(value=value, color=color) for value, color in steps])
    )


GREEN_ABOVE_99 = thresholds((None, "red"), (0.95, "orange"), (0.99, "green"))
RED_ABOVE = {
    "amplification": thresholds((None, "green"), (1.2, "orange"), (1.5, "red")),
    "share": thresholds((None, "green"), (0.01, "orange"), (0.05, "red")),
    "count": thresholds((None, "green"), (1, "red")),
}


class Layout:
    """Places panels left to right on Grafana's 24-column grid, rows below each other."""

    def __init__(self) -> None:
        self.x = self.y = self.row_height = 0
        self.next_id = 0

    def id(self) -> int:
        """The next panel id."""
        self.next_id += 1
        return self.next_id

    def row(self, title: str) -> builder.Row:
        """A row header across the grid."""
        self.newline()
        row = builder.Row(title).id(self.id()).grid_pos(model.GridPos(h=1, w=24, x=0, y=self.y))
        self.y += 1
        return row

    def place(self, width: int, height: int) -> model.GridPos:
        """The next free position for a ``width`` x ``height`` panel."""
        if self.x + width > 24:
            self.newline()
        pos = model.GridPos(h=height, w=width, x=self.x, y=self.y)
        self.x += width
        self.row_height = max(self.row_height, height)
        return pos

    def newline(self) -> None:
        """Start a new line of panels."""
        self.y += self.row_height
        self.x = self.row_height = 0


def stats(layout: Layout) -> list[Builder[Any]]:
    """The at-a-glance row: six 5-minute instant stats."""
    window = STAT_WINDOW
    refused = f"(sum (rate({sel(CALLS, REFUSED)}[{window}])) or vector(0))"
    denied = (
        f"(sum (rate({sel('retrymw_retries_denied_total', BUDGET_DENIALS)}"
        f"[{window}])) or vector(0))"
    )
    retried = rate(ATTEMPTS, RETRIED, window=window)
    calls = rate(CALLS, window=window)
    specs: list[tuple[str, str, str, str, builder.ThresholdsConfig]] = [
        (
            "Call success ratio (5m)",
            "Share of all calls (refused ones included: callers see them fail) that succeeded "
            "over the last 5 minutes, the window of the alerts and SLO rules.",
            f"{rate(CALLS, SUCCESS, window=window)}\n/\n{calls}",
            "percentunit",
            GREEN_ABOVE_99,
        ),
        (
            "Amplification, admitted calls (5m)",
            "Attempts per admitted call over the last 5 minutes: the load multiplier retries "
            "put on dependencies. 1.00 means no retries. Refused calls (no attempt) are left "
            "out; see 'Refused calls'.",
            amplification(window),
            "none",
            RED_ABOVE["amplification"],
        ),
        (
            "Refused calls (5m)",
            "Share of calls refused without any attempt (open circuit or throttle shedding) over "
            "the last 5 minutes: load kept off a failing dependency, errors for the caller.",
            f"{refused}\n/\n{calls}",
            "percentunit",
            RED_ABOVE["share"],
        ),
        (
            "Open circuits",
            "Circuit breakers open right now, across the selected jobs and instances. Any "
            "non-zero value means calls to a dependency fail fast with CircuitOpenError.",
            "count(max by (job, instance, retrymw_circuit) ("
            + selected_circuits(sel("retrymw_circuit_state", state_is("open"), base=CIRCUIT))
            + ") == 1) or vector(0)",
            "none",
            RED_ABOVE["count"],
        ),
        (
            "Retries denied by budgets (5m)",
            "Share of the retries calls wanted that a retry budget denied (reasons throttled and "
            "budget_exhausted) over the last 5 minutes: the semantics of "
            "RetrymwRetryBudgetExhausted, not a count of single denials.",
            f"{denied}\n/\n({denied}\n+\n{retried})",
            "percentunit",
            thresholds((None, "green"), (0.05, "orange"), (0.25, "red")),
        ),
        (
            "Calls rescued by retries (5m)",
            "Share of all calls that succeeded only because they were retried (outcome success "
            "after two or more attempts) over the last 5 minutes: what retries are buying.",
            f"({rescued(window)})\n/\n{calls}",
            "percentunit",
            thresholds((None, "text")),
        ),
    ]
    panels: list[Builder[Any]] = []
    for title, description, expr, unit, steps in specs:
        panels.append(
            stat.Panel()
            .id(layout.id())
            .title(title)
            .description(description)
            .datasource(DATASOURCE)
            .grid_pos(layout.place(4, 4))
            .unit(unit)
            .decimals(2)
            .thresholds(steps)
            .color_mode(common_model.BigValueColorMode.BACKGROUND)
            .graph_mode(common_model.BigValueGraphMode.NONE)
            .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
            .with_target(instant(expr, title.split(" (")[0]))
        )
    return panels


def series(
    layout: Layout,
    title: str,
    description: str,
    unit: str,
    targets: list[prom.Dataquery],
    *,
    width: int = 12,
    height: int = 8,
    stacked: bool = False,
    max_value: float | None = None,
) -> timeseries.Panel:
    """A time series panel."""
    panel = (
        timeseries.Panel()
        .id(layout.id())
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .grid_pos(layout.place(width, height))
        .unit(unit)
        .min(0)
        .fill_opacity(10)
        .legend(
            common.VizLegendOptions()
            .display_mode(common_model.LegendDisplayMode.LIST)
            .placement(common_model.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(common.VizTooltipOptions().mode(common_model.TooltipDisplayMode.MULTI))
        .targets(targets)  # type: ignore[arg-type]
    )
    if stacked:
        panel = panel.stacking(common.StackingConfig().mode(common_model.StackingMode.NORMAL))
    if max_value is not None:
        panel = panel.max(max_value)
    return panel


def latency(metric: str, *matchers: str, quantiles: tuple[float, ...]) -> list[prom.Dataquery]:
    """One target per quantile, with exemplars (trace ids) for the latency panels."""
    refs = "ABC"
    return [
        query(quantile(q, metric, *matchers), f"p{q * 100:g}", refs[index]).exemplar(True)
        for index, q in enumerate(quantiles)
    ]


def failing(layout: Layout) -> list[Builder[Any]]:
    """Is a dependency failing?"""
    return [
        layout.row("Is a dependency failing?"),
        series(
            layout,
            "Calls/s by outcome",
            "Logical calls per second by how they ended: success, failure (not retryable), "
            "exhausted (attempts ran out), budget_exhausted/throttled (a budget said no), "
            "circuit_open/shed (refused), deadline_exceeded, cancelled.",
            "reqps",
            [query(rate(CALLS, by="retrymw_outcome"), "{{retrymw_outcome}}")],
            stacked=True,
        ),
        series(
            layout,
            "Failed attempts/s by error type (top 10)",
            "Attempts that failed, by status code or exception class: what the dependency is "
            "answering. Refused calls made no attempt and are not here.",
            "reqps",
            [
                query(
                    "topk(10, "
                    + rate(ATTEMPTS, 'retrymw_attempt_outcome!="success"', by="error_type")
                    + ")",
                    "{{error_type}}",
                )
            ],
        ),
    ]


def amplifying(layout: Layout) -> list[Builder[Any]]:
    """Are we amplifying, and what did retries rescue?"""
    target = "retrymw_target"
    return [
        layout.row("Are we amplifying? (admitted calls)"),
        series(
            layout,
            "Amplification by target (attempts per admitted call)",
            "Attempts per admitted call, per target: 1.00 means no retries, above 1.5 retries "
            "multiply the load on a dependency that may already be struggling.",
            "none",
            [query(amplification(RATE, by=target), "{{retrymw_target}}")],
            width=8,
        ),
        series(
            layout,
            "Inbound retry share by service",
            "Per service (retrymw.server middleware): the share of the requests it received "
            "that its callers marked as retries (attempt header 2 or more; requests without "
            "the header left out). Read it beside the outbound amplification on its left: when "
            "retries happen at one layer, only the service just above a fault amplifies and "
            "only the faulty service receives retries; both at once mean two layers retry.",
            "percentunit",
            [query(inbound_retry_share(RATE), f"{{{{{names.LABEL_SERVICE}}}}}")],
            width=8,
            max_value=1,
        ),
        series(
            layout,
            "Retry ratio by target (retries per admitted call)",
            "Retries per admitted call, per target (0.3 = three retries for every ten calls); "
            "RetrymwHighRetryRatio fires above 20% for 10 minutes.",
            "percentunit",
            [query(retry_ratio(RATE, by=target), "{{retrymw_target}}")],
            width=8,
        ),
        series(
            layout,
            "Calls rescued by a retry/s, by target",
            "Calls per second that succeeded after at least one retry (outcome success, two or "
            "more attempts): the failures callers never saw.",
            "reqps",
            [query(rescued(RATE, by=target), "{{retrymw_target}}")],
            width=8,
        ),
        series(
            layout,
            "Attempts/s by outcome",
            "Attempts per second: success, retried (failed and retried) and failed (failed, no "
            "retry followed). This is the load the dependency receives.",
            "reqps",
            [
                query(
                    rate(ATTEMPTS, by="retrymw_attempt_outcome"),
                    "{{retrymw_attempt_outcome}}",
                )
            ],
            width=8,
            stacked=True,
        ),
        series(
            layout,
            "Admitted vs refused calls/s (refusals by reason)",
            "Calls admitted (at least one attempt) next to calls refused before any attempt, by "
            "reason: circuit_open (breaker) and shed (adaptive throttle).",
            "reqps",
            [
                query(rate(CALLS, ADMITTED), "admitted", "A"),
                query(
                    rate(CALLS, REFUSED, by="retrymw_outcome"),
                    "refused: {{retrymw_outcome}}",
                    "B",
                ),
            ],
            width=8,
        ),
    ]


def slowness(layout: Layout) -> list[Builder[Any]]:
    """How slow are admitted calls and their attempts?"""
    return [
        layout.row("Latency (admitted calls)"),
        series(
            layout,
            "Call latency of admitted calls, backoff included (p50/p95/p99)",
            "End-to-end duration of admitted calls, every attempt and backoff wait included. "
            "Refused calls return in microseconds and would drag the quantiles down. Exemplars "
            "link to the call's trace.",
            "s",
            latency("retrymw_call_duration_seconds", ADMITTED, quantiles=(0.5, 0.95, 0.99)),
        ),
        series(
            layout,
            "Attempt latency (p50/p95/p99)",
            "Duration of single attempts: what the dependency itself takes. Exemplars link to "
            "the attempt's trace.",
            "s",
            latency("retrymw_attempt_duration_seconds", quantiles=(0.5, 0.95, 0.99)),
        ),
        heatmap.Panel()
        .id(layout.id())
        .title("Attempt duration distribution")
        .description(
            "Heatmap of attempt durations per rate interval: a second band of slow attempts is "
            "timeouts."
        )
        .datasource(DATASOURCE)
        .grid_pos(layout.place(12, 8))
        .unit("s")
        .calculate(False)
        .with_target(
            query(
                rate("retrymw_attempt_duration_seconds_bucket", by="le").replace(
                    "rate(", "increase(", 1
                ),
                "{{le}}",
            ).format(prom_model.PromQueryFormat.HEATMAP)
        ),
        bargauge.Panel()
        .id(layout.id())
        .title("Attempts per admitted call distribution")
        .description(
            "Admitted calls of the selected time range by the number of attempts they made: "
            "each bar counts the calls above the bound of the bar before it, up to its own "
            "(8 counts calls of 7 or 8 attempts, +Inf those of more than 10)."
        )
        .datasource(DATASOURCE)
        .grid_pos(layout.place(12, 8))
        .unit("short")
        .orientation(common_model.VizOrientation.HORIZONTAL)
        .display_mode(common_model.BarGaugeDisplayMode.GRADIENT)
        .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .with_target(
            instant(attempts_per_call_buckets("$__range"), "{{le}}").format(
                prom_model.PromQueryFormat.HEATMAP
            )
        ),
    ]


def saturation(layout: Layout) -> list[Builder[Any]]:
    """Is a budget, a throttle or a breaker saturating?"""
    by = "retrymw_policy, retrymw_target"
    label = "{{retrymw_policy}} / {{retrymw_target}}"
    circuit = "retrymw_circuit"
    return [
        layout.row("Saturation: budgets, throttles, breakers"),
        series(
            layout,
            "Retry budget: available vs capacity",
            "Tokens left in each cross-call retry budget next to its current capacity (one "
            "retry costs one token). Available near 0 while capacity is high: retries are "
            "being denied.",
            "short",
            [
                query(
                    f"min by ({by}) ({sel('retrymw_retry_budget_available')})",
                    f"{label} available",
                    "A",
                ),
                query(
                    f"min by ({by}) ({sel('retrymw_retry_budget_capacity')})",
                    f"{label} capacity",
                    "B",
                ),
            ],
            width=8,
        ),
        series(
            layout,
            "Throttle rejection probability",
            "Probability that each adaptive throttle sheds the next attempt (0 = the dependency "
            "accepts enough; the cap is max_reject). Rising: the dependency answers fewer than "
            "1/k of the requests.",
            "percentunit",
            [
                query(
                    f"max by ({by}) ({sel('retrymw_throttle_reject_probability')})",
                    label,
                )
            ],
            width=8,
            max_value=1,
        ),
        series(
            layout,
            "Breaker trip rules: share of each threshold reached",
            "Each breaker's two rules as a share of the value that trips them (100% = trips): "
            "its failure rate over the sliding window against failure_rate_threshold, and its "
            "consecutive failures against failure_threshold. Neither moves while the circuit is "
            "open, so the rule at 100% is the one that opened it (a consecutive trip with a "
            "failure rate well below its threshold is a dependency that died at once).",
            "percentunit",
            [
                query(
                    f"max by ({circuit}) ("
                    + selected_circuits(
                        f"{sel('retrymw_circuit_failure_rate', base=CIRCUIT)} / {CIRCUIT_JOIN} "
                        f"{sel('retrymw_circuit_failure_rate_threshold', base=CIRCUIT)}"
                    )
                    + ")",
                    "{{retrymw_circuit}} failure rate",
                    "A",
                ),
                query(
                    f"max by ({circuit}) ("
                    + selected_circuits(
                        sel("retrymw_circuit_consecutive_failure_ratio", base=CIRCUIT)
                    )
                    + ")",
                    "{{retrymw_circuit}} consecutive failures",
                    "B",
                ),
            ],
            width=8,
        ),
        series(
            layout,
            "Backoff delay (p50/p95)",
            "The waits between attempts, server Retry-After hints included.",
            "s",
            [
                query(quantile(0.5, "retrymw_backoff_duration_seconds"), "p50", "A"),
                query(quantile(0.95, "retrymw_backoff_duration_seconds"), "p95", "B"),
            ],
            width=8,
        ),
        series(
            layout,
            "Time spent sleeping (calls in backoff at once)",
            "Backoff seconds per second, per target: the average number of calls asleep between "
            "attempts at any moment (each holds its caller, and maybe a connection slot).",
            "short",
            [
                query(
                    rate("retrymw_backoff_duration_seconds_sum", by="retrymw_target"),
                    "{{retrymw_target}}",
                )
            ],
            width=8,
        ),
        series(
            layout,
            "Retries denied/s by reason",
            "Retryable failures that got no retry, by reason: max_attempts, budget_exhausted and "
            "throttled (a retry budget), circuit_open, deadline_exceeded, not_idempotent...",
            "reqps",
            [
                query(
                    rate("retrymw_retries_denied_total", by="retrymw_reason"),
                    "{{retrymw_reason}}",
                )
            ],
            width=8,
        ),
    ]


def pacing(layout: Layout) -> list[Builder[Any]]:
    """Is a pacer holding sends back, at what rate, and what does it refuse?"""
    by = "retrymw_policy, retrymw_target"
    label = "{{retrymw_policy}} / {{retrymw_target}}"
    wait = names.PACER_WAIT.prometheus
    paced = rate(CALLS, 'retrymw_outcome="paced"', by=by)
    # Every paced target, at 0 while nothing is refused: the series exists from the first send.
    paced_targets = f"0 * {rate(wait + '_count', by=by)}"
    at_once = rate(wait + "_bucket", 'le="0.001"', by=by)
    waited = f"{rate(wait + '_count', by=by)}\n- {at_once}"
    return [
        layout.row("Pacing: sending at the rate the server allows"),
        series(
            layout,
            "Pacer wait for a slot (p50/p99)",
            "How long attempts waited for their pacer's slot before they were sent. Rising: the "
            "callers offer more than the limit the pacer keeps to, and queue for it (a call whose "
            "slot lies past its deadline fails at once as paced).",
            "s",
            [
                query(quantile(0.5, wait), "p50", "A"),
                query(quantile(0.99, wait), "p99", "B"),
            ],
            width=8,
        ),
        series(
            layout,
            "Pacer: learned limit vs current rate, per target",
            "The requests limit each pacer learned from the server's rate-limit headers (0: none "
            "learned) next to the rate it sends at now (95% of the limit, lower after a 429 and "
            "climbing back; 0: not pacing).",
            "reqps",
            [
                query(
                    f"max by ({by}) ({sel(names.PACER_LIMIT.prometheus)})", f"{label} limit", "A"
                ),
                query(f"max by ({by}) ({sel(names.PACER_RATE.prometheus)})", f"{label} rate", "B"),
            ],
            width=8,
        ),
        series(
            layout,
            "Paced: calls refused for their slot, attempts that waited",
            "Calls/s refused before any attempt because their pacer's next slot lay past their "
            "deadline (outcome paced; 0 for every paced target while none is), and attempts/s "
            "that waited for their slot (over 1 ms) rather than going at once.",
            "reqps",
            [
                query(f"{paced}\nor\n{paced_targets}", f"{label} refused (paced)", "A"),
                query(waited, f"{label} waited", "B"),
            ],
            width=8,
        ),
    ]


def fleet(layout: Layout) -> list[Builder[Any]]:
    """Is the fleet sharing its protection, and is every process in it?"""
    by_fleet = "retrymw_fleet"
    by_process = "job, instance"
    open_processes = (
        f"count(max by ({by_process}) ("
        + selected_circuits(sel("retrymw_circuit_state", state_is("open"), base=CIRCUIT))
        + ") == 1) or vector(0)"
    )
    return [
        layout.row("Fleet (processes sharing protection on Redis/Valkey)"),
        series(
            layout,
            "Fleet amplification (attempts per admitted call, all processes)",
            "Attempts per admitted call summed over every selected process: the load the whole "
            "fleet puts on its dependencies, next to the busiest single process. With shared "
            "budgets (RedisFleet) an outage costs the fleet one bucket, not one per process.",
            "none",
            [
                query(amplification(RATE), "fleet", "A"),
                query(
                    f"max ({amplification(RATE, by=by_process)})",
                    "busiest process",
                    "B",
                ),
            ],
            width=8,
        ),
        series(
            layout,
            "Processes with a circuit open",
            "Processes in which at least one circuit is open. A shared circuit opens on a quorum "
            "of processes and then in every member within two sync intervals; one process alone "
            "here is a local problem (its own network), which the fleet does not follow.",
            "short",
            [query(open_processes, "processes", "A")],
            width=8,
        ),
        series(
            layout,
            "Fleet members and degraded members",
            "Members each fleet (namespace) counted at its last step, and the processes deciding "
            "on local shares alone because the store is slow, hung or down (degraded).",
            "short",
            [
                query(
                    f"max by ({by_fleet}) ({sel('retrymw_fleet_members', base=CIRCUIT)})",
                    "{{retrymw_fleet}} members",
                    "A",
                ),
                query(
                    f"sum by ({by_fleet}) ({sel('retrymw_fleet_degraded', base=CIRCUIT)})",
                    "{{retrymw_fleet}} degraded",
                    "B",
                ),
            ],
            width=8,
        ),
        series(
            layout,
            "Fleet sync age and lag",
            "Seconds since each process's last successful step (the age of its view of the "
            "fleet; above two sync intervals the process is degraded) and the step's round trip "
            "to the store, worst process per fleet.",
            "s",
            [
                query(
                    f"max by ({by_fleet}) ({sel('retrymw_fleet_sync_age_seconds', base=CIRCUIT)})",
                    "{{retrymw_fleet}} sync age",
                    "A",
                ),
                query(
                    f"max by ({by_fleet}) ({sel('retrymw_fleet_sync_lag_seconds', base=CIRCUIT)})",
                    "{{retrymw_fleet}} sync lag",
                    "B",
                ),
            ],
        ),
        series(
            layout,
            "Budget tokens leased from the fleet/s",
            "Retry-budget tokens the processes lease from the fleet's shared buckets: the "
            "fleet's retries being spent. Near zero in an outage once the bucket is empty.",
            "short",
            [
                query(
                    f"sum by ({by_fleet}) (rate("
                    f"{sel('retrymw_fleet_tokens_leased_total', base=CIRCUIT)}[{RATE}]))",
                    "{{retrymw_fleet}}",
                )
            ],
        ),
    ]


STATE_NAMES = {0: ("closed", "green"), 1: ("half_open", "yellow"), 2: ("open", "red")}


def circuits(layout: Layout) -> list[Builder[Any]]:
    """Is a circuit open?"""
    mappings: list[model.ValueMapping] = [
        model.ValueMap(
            options={
                str(value): model.ValueMappingResult(text=text, color=color, index=value)
                for value, (text, color) in STATE_NAMES.items()
            }
        )
    ]
    # The worst state of each step: a circuit open for 5 s of a 30 s step reads open, at any
    # zoom (the last sample of the step alone showed 1 of 6 such opens, issue 31).
    state = " or ".join(
        "(max_over_time("
        f"{sel('retrymw_circuit_state', state_is(name), base=CIRCUIT)}[$__interval]) == 1) "
        f"* {value}"
        for value, (name, _) in STATE_NAMES.items()
    )
    return [
        layout.row("Circuit breakers"),
        statetimeline.Panel()
        .id(layout.id())
        .title("Circuit state")
        .description(
            "Each circuit breaker's worst state in each step: closed (green), half_open "
            "(yellow, one probe), open (red, calls refused), so a brief open shows at any zoom. "
            "Healthy circuits read closed from the start."
        )
        .datasource(DATASOURCE)
        .grid_pos(layout.place(12, 8))
        .unit("none")
        .mappings(mappings)
        .show_value(common_model.VisibilityMode.NEVER)
        .with_target(
            query(f"max by (retrymw_circuit) ({selected_circuits(state)})", "{{retrymw_circuit}}")
        ),
        series(
            layout,
            "Circuit transitions by new state",
            "Transitions per rate interval, by circuit and the state entered. Every circuit's "
            "counters exist from creation at 0, so the first trip is counted.",
            "short",
            [
                query(
                    "sum by (retrymw_circuit, retrymw_circuit_state) ("
                    + selected_circuits(
                        f"increase({sel('retrymw_circuit_transitions_total', base=CIRCUIT)}"
                        f"[{RATE}])"
                    )
                    + ")",
                    "{{retrymw_circuit}} → {{retrymw_circuit_state}}",
                )
            ],
        ),
    ]


def drill_down(layout: Layout) -> list[Builder[Any]]:
    """Which target, and with which policy?"""
    by = "retrymw_policy, retrymw_target"
    window = STAT_WINDOW
    row = layout.row("Per target")
    columns = [
        ("calls/s", rate(CALLS, window=window, by=by), "reqps"),
        (
            "success",
            f"{rate(CALLS, SUCCESS, window=window, by=by)}\n/\n{rate(CALLS, window=window, by=by)}",
            "percentunit",
        ),
        ("amplification", amplification(window, by=by), "none"),
        ("retry ratio", retry_ratio(window, by=by), "percentunit"),
        ("refused/s", rate(CALLS, REFUSED, window=window, by=by), "reqps"),
        ("rescued/s", rescued(window, by=by), "reqps"),
        (
            "p95 latency",
            "histogram_quantile(0.95, "
            + rate("retrymw_call_duration_seconds_bucket", ADMITTED, window=window, by=f"{by}, le")
            + ")",
            "s",
        ),
    ]
    refs = "ABCDEFG"
    per_target = (
        table.Panel()
        .id(layout.id())
        .title("Per target (5m)")
        .description(
            "One row per policy and target over the last 5 minutes: calls/s, success ratio, "
            "amplification and retry ratio of admitted calls, refused and rescued calls/s, p95 "
            "latency of admitted calls. Sort by a column to find the target in trouble."
        )
        .datasource(DATASOURCE)
        .grid_pos(layout.place(24, 8))
        .unit("none")
        .targets(
            [
                instant(expr, name, refs[index]).format(prom_model.PromQueryFormat.TABLE)
                for index, (name, expr, _) in enumerate(columns)
            ]
        )
        .with_transformation(model.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            model.DataTransformerConfig(
                id_val="organize",
                options={
                    "excludeByName": {"Time": True},
                    "renameByName": {
                        "retrymw_policy": "policy",
                        "retrymw_target": "target",
                        **{f"Value #{refs[i]}": name for i, (name, _, _) in enumerate(columns)},
                    },
                },
            )
        )
    )
    for index, (_, _, unit) in enumerate(columns):
        per_target = per_target.override_by_name(
            f"Value #{refs[index]}", [model.DynamicConfigValue(id_val="unit", value=unit)]
        )
    info_labels = (
        "retrymw_policy, retrymw_policy_attempts, retrymw_policy_initial_delay, "
        "retrymw_policy_max_delay, retrymw_policy_timeout, retrymw_policy_deadline"
    )
    policies = (
        table.Panel()
        .id(layout.id())
        .title("Policies")
        .description(
            "Each retry policy's configuration as its processes report it (retrymw_policy_info): "
            "attempts, initial and max delay, per-attempt timeout and deadline."
        )
        .datasource(DATASOURCE)
        .grid_pos(layout.place(24, 6))
        .unit("none")
        .with_target(
            instant(
                f"max by ({info_labels}) ({sel('retrymw_policy_info', base=POLICY)})",
                "{{retrymw_policy}}",
            ).format(prom_model.PromQueryFormat.TABLE)
        )
        .with_transformation(
            model.DataTransformerConfig(
                id_val="organize",
                options={"excludeByName": {"Time": True, "Value": True}},
            )
        )
    )
    return [row, per_target, policies]


def variable(name: str, label: str, description: str, match: str) -> builder.QueryVariable:
    """A multi-value ``label_values()`` variable refreshed on time range change."""
    definition = f"label_values({match}, {label})"
    return (
        builder.QueryVariable(name)
        .label(name)
        .description(description)
        .datasource(DATASOURCE)
        .query(definition)
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".+")
        .current(model.VariableOption(selected=True, text=["All"], value=["$__all"]))
    )


def dashboard() -> dict[str, Any]:
    """The overview dashboard as Grafana's JSON model."""
    layout = Layout()
    layout.next_id = 0
    overview = (
        builder.Dashboard("retrymw / Overview")
        .uid("retrymw-overview")
        .description(
            "retrymw: is a dependency failing, are we amplifying, is a circuit open, is a budget "
            "or throttle saturating, what did retries rescue; admitted and refused calls apart."
        )
        .tags(["retrymw", "resilience"])
        .readonly()
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .time("now-1h", "now")
        .timezone("")
        .refresh("30s")
        .with_variable(
            builder.DatasourceVariable("datasource")
            .label("Data source")
            .type("prometheus")
            .description("The Prometheus that scrapes your retrymw clients.")
        )
        .with_variable(variable("job", "job", "Prometheus scrape job.", CALLS))
        .with_variable(variable("instance", "instance", "Scraped process.", f"{CALLS}{{{JOB}}}"))
        .with_variable(
            variable(
                "policy",
                "retrymw_policy",
                "Retry policy name (RetryPolicy.name).",
                f"{CALLS}{{{CIRCUIT}}}",
            )
        )
        .with_variable(
            variable(
                "target",
                "retrymw_target",
                "HTTP host, or the operation name for coroutines.",
                f"{CALLS}{{{POLICY}}}",
            )
        )
        .annotation(
            builder.AnnotationQuery()
            .name("Circuit opened")
            .datasource(DATASOURCE)
            .enable(True)
            .hide(False)
            .icon_color("red")
            .expr(
                "sum by (retrymw_circuit) ("
                + selected_circuits(
                    "increase("
                    + sel(
                        "retrymw_circuit_transitions_total",
                        'retrymw_circuit_previous_state="closed"',
                        'retrymw_circuit_state="open"',
                        base=CIRCUIT,
                    )
                    + f"[{RATE}])"
                )
                + ") > 0"
            )
        )
    )
    overview = overview.with_row(layout.row("At a glance (last 5 minutes)"))
    sections = [stats(layout), failing(layout), amplifying(layout), slowness(layout)]
    sections += [saturation(layout), pacing(layout), circuits(layout), fleet(layout)]
    sections.append(drill_down(layout))
    for section in sections:
        for item in section:
            if isinstance(item, builder.Row):
                overview = overview.with_row(item)
            else:
                overview = overview.with_panel(item)
    built = overview.build()
    built.schema_version = SCHEMA_VERSION
    data: dict[str, Any] = json.loads(json.dumps(built, cls=JSONEncoder))
    # The SDK has no `definition` (what Grafana's editor shows for a query variable).
    for var in data["templating"]["list"]:
        if var["type"] == "query":
            var["definition"] = var["query"]
    # File provisioning cannot fill `${DS_...}` inputs: say explicitly that there are none.
    return {"__inputs": [], **data}


def render() -> str:
    """The dashboard's JSON text, as committed."""
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check``, compare) dashboards/retrymw-overview.json."""
    parser = argparse.ArgumentParser(prog="python -m dashboards.build", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run python -m dashboards.build", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
