"""The Grafana dashboard, the Prometheus rules and the compose stack: lint, promtool, live queries.

Three layers:

* lint tests on the JSON and YAML (no Grafana server exists here): the dashboard-linter rules
  that matter, and every metric and label name checked against ``instrumentation/_names.py``;
* promtool: ``check rules``, ``test rules``, ``check config``, and every dashboard expression
  parsed by ``check rules``;
* a real Prometheus on 127.0.0.1 scraping this process while it drives retrymw through every
  scenario, and every panel, variable and rule expression must return data from it.

The promtool and Prometheus tests need Debian's ``prometheus`` package: `make test` installs it,
and a missing binary fails the test rather than skipping it.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from retrymw.instrumentation import _names as names

from . import prometheus_harness as harness
from .system import require_binary

DASHBOARD = harness.load_dashboard()
RULES = harness.load_rules()
QUERIES = harness.queries(DASHBOARD)
RULE_EXPRS = harness.rule_exprs(RULES)
QUERY_VARIABLES = [v for v in harness.variables(DASHBOARD) if v["type"] == "query"]

#: Panels allowed a ``[$__range]`` window (the dashboard-linter ``.lint`` exclusion, with why).
RANGE_ALLOWED = {
    "Attempts per admitted call distribution": "a bar gauge of the range's attempts histogram",
}
#: The window of the stat row and the per-target table: the alerts' and recording rules' 5m.
STAT_WINDOW = "5m"
#: Every metric the dashboard may use: DESIGN's ten, the live saturation gauges, the pacer's,
#: the fleet's, the server companion's inbound requests.
SPECS = {
    spec.prometheus: spec
    for spec in (
        *names.METRICS,
        *names.LIVE_GAUGES,
        *names.PACER_METRICS,
        *names.FLEET_METRICS,
        *names.SERVER_METRICS,
    )
}
CONTRACT_LABELS = {
    value
    for key, value in vars(names).items()
    if key.startswith("LABEL_") and isinstance(value, str)
}
ENUMS: dict[str, set[str]] = {
    names.LABEL_OUTCOME: set(names.OUTCOMES),
    names.LABEL_ATTEMPT_OUTCOME: set(names.ATTEMPT_OUTCOMES),
    names.LABEL_REASON: set(names.REASONS),
    names.LABEL_CIRCUIT_STATE: set(names.CIRCUIT_STATES),
    names.LABEL_CIRCUIT_PREVIOUS_STATE: set(names.CIRCUIT_STATES),
    names.LABEL_INBOUND_ATTEMPT: set(names.INBOUND_ATTEMPTS),
}
ALL = {"job": ".+", "instance": ".+", "policy": ".+", "target": ".+"}
GRAFANA_RANGES = {"__rate_interval": "1m", "__range": "1h", "__interval": "15s"}

query_params = pytest.mark.parametrize("query", [pytest.param(q, id=q.where) for q in QUERIES])
rule_params = pytest.mark.parametrize(
    ("name", "expr"), [pytest.param(n, e, id=n) for n, e in RULE_EXPRS.items()]
)


def grafana(expr: str, values: dict[str, str] | None = None) -> str:
    """The expression as Grafana sends it, for the given variable values (default: All)."""
    return harness.substitute(expr, {**GRAFANA_RANGES, **ALL, **(values or {})})


# -- dashboard lint ------------------------------------------------------------------------------


def test_dashboard_header():
    """Classic JSON (schemaVersion 39-41) with a uid, read-only when provisioned."""
    assert 39 <= DASHBOARD["schemaVersion"] <= 41
    assert DASHBOARD["uid"] == "retrymw-overview"
    assert DASHBOARD["editable"] is False
    assert DASHBOARD["title"]
    assert DASHBOARD["__inputs"] == []  # `${DS_...}` inputs break file provisioning


def test_exactly_one_datasource_variable():
    """One ``datasource`` variable, for Prometheus, named and labelled as the linter wants."""
    sources = [v for v in harness.variables(DASHBOARD) if v["type"] == "datasource"]
    assert len(sources) == 1
    assert sources[0]["name"] == "datasource"
    assert sources[0]["query"] == "prometheus"
    assert sources[0]["label"] == "Data source"


def test_every_panel_target_and_variable_uses_the_datasource_variable():
    """Panels, their targets, query variables and annotations all point at ``${datasource}``."""
    expected = {"type": "prometheus", "uid": "${datasource}"}
    users = [*harness.panels(DASHBOARD), *QUERY_VARIABLES]
    users += [t for p in harness.panels(DASHBOARD) for t in p.get("targets", [])]
    users += [a for a in DASHBOARD["annotations"]["list"] if "expr" in a]
    assert users
    for user in users:
        assert user.get("datasource") == expected, user.get("title") or user.get("refId")


def test_query_variables_follow_the_linter_conventions():
    """job, instance, policy, target: multi-value label_values() refreshed on time change."""
    assert [v["name"] for v in QUERY_VARIABLES] == ["job", "instance", "policy", "target"]
    labels = [harness.parse_label_values(harness.variable_query(v))[1] for v in QUERY_VARIABLES]
    assert labels == ["job", "instance", names.LABEL_POLICY, names.LABEL_TARGET]
    for variable in QUERY_VARIABLES:
        assert variable["refresh"] == 2
        assert variable["multi"] is True
        assert variable["includeAll"] is True
        assert variable["allValue"] == ".+"
        assert variable["definition"] == harness.variable_query(variable)


def test_every_panel_has_title_description_and_unit():
    """Every panel says what it shows, how to read it, and in which unit."""
    for panel in harness.panels(DASHBOARD):
        assert panel.get("title"), panel["id"]
        assert len(panel.get("description", "")) > 40, panel["title"]
        assert panel["fieldConfig"]["defaults"].get("unit"), panel["title"]
        assert panel.get("targets"), panel["title"]
    for row in harness.panels(DASHBOARD, rows=True):
        assert row.get("title"), row["id"]


def test_panel_ids_are_unique():
    """Panel ids, rows included, are unique."""
    ids = [panel["id"] for panel in harness.panels(DASHBOARD, rows=True)]
    assert len(ids) == len(set(ids))


def test_panel_grid_does_not_overlap():
    """Panels fit the 24-column grid and no two overlap."""
    cells: dict[tuple[int, int], str] = {}
    for panel in harness.panels(DASHBOARD, rows=True):
        pos = panel["gridPos"]
        assert min(pos["w"], pos["h"]) > 0, panel["title"]
        assert min(pos["x"], pos["y"]) >= 0, panel["title"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[x, y]!r}"
                cells[x, y] = panel["title"]


def test_the_dashboard_shows_every_panel_of_the_research_plan():
    """The panels of observability.md §8.6 and of issue 17's questions are all there."""
    titles = " | ".join(panel["title"] for panel in harness.panels(DASHBOARD)).lower()
    for words in [
        "success ratio",
        "retry ratio",
        "amplification",
        "inbound retry share by service",
        "open circuits",
        "denied by budgets",
        "rescued",
        "calls/s by outcome",
        "attempts/s by outcome",
        "error type",
        "refused calls",
        "call latency of admitted calls",
        "attempt latency",
        "attempts per admitted call",
        "backoff delay",
        "time spent sleeping",
        "retry budget: available vs capacity",
        "throttle rejection probability",
        "breaker trip rules",
        "denied/s by reason",
        "circuit state",
        "transitions",
        "per target",
        "policies",
    ]:
        assert words in titles


def test_latency_panels_show_exemplars():
    """The call and attempt latency targets ask Grafana for exemplars."""
    latency = [p for p in harness.panels(DASHBOARD) if "latency" in p["title"].lower()]
    assert len(latency) == 2
    for panel in latency:
        assert all(target.get("exemplar") is True for target in panel["targets"])


def _instant(query: harness.Query) -> bool:
    return any(t.get("instant") for t in query.panel.get("targets", []) if t["expr"] == query.expr)


@query_params
def test_rates_use_the_rate_interval(query: harness.Query):
    """Graphs use ``$__rate_interval``; the stat row and tables the alerts' 5m, as instant queries.

    ``$__range`` only on the allow-listed summary panels. No 20 s last-value windows: a stat
    reads the 5-minute picture the alerts judge.
    """
    windows = harness.ranges(query.expr)
    if harness.range_function_spans(query.expr):
        assert windows
    summary = query.panel.get("type") in ("stat", "table")
    assert summary == _instant(query) or query.panel.get("title") in RANGE_ALLOWED, query.where
    for window in windows:
        if window == "$__range":
            assert query.panel.get("title") in RANGE_ALLOWED, query.where
        elif summary:
            assert window == STAT_WINDOW, query.where
        elif window == "$__interval":  # the worst state of each step: never a rate
            assert query.panel.get("title") == "Circuit state", query.where
        else:
            assert window == "$__rate_interval", query.where


def test_the_circuit_state_shows_the_worst_state_of_each_step():
    """Each state is read with max_over_time over the step ($__interval): a circuit open for
    5 s of a 30 s step reads open at any zoom (issue 31: 1 of 6 such opens showed)."""
    expr = _panel("Circuit state")["targets"][0]["expr"]
    for state in names.CIRCUIT_STATES:
        selector = re.search(
            r'max_over_time\(retrymw_circuit_state\{[^}]*retrymw_circuit_state="'
            + state
            + r'"\}\[\$__interval\]\)',
            expr,
        )
        assert selector is not None, state


def test_latency_histograms_have_edges_at_one_to_two_and_a_half_seconds():
    """Calls, attempts and backoff waits have bucket edges at 1, 1.5, 2 and 2.5 s (issue 31: a
    call p95 read 1.87 s against 1.09 s with one bucket from 1 to 2.5 s)."""
    for spec in (names.CALL_DURATION, names.ATTEMPT_DURATION, names.BACKOFF_DURATION):
        assert {1, 1.5, 2, 2.5} <= set(spec.buckets or ()), spec.prometheus


def test_the_stat_row_reads_the_last_value_of_5m_instant_queries():
    """Each stat reduces with lastNotNull over instant queries (no 20 s windows, no means)."""
    stats = [p for p in harness.panels(DASHBOARD) if p["type"] == "stat"]
    assert len(stats) == 6
    for panel in stats:
        assert panel["options"]["reduceOptions"]["calcs"] == ["lastNotNull"], panel["title"]
        assert all(t["instant"] is True for t in panel["targets"]), panel["title"]
        assert "(5m)" in panel["title"] or "[" not in panel["targets"][0]["expr"]


UNITS = {"percentunit", "none", "short", "reqps", "s"}


def test_units_are_ones_grafana_knows_and_never_seconds_per_second():
    """Every unit is a Grafana unit id; no "s/s" (a rate of seconds is calls asleep at once)."""
    for panel in harness.panels(DASHBOARD):
        assert panel["fieldConfig"]["defaults"]["unit"] in UNITS, panel["title"]
        assert "(s/s)" not in panel["title"], panel["title"]
        for override in panel["fieldConfig"].get("overrides", []):
            for prop in override["properties"]:
                assert prop["id"] != "unit" or prop["value"] in UNITS, panel["title"]
    sleeping = _panel("Time spent sleeping")
    assert "backoff_duration_seconds_sum" in sleeping["targets"][0]["expr"]
    assert sleeping["fieldConfig"]["defaults"]["unit"] == "short"


def _panel(prefix: str) -> dict[str, Any]:
    (panel,) = [p for p in harness.panels(DASHBOARD) if p["title"].startswith(prefix)]
    return panel


ADMITTED = 'retrymw_outcome!~"circuit_open|shed|paced"'


@pytest.mark.parametrize(
    "prefix",
    [
        "Amplification, admitted calls",
        "Amplification by target",
        "Retry ratio by target",
        "Call latency of admitted calls",
        "Attempts per admitted call distribution",
    ],
)
def test_admitted_call_panels_leave_refused_calls_out(prefix: str):
    """Amplification, retry ratio, latency and attempts per call count admitted calls only.

    A refused call (circuit_open, shed) made no attempt: counted, a total outage reads as an
    amplification of 0.004 and a faster p50.
    """
    panel = _panel(prefix)
    for target in panel["targets"]:
        for metric, matchers in re.findall(r"(retrymw_call[a-z_]*)\{([^}]*)\}", target["expr"]):
            if not metric.startswith("retrymw_call_attempts_count"):
                assert ADMITTED in matchers, (prefix, metric)


def test_refusals_are_shown_beside_admitted_calls():
    """One panel plots admitted calls next to refused ones by reason; a stat gives their share."""
    panel = _panel("Admitted vs refused calls/s")
    admitted, refused = (t["expr"] for t in panel["targets"])
    assert ADMITTED in admitted
    assert 'retrymw_outcome=~"circuit_open|shed|paced"' in refused
    assert "by (retrymw_outcome)" in refused
    assert (
        'retrymw_outcome=~"circuit_open|shed|paced"'
        in _panel("Refused calls")["targets"][0]["expr"]
    )


def test_saturation_panels_pair_each_gauge_with_its_limit():
    """Budget available next to capacity, breaker failure rate next to its threshold."""
    budget = " ".join(t["expr"] for t in _panel("Retry budget: available vs capacity")["targets"])
    assert "retrymw_retry_budget_available" in budget
    assert "retrymw_retry_budget_capacity" in budget
    rate, consecutive = (t["expr"] for t in _panel("Breaker trip rules")["targets"])
    # Each rule as a share of its own threshold: the one at 100% tripped the circuit (issue 31:
    # the failure rate read 20% against 80% while a consecutive trip held it open).
    assert re.search(
        r"retrymw_circuit_failure_rate\{[^}]*\} / on \(job, instance, retrymw_circuit\) "
        r"retrymw_circuit_failure_rate_threshold\{",
        rate,
    )
    assert "retrymw_circuit_consecutive_failure_ratio{" in consecutive
    throttle = _panel("Throttle rejection probability")["targets"][0]["expr"]
    assert "retrymw_throttle_reject_probability" in throttle


def test_rescued_calls_are_successes_after_more_than_one_attempt():
    """Rescued = the attempts histogram's successes: it observes only calls that made other
    than one attempt, and a success made at least one."""
    expr = _panel("Calls rescued by retries")["targets"][0]["expr"]
    assert re.search(r'retrymw_call_attempts_count\{[^}]*retrymw_outcome="success"', expr)
    assert "_bucket" not in expr


def test_the_attempts_distribution_adds_back_the_calls_of_one_attempt():
    """Every cumulative bucket gains the admitted calls the attempts histogram leaves out (the
    call histogram's count less its own): without them le=1 would read 0."""
    expr = _panel("Attempts per admitted call distribution")["targets"][0]["expr"]
    bucket, one_attempt = expr.split("+ scalar(")
    assert "increase(retrymw_call_attempts_bucket{" in bucket
    assert "by (le)" in bucket
    assert "increase(retrymw_call_duration_seconds_count{" in one_attempt
    assert "- sum (increase(retrymw_call_attempts_count{" in one_attempt


def test_the_inbound_retry_share_sits_beside_outbound_amplification():
    """Per service: inbound retries over requests marked first or retry, next to amplification.

    Requests without an attempt header say nothing either way and stay out of the share.
    """
    panel = _panel("Inbound retry share by service")
    amplification = _panel("Amplification by target")
    assert panel["gridPos"]["y"] == amplification["gridPos"]["y"]
    assert panel["gridPos"]["x"] == amplification["gridPos"]["x"] + amplification["gridPos"]["w"]
    assert panel["fieldConfig"]["defaults"]["unit"] == "percentunit"
    (target,) = panel["targets"]
    retries, marked = target["expr"].split("\n/\n")
    metric, attempt = names.INBOUND_REQUESTS.prometheus, names.LABEL_INBOUND_ATTEMPT
    assert f'{metric}{{job=~"$job", instance=~"$instance", {attempt}="retry"}}' in retries
    assert f'{metric}{{job=~"$job", instance=~"$instance", {attempt}=~"first|retry"}}' in marked
    for side in (retries, marked):
        assert side.startswith(f"sum by ({names.LABEL_SERVICE}) (rate(")
    assert target["legendFormat"] == f"{{{{{names.LABEL_SERVICE}}}}}"


def test_the_per_target_table_has_one_row_per_policy_and_target():
    """The drill-down table groups every column by policy and target and merges them."""
    panel = _panel("Per target")
    assert panel["type"] == "table"
    assert len(panel["targets"]) >= 6
    for target in panel["targets"]:
        assert target["format"] == "table"
        assert "by (retrymw_policy, retrymw_target" in target["expr"]
    assert [t["id"] for t in panel["transformations"]] == ["merge", "organize"]


def test_the_committed_json_is_what_the_generator_builds():
    """dashboards/retrymw-overview.json is generated: edit dashboards/build.py, not the JSON."""
    result = subprocess.run(
        [sys.executable, "-m", "dashboards.build", "--check"],
        cwd=harness.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


@query_params
def test_counters_are_inside_rate_or_increase(query: harness.Query):
    """No ``*_total`` counter is plotted raw: each sits inside rate() or increase()."""
    assert harness.counters_outside_range_functions(query.expr) == []


@query_params
def test_targets_honour_the_variables(query: harness.Query):
    """Each selector filters on $job and $instance, and on $policy and $target where it can.

    Circuit metrics have no policy or target label, the policy info metric no target label: a
    ``=~".+"`` matcher on a missing label would select nothing. So a circuit series is kept
    for the circuits of the selected policies and targets by a join with
    ``retrymw_circuit_info`` (issue 31: the circuit panels ignored both filters).
    """
    circuit_info = names.CIRCUIT_INFO.prometheus
    for selector in re.findall(r"(retrymw_[a-z_]+)\{([^}]*)\}", query.expr):
        metric, matchers = selector
        labels = SPECS[harness.contract_name(metric)].labels
        assert 'job=~"$job"' in matchers, query.where
        assert 'instance=~"$instance"' in matchers, query.where
        for label, variable in ((names.LABEL_POLICY, "policy"), (names.LABEL_TARGET, "target")):
            assert (f'{label}=~"${variable}"' in matchers) == (label in labels), query.where
        if names.LABEL_CIRCUIT in labels and metric != circuit_info:
            assert f"and on (job, instance, retrymw_circuit) {circuit_info}{{" in query.expr, (
                query.where
            )


def _every_expression() -> Iterator[tuple[str, str]]:
    for query in QUERIES:
        yield query.where, query.expr
    for variable in QUERY_VARIABLES:
        selector, _ = harness.parse_label_values(harness.variable_query(variable))
        yield f"variable {variable['name']}", selector or ""
    for name, expr in RULE_EXPRS.items():
        yield f"rule {name}", expr


def test_every_metric_exists_in_names():
    """Every retrymw_* series in the dashboard and the rules is a metric of _names.py."""
    contract = set(SPECS)
    for where, expr in _every_expression():
        for series in harness.metric_names(expr):
            assert harness.contract_name(series) in contract, f"{where}: {series}"


def test_every_label_exists_in_names():
    """Every label in matchers and by() clauses is a _names.py label, job, instance or le."""
    allowed = CONTRACT_LABELS | {"job", "instance", "le"}
    for where, expr in _every_expression():
        assert harness.label_names(expr) <= allowed, where


def test_every_enum_label_value_exists_in_names():
    """Literal outcome, reason and state values are ones retrymw emits (no "half-open" typos)."""
    for where, expr in _every_expression():
        for label, op, value in harness.label_matchers(expr):
            if label in ENUMS and "$" not in value:
                alternatives = set(value.split("|")) if op in ("=~", "!~") else {value}
                assert alternatives <= ENUMS[label], f"{where}: {label}{op}{value!r}"


def test_every_metric_of_the_contract_is_on_the_dashboard():
    """The dashboard plots each of the ten metrics and each live saturation gauge."""
    used = {harness.contract_name(s) for q in QUERIES for s in harness.metric_names(q.expr)}
    assert used == set(SPECS)


# -- rules lint ----------------------------------------------------------------------------------

ALERTS = [rule for group in RULES["groups"] for rule in group["rules"] if "alert" in rule]
RECORDS = [rule for group in RULES["groups"] for rule in group["rules"] if "record" in rule]


def test_the_alerts_of_the_issue_exist():
    """High retry ratio, failing calls, budget exhausted, circuit open, flapping and SLO burn."""
    assert {rule["alert"] for rule in ALERTS} == {
        "RetrymwHighRetryRatio",
        "RetrymwCallsFailingAfterRetries",
        "RetrymwRetryBudgetExhausted",
        "RetrymwCircuitOpen",
        "RetrymwCircuitFlapping",
        "RetrymwErrorBudgetBurnFast",
        "RetrymwErrorBudgetBurnSlow",
    }
    assert "retrymw:amplification:rate5m" in {rule["record"] for rule in RECORDS}


@pytest.mark.parametrize("alert", [pytest.param(a, id=a["alert"]) for a in ALERTS])
def test_every_alert_is_actionable(alert: dict[str, Any]):
    """Each alert has a for:, a severity, and summary, description and runbook text."""
    assert re.fullmatch(r"\d+[smh]", alert["for"])
    assert alert["labels"]["severity"] in {"critical", "warning", "info"}
    assert {"summary", "description", "runbook"} <= set(alert["annotations"])


def test_recording_rules_follow_the_naming_convention():
    """Recorded series are named ``retrymw:<what>:<operation>`` (Prometheus rules.md)."""
    for rule in RECORDS:
        assert re.fullmatch(r"retrymw:[a-z_]+:[a-z0-9_]+", rule["record"])


def test_every_alert_has_a_firing_and_a_silent_promtool_case():
    """The promtool test file makes every alert fire once and stay silent at least once."""
    tests = yaml.safe_load(harness.RULE_TESTS.read_text(encoding="utf-8"))["tests"]
    cases = [case for test in tests for case in test.get("alert_rule_test", [])]
    for alert in ALERTS:
        mine = [case for case in cases if case["alertname"] == alert["alert"]]
        assert any(case["exp_alerts"] for case in mine), alert["alert"]
        assert any(not case["exp_alerts"] for case in mine), alert["alert"]


# -- compose stack, statically ---------------------------------------------------------------------

COMPOSE_FILE = harness.DOCKER / "docker-compose.yml"
COMPOSE = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
SERVICES: dict[str, Any] = COMPOSE["services"]
PROMETHEUS_CONFIG = yaml.safe_load((harness.DOCKER / "prometheus.yml").read_text(encoding="utf-8"))


def _mounts(service: str) -> dict[str, Path]:
    """Container path → host path of a service's bind mounts (relative to docker/)."""
    mounts = {}
    for volume in SERVICES[service].get("volumes", []):
        host, container, *_ = volume.split(":")
        mounts[container] = (harness.DOCKER / host).resolve()
    return mounts


def test_compose_has_the_seven_services():
    """demo, the fleet and its valkey, prometheus, grafana, otel-collector and jaeger, pinned."""
    assert set(SERVICES) == {
        "demo", "fleet", "valkey", "prometheus", "grafana", "otel-collector", "jaeger",
    }  # fmt: skip
    for name, service in SERVICES.items():
        if "image" in service:
            image, _, tag = service["image"].rpartition(":")
            assert image, name
            assert tag not in ("", "latest"), name
        for dependency in service.get("depends_on", []):
            assert dependency in SERVICES, name


def test_every_published_port_is_loopback_only():
    """Every published port is bound to 127.0.0.1."""
    ports = [(n, p) for n, s in SERVICES.items() for p in s.get("ports", [])]
    assert ports
    for name, port in ports:
        assert isinstance(port, str), name
        assert port.startswith("127.0.0.1:"), name


def test_every_file_the_stack_references_exists():
    """Build context, Dockerfile, its COPY sources and every bind-mounted host path exist."""
    assert SERVICES["fleet"]["build"] == SERVICES["demo"]["build"]
    build = SERVICES["demo"]["build"]
    context = (harness.DOCKER / build["context"]).resolve()
    dockerfile = context / build["dockerfile"]
    assert context == harness.ROOT
    assert dockerfile.is_file()
    text = dockerfile.read_text(encoding="utf-8")
    sources = [
        src
        for line in re.findall(r"^COPY\s+(.+)$", text, re.MULTILINE)
        for src in line.split()[:-1]
    ]
    assert sources
    ignore = (dockerfile.parent / f"{dockerfile.name}.dockerignore").read_text(encoding="utf-8")
    for source in sources:
        assert (context / source).exists(), source
        assert f"!{source.rstrip('/')}" in ignore.replace("/\n", "\n"), source
    for service in SERVICES:
        for container, host in _mounts(service).items():
            assert host.exists(), f"{service}: {host} for {container}"


def test_the_containers_find_their_configuration():
    """Paths named in commands and configs are the ones mounted into each container."""
    prometheus = _mounts("prometheus")
    flags = dict(arg.split("=", 1) for arg in SERVICES["prometheus"]["command"] if "=" in arg)
    assert prometheus[flags["--config.file"]] == (harness.DOCKER / "prometheus.yml").resolve()
    for rule_file in PROMETHEUS_CONFIG["rule_files"]:
        assert prometheus[rule_file] == harness.RULES
    grafana = _mounts("grafana")
    home = SERVICES["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert grafana[home] == harness.DASHBOARD
    providers = yaml.safe_load(
        (harness.DOCKER / "grafana/provisioning/dashboards/dashboards.yml").read_text("utf-8")
    )["providers"]
    assert Path(home).parent == Path(providers[0]["options"]["path"])
    (collector_config,) = [arg.split("=", 1)[1] for arg in SERVICES["otel-collector"]["command"]]
    assert (
        _mounts("otel-collector")[collector_config]
        == (harness.DOCKER / "otel-collector.yml").resolve()
    )


def test_prometheus_scrapes_the_demo_where_it_listens():
    """The scrape target is the demo service on the port its command and compose publish."""
    command = SERVICES["demo"]["command"]
    port = command[command.index("--metrics-port") + 1]
    assert command[command.index("--metrics-host") + 1] == "0.0.0.0"
    assert "--forever" in command
    targets = [
        t
        for job in PROMETHEUS_CONFIG["scrape_configs"]
        for s in job.get("static_configs", [])
        for t in s["targets"]
    ]
    assert f"demo:{port}" in targets
    assert f"127.0.0.1:{port}:{port}" in SERVICES["demo"]["ports"]


def test_the_demo_command_is_one_the_cli_accepts():
    """The compose command and the Dockerfile's CMD parse with `retrymw`'s own argument parser."""
    from retrymw.cli import build_parser

    dockerfile = (harness.DOCKER / "Dockerfile").read_text(encoding="utf-8")
    (cmd,) = re.findall(r"^CMD (\[.*\])$", dockerfile, re.MULTILINE)
    for command in (SERVICES["demo"]["command"], yaml.safe_load(cmd)):
        assert command[0] == "retrymw"
        args = build_parser().parse_args(command[1:])
        assert args.command == "demo"
        assert args.forever is True
        assert (args.metrics_host, args.metrics_port) == ("0.0.0.0", 9464)


def _demo_args(service: str) -> Any:
    from retrymw.cli import build_parser

    command = SERVICES[service]["command"]
    assert command[0] == "retrymw"
    return build_parser().parse_args(command[1:])


def test_the_fleet_replicas_share_the_valkey_service():
    """Several replicas of the demo, each joining the valkey service's Redis with --redis."""
    fleet = SERVICES["fleet"]
    assert fleet["deploy"]["replicas"] >= 2
    assert "ports" not in fleet  # replicas cannot share a host port; Prometheus finds them by DNS
    args = _demo_args("fleet")
    assert args.command == "demo"
    assert args.forever is True
    assert args.fleet is None  # each replica is one member; the fleet is the replicas
    # Budgets are shared per host:port: every replica's upstream listens on the same port.
    assert args.upstream_port != 0
    host = re.fullmatch(r"redis://([\w-]+):(\d+)/0", args.redis)
    assert host is not None, args.redis
    assert host[1] == "valkey"
    assert host[1] in fleet["depends_on"]
    # Valkey listens on its default port, in memory only.
    valkey = SERVICES["valkey"]
    assert host[2] == "6379"
    assert valkey["image"].startswith("valkey/valkey:")
    command = valkey["command"]
    assert command[0] == "valkey-server"
    assert command[command.index("--save") + 1] == ""
    assert command[command.index("--appendonly") + 1] == "no"
    # The same outage script as the single demo, so both tell the same story.
    assert args.outage == _demo_args("demo").outage
    endpoint = SERVICES["demo"]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert SERVICES["fleet"]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == endpoint


def test_prometheus_scrapes_every_fleet_replica():
    """A DNS service-discovery job resolves the fleet service's replicas on their metrics port."""
    args = _demo_args("fleet")
    assert args.metrics_host == "0.0.0.0"
    (job,) = [
        job
        for job in PROMETHEUS_CONFIG["scrape_configs"]
        for sd in job.get("dns_sd_configs", [])
        if "fleet" in sd["names"]
    ]
    (sd,) = job["dns_sd_configs"]
    assert sd["type"] == "A"
    assert sd["port"] == args.metrics_port
    assert "fleet" in SERVICES["prometheus"]["depends_on"]
    names = [job["job_name"] for job in PROMETHEUS_CONFIG["scrape_configs"]]
    assert len(names) == len(set(names))


def test_grafana_datasources_point_at_the_services():
    """Prometheus and Jaeger datasources use service names; exemplars link to Jaeger."""
    sources = yaml.safe_load(
        (harness.DOCKER / "grafana/provisioning/datasources/datasources.yml").read_text("utf-8")
    )["datasources"]
    by_type = {source["type"]: source for source in sources}
    assert by_type["prometheus"]["isDefault"] is True
    for source in sources:
        host = re.match(r"http://([\w-]+):\d+$", source["url"])
        assert host is not None, source["name"]
        assert host[1] in SERVICES, source["name"]
    (link,) = by_type["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert link["name"] == "trace_id"
    assert link["datasourceUid"] == by_type["jaeger"]["uid"]


def test_collector_pipeline_sends_traces_to_jaeger():
    """The collector takes OTLP and exports traces to the jaeger service; pipelines are wired."""
    config = yaml.safe_load((harness.DOCKER / "otel-collector.yml").read_text(encoding="utf-8"))
    for pipeline in config["service"]["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in config[kind], component
    traces = config["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    (exporter,) = traces["exporters"]
    assert config["exporters"][exporter]["endpoint"] == "jaeger:4317"
    endpoint = SERVICES["demo"]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert endpoint == "http://otel-collector:4317"


# -- promtool ------------------------------------------------------------------------------------


def _promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [require_binary("promtool"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.mark.prometheus_server
def test_promtool_check_rules():
    """The rules file passes ``promtool check rules``."""
    assert (
        f"SUCCESS: {len(RULE_EXPRS)} rules found"
        in _promtool("check", "rules", harness.RULES).stdout
    )


@pytest.mark.prometheus_server
def test_promtool_test_rules():
    """The alert and recording rule unit tests pass ``promtool test rules``."""
    assert "SUCCESS" in _promtool("test", "rules", harness.RULE_TESTS).stdout


@pytest.mark.prometheus_server
def test_promtool_check_config(tmp_path: Path):
    """docker/prometheus.yml passes ``promtool check config`` (rules path pointed at the repo)."""
    config = dict(PROMETHEUS_CONFIG, rule_files=[str(harness.RULES)])
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert "SUCCESS" in _promtool("check", "config", path).stdout


@pytest.mark.prometheus_server
def test_every_dashboard_expression_parses(tmp_path: Path):
    """Each panel expression, variables substituted, is valid PromQL (checked as a rule)."""
    rules = [
        {"record": f"dashboard:query_{index}:check", "expr": grafana(query.expr)}
        for index, query in enumerate(QUERIES)
    ]
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), "utf-8")
    _promtool("check", "rules", path)


# -- a real Prometheus ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.LiveStack]:
    """A real Prometheus that scraped this process while it played the whole storyline."""
    binary = require_binary("prometheus")
    with harness.live_stack(binary, tmp_path_factory.mktemp("prometheus")) as stack:
        yield stack


def _has_data(result: list[dict[str, Any]]) -> bool:
    return bool(result) and any(math.isfinite(float(r["value"][1])) for r in result)


ONE = {"policy": "checkout", "target": "payments.internal"}


@pytest.mark.prometheus_server
@pytest.mark.parametrize("values", [pytest.param({}, id="all"), pytest.param(ONE, id="one")])
@query_params
def test_every_panel_query_returns_data(live, query: harness.Query, values: dict[str, str]):
    """Every panel and annotation expression returns finite samples, for All and for one target."""
    values = {**values, "job": harness.JOB, "instance": live.endpoint.address} if values else {}
    expr = grafana(query.expr, values)
    assert _has_data(live.prometheus.query(expr)), f"{query.where}: {expr}"


@pytest.mark.prometheus_server
@pytest.mark.parametrize("variable", [pytest.param(v, id=v["name"]) for v in QUERY_VARIABLES])
def test_every_variable_query_returns_values(live, variable: dict[str, Any]):
    """Every label_values() variable lists values, as Grafana would fetch them."""
    selector, label = harness.parse_label_values(harness.variable_query(variable))
    params: dict[str, Any] = {"start": live.start - 60, "end": live.end + 60}
    if selector is not None:
        params["match[]"] = grafana(selector)
    values = live.prometheus.api(f"label/{label}/values", **params)
    assert values, variable["name"]
    expected = {
        "job": harness.JOB,
        "instance": live.endpoint.address,
        names.LABEL_POLICY: "checkout",
        names.LABEL_TARGET: "payments.internal",
    }
    assert expected[label] in values


@pytest.mark.prometheus_server
@rule_params
def test_every_rule_expression_returns_data(live, name: str, expr: str):
    """Recording rule expressions return data; alert expressions at least evaluate."""
    result = live.prometheus.query(expr)
    if name.startswith("retrymw:"):
        assert _has_data(result), name
        assert _has_data(live.prometheus.query(name)), f"recorded series {name}"


@pytest.mark.prometheus_server
def test_every_rule_is_healthy(live):
    """Prometheus loaded every rule and evaluates each without error."""
    groups = live.prometheus.api("rules")["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert {rule["name"] for rule in rules} == set(RULE_EXPRS)
    for rule in rules:
        assert rule["health"] == "ok", (rule["name"], rule.get("lastError"))


@pytest.mark.prometheus_server
def test_prometheus_holds_exactly_what_retrymw_counted(live):
    """After the last scrape, Prometheus's counts equal the registry's, series for series: the
    calls and attempts (the duration histograms' ``_count``), denials and transitions."""
    for metric in (
        names.count_of(names.CALL_DURATION),
        names.count_of(names.ATTEMPT_DURATION),
        names.RETRIES_DENIED.prometheus,
        names.CIRCUIT_TRANSITIONS.prometheus,
    ):
        scraped = live.prometheus.value(f"sum({metric})")
        assert scraped == live.endpoint.sample_sum(metric), metric
    for retired, _ in names.RETIRED:  # counted by the histograms above: no longer exported
        assert live.prometheus.query(retired.prometheus) == []


@pytest.mark.prometheus_server
def test_every_scenario_reached_prometheus(live):
    """Success, retries, exhaustion, both budgets, the deadline and the breaker all show up."""
    prometheus = live.prometheus

    def positive(expr: str) -> set[str]:
        return {"/".join(r["metric"].values()) for r in prometheus.query(f"({expr}) > 0")}

    calls, attempts = harness.CALLS, names.count_of(names.ATTEMPT_DURATION)
    outcomes = positive(f"sum by ({names.LABEL_OUTCOME}) (increase({calls}[5m]))")
    assert {
        "success",
        "failure",
        "exhausted",
        "budget_exhausted",
        "throttled",
        "circuit_open",
        "deadline_exceeded",
    } <= outcomes
    reasons = positive(
        f"sum by ({names.LABEL_REASON}) (increase(retrymw_retries_denied_total[5m]))"
    )
    assert {
        "max_attempts",
        "budget_exhausted",
        "throttled",
        "deadline_exceeded",
        "circuit_open",
    } <= reasons
    attempt_outcomes = positive(
        f"sum by ({names.LABEL_ATTEMPT_OUTCOME}) (increase({attempts}[5m]))"
    )
    assert attempt_outcomes == {"success", "retried", "failed"}
    # What failed stays visible per attempt: the error type is on the attempt histogram.
    errors = positive(
        f"sum by ({names.LABEL_ERROR_TYPE}) (increase({attempts}{{{names.LABEL_ATTEMPT_OUTCOME}"
        '!="success"}[5m]))'
    )
    assert {"ServiceUnavailable", "TimeoutError", "BadRequest"} <= errors
    # half_open lasts one probe, too short for a scrape to see: count the transitions instead
    # (raw counters: increase() cannot see a series' first increment, its creation).
    states = positive(
        f"max by ({names.LABEL_CIRCUIT_STATE}) (max_over_time(retrymw_circuit_state[5m]))"
    )
    assert states == {"closed", "open"}
    entered = positive(f"sum by ({names.LABEL_CIRCUIT_STATE}) (retrymw_circuit_transitions_total)")
    assert entered == {"closed", "open", "half_open"}
    # Spent below a fresh budget's 10 tokens; not drained to 0: past its blip a budget keeps
    # what recent traffic funded for the recovery (denials read "throttled", above).
    assert prometheus.value("min(min_over_time(retrymw_retry_budget_available[5m]))") < 10
    # Admitted calls only: the throttle's shed calls and the breaker's refusals made no attempt.
    amplification = prometheus.value(
        f"sum(increase({attempts}[5m])) / sum(increase({calls}"
        '{retrymw_outcome!~"circuit_open|shed|paced"}[5m]))'
    )
    assert 1.0 < amplification < 1.5


@pytest.mark.prometheus_server
def test_the_inbound_retry_share_is_what_the_callers_sent(live):
    """Prometheus holds every inbound request by kind; the panel's share over the run is the
    share of retries the callers really sent, within 2%."""
    inbound = live.workload.inbound
    metric = names.INBOUND_REQUESTS.prometheus
    for (service, kind), count in inbound.counts.items():
        selector = (
            f'{metric}{{{names.LABEL_SERVICE}="{service}", {names.LABEL_INBOUND_ATTEMPT}="{kind}"}}'
        )
        assert live.prometheus.value(f"sum({selector})") == count, (service, kind)
    (panel,) = [p for p in harness.panels(DASHBOARD) if p["title"].startswith("Inbound retry")]
    # Read once Prometheus held the whole run, over a window from just before its start: not
    # "now". The fixture is shared, and on a loaded machine the tests before this one take long
    # enough that a window ending now loses the run's calm beginning, and rate()'s
    # extrapolation drifts as the flat tail after the run grows (both read a larger share).
    window = f"{math.ceil(live.complete - live.start) + 5}s"
    values = {"job": harness.JOB, "instance": live.endpoint.address, "__rate_interval": window}
    (result,) = live.prometheus.query(
        grafana(panel["targets"][0]["expr"], values), at=live.complete
    )
    assert result["metric"] == {names.LABEL_SERVICE: "checkout"}
    own = inbound.retry_share("checkout")
    assert 0.05 < own < 0.5  # the storyline's outage makes the callers retry
    assert float(result["value"][1]) == pytest.approx(own, rel=0.02)


@pytest.mark.prometheus_server
def test_latency_histograms_carry_trace_exemplars(live):
    """Sampled spans around the calls give the latency panels trace-id exemplars to link."""
    for spec in (names.CALL_DURATION, names.ATTEMPT_DURATION):
        data = live.prometheus.api(
            "query_exemplars",
            query=f"{spec.prometheus}_bucket",
            start=live.start - 60,
            end=live.end + 60,
        )
        exemplars = [e for series in data for e in series["exemplars"]]
        assert exemplars, spec.prometheus
        assert all(re.fullmatch(r"[0-9a-f]{32}", e["labels"]["trace_id"]) for e in exemplars)


def test_preview_is_a_png_of_the_current_layout():
    """dashboards/preview.png is a PNG drawn for today's grid: a panel added below or a row
    grown since it was rendered changes its height (regenerate it with
    python -m dashboards.render_preview)."""
    from dashboards import render_preview

    data = (harness.ROOT / "dashboards" / "preview.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 1200
    assert height >= 600
    assert (width, height) == render_preview.size(DASHBOARD)


# The incident shapes (alerts, panels, truths, both metric paths): tests/adversarial/test_alerts.py
