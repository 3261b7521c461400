"""Pages come while the incident lasts, through both metric paths: six incident shapes against a
real Prometheus.

Issue 31: in a 3-minute total outage nothing fired while it lasted; the critical
``RetrymwCallsFailingAfterRetries`` fired 138 s after recovery (5% over 5 min held 5 min pages
any outage from 30 s to 5 min about 5¼ min in), ``RetrymwCircuitOpen`` 94 s after, and alerts
resolved 2.5-8 min after recovery. The six shapes of the issue (a healthy baseline, brief
outages, a 3-minute total outage, a 10% brownout, one dead host of five, a 429 overload) are
played at once for 18 virtual minutes, through `PrometheusInstrument` and through
`OpenTelemetryInstrument` exported by OpenTelemetry's own Prometheus exporter, each scraped
every 15 virtual seconds; a real Prometheus loads what it would have stored and the rules are
evaluated on it every 15 s as its rule manager would (`prometheus_harness.incident_stack`). No
step waits for the wall clock, so a loaded machine changes nothing.

For each path and shape: exactly the expected alerts fire, each starts while its incident lasts
(never after it ended), the pages and the open circuit resolve within 1.5 minutes of the end,
the admitted calls and the refused share are the truth counted outside retrymw, a healthy
circuit reads closed from its first scrape and the first trip is counted by ``increase()``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from retrymw.instrumentation import _names as names
from tests import prometheus_harness as harness
from tests.system import require_binary

pytestmark = pytest.mark.prometheus_server

CALLS_FAILING = "RetrymwCallsFailingAfterRetries"
BURN_FAST = "RetrymwErrorBudgetBurnFast"
CIRCUIT_OPEN = "RetrymwCircuitOpen"
FLAPPING = "RetrymwCircuitFlapping"

INCIDENTS = {incident.name: incident for incident in harness.INCIDENTS}


def _pages(incident: harness.Incident, *, flapping: bool = False) -> set[tuple[str, str]]:
    """The two pages for the troubled target and the open circuit (and flapping) for its
    circuit."""
    fired = {
        (CALLS_FAILING, incident.target),
        (BURN_FAST, incident.target),
        (CIRCUIT_OPEN, incident.circuit),
    }
    return fired | ({(FLAPPING, incident.circuit)} if flapping else set())


#: What each shape fires, by (alert, target or circuit); every other alert stays silent.
EXPECTED: dict[str, set[tuple[str, str]]] = {
    # 1% of attempts fail: retries absorb it.
    "baseline": set(),
    # Down 5 s three times: over before any page could fire, so none ever does (the old
    # fast-burn rule paged 2.7 minutes after the last one).
    "brief": set(),
    # Pages about 1.5 minutes in, and the circuit is open.
    "outage": _pages(INCIDENTS["outage"]),
    # 10% of attempts fail: retries hide it (0.1% of calls fail, 0.11 retries per call).
    "brownout": set(),
    # Only the dead host pages; its four healthy neighbours stay silent.
    "deadhost": _pages(INCIDENTS["deadhost"]),
    # 60% of attempts refused with 429: calls fail after retries, and the breaker's rate rule
    # (60%) sits on its threshold, so it trips again and again.
    "overload": _pages(INCIDENTS["overload"], flapping=True),
}
#: An alert may start this long after its incident ended (seconds): the targets are scraped and
#: the rules evaluated every 15 s, each a step late at most.
SLACK = 30.0
#: The pages and the open-circuit alert end within this long of the incident's end.
RESOLVED_WITHIN = 90.0

PATHS = pytest.mark.parametrize(
    "job",
    [pytest.param(harness.JOB, id="prometheus"), pytest.param(harness.OTEL_JOB, id="otel")],
)
SHAPES = pytest.mark.parametrize(
    "incident", [pytest.param(i, id=i.name) for i in harness.INCIDENTS]
)


@pytest.fixture(scope="module")
def incidents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.IncidentStack]:
    """A real Prometheus holding the six incidents through both paths (about 6 s)."""
    binary = require_binary("prometheus")
    with harness.incident_stack(binary, tmp_path_factory.mktemp("incidents")) as stack:
        yield stack


def _mine(
    spans: dict[tuple[str, str], list[tuple[float, float]]], incident: harness.Incident
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    owners = set().union(*(incident.owners(host) for host in range(incident.hosts)))
    return {key: runs for key, runs in spans.items() if key[1] in owners}


@PATHS
@SHAPES
def test_each_shape_fires_exactly_its_alerts(
    incidents: harness.IncidentStack, job: str, incident: harness.Incident
) -> None:
    """Per shape and path: the alerts that must fire do, every other one stays silent."""
    fired = set(_mine(incidents.alert_spans(job), incident))
    assert fired == EXPECTED[incident.name], incident.description


@PATHS
@SHAPES
def test_no_alert_starts_after_its_incident_ended(
    incidents: harness.IncidentStack, job: str, incident: harness.Incident
) -> None:
    """Every alert starts firing while its incident lasts; the pages and the open circuit end
    within 1.5 minutes of its end."""
    for (alert, owner), runs in _mine(incidents.alert_spans(job), incident).items():
        for began, ended in runs:
            window = next((w for w in incident.windows if w[0] <= began <= w[1] + SLACK), None)
            assert window is not None, (alert, owner, began, incident.windows)
            last = window[1] < harness.INCIDENT_SECONDS
            if alert in (CALLS_FAILING, BURN_FAST, CIRCUIT_OPEN) and last:
                assert ended <= window[1] + RESOLVED_WITHIN, (alert, owner, ended, window)


def _value(incidents: harness.IncidentStack, expr: str) -> float:
    """``expr`` at the end of the run (the run is history to Prometheus)."""
    return incidents.prometheus.value(expr, incidents.end)


def _run() -> str:
    return f"{round(harness.INCIDENT_SECONDS) + 30}s"


def _calls(job: str, target: str, outcome: str = "") -> str:
    matcher = f", {names.LABEL_OUTCOME}{outcome}" if outcome else ""
    return (
        f"sum({names.count_of(names.CALL_DURATION)}"
        f'{{job="{job}", {names.LABEL_TARGET}="{target}"{matcher}}}) or vector(0)'
    )


@PATHS
@SHAPES
def test_admitted_and_refused_calls_are_the_truth(
    incidents: harness.IncidentStack, job: str, incident: harness.Incident
) -> None:
    """Per target, Prometheus's admitted calls (outcomes other than circuit_open and shed) are
    the calls that made an attempt, counted by the attempt functions, and its attempts theirs:
    amplification is finite and true even in a total outage (issue 31: +Inf, admitted 0)."""
    tally = incidents.paths[job].workload.tally
    for target in incident.targets:
        admitted = _value(incidents, _calls(job, target, '!~"circuit_open|shed|paced"'))
        refused = _value(incidents, _calls(job, target, '=~"circuit_open|shed|paced"'))
        attempts = _value(
            incidents,
            f"sum({names.count_of(names.ATTEMPT_DURATION)}"
            f'{{job="{job}", {names.LABEL_TARGET}="{target}"}})',
        )
        assert (admitted, refused) == (tally.admitted(target), tally.refused(target)), target
        assert attempts == tally.attempts[target], target
        assert math.isfinite(attempts / admitted)


def _stat(incidents: harness.IncidentStack, title: str, values: dict[str, str]) -> float:
    """The stat panel ``title`` over the whole run, for the given variables."""
    (panel,) = [p for p in harness.panels(harness.load_dashboard()) if p["title"] == title]
    expr = panel["targets"][0]["expr"].replace("[5m]", f"[{values['__range']}]")
    return _value(incidents, harness.substitute(expr, values))


def _run_values(incidents: harness.IncidentStack, job: str, policy: str) -> dict[str, str]:
    instance = incidents.paths[job].instance
    return {"job": job, "instance": instance, "policy": policy, "target": ".+", "__range": _run()}


@PATHS
@pytest.mark.parametrize("shape", ["outage", "deadhost", "overload"])
def test_the_dashboards_refused_share_is_the_truth(
    incidents: harness.IncidentStack, job: str, shape: str
) -> None:
    """The "Refused calls" stat over the run is the share of calls that made no attempt, within
    2% (issue 31, one dead host of five: 20.0% read, 17.1% true); amplification of admitted
    calls is the truth too."""
    incident = INCIDENTS[shape]
    tally = incidents.paths[job].workload.tally
    values = _run_values(incidents, job, incident.name)
    calls = sum(tally.calls[t] for t in incident.targets)
    refused = sum(tally.refused(t) for t in incident.targets)
    assert 0 < refused < calls
    share = _stat(incidents, "Refused calls (5m)", values)
    # prometheus_client's refusal series exist at 0 from the breaker's and throttle's creation;
    # the OpenTelemetry API cannot export an empty histogram, so that path's first refusals,
    # before the series' first scrape, are seen only through rate()'s extrapolation.
    assert share == pytest.approx(refused / calls, rel=0.02 if job == harness.JOB else 0.05)
    attempts = sum(tally.attempts[t] for t in incident.targets)
    admitted = sum(tally.admitted(t) for t in incident.targets)
    amplification = _stat(incidents, "Amplification, admitted calls (5m)", values)
    assert amplification == pytest.approx(attempts / admitted, rel=0.02)


def _transition(job: str, circuit: str, previous: str, state: str) -> str:
    matchers = (
        f'job="{job}", {names.LABEL_CIRCUIT}="{circuit}", '
        f'{names.LABEL_CIRCUIT_PREVIOUS_STATE}="{previous}", {names.LABEL_CIRCUIT_STATE}="{state}"'
    )
    return f"{names.CIRCUIT_TRANSITIONS.prometheus}{{{matchers}}}"


@PATHS
@SHAPES
def test_the_first_trip_is_counted(
    incidents: harness.IncidentStack, job: str, incident: harness.Incident
) -> None:
    """Trip counters exist at 0 before the first trip on both paths, so increase() counts every
    trip (issue 31: the OpenTelemetry path's was born at 1)."""
    run = f"[{_run()}]"
    selector = _transition(job, incident.circuit, "closed", "open")
    trips = incidents.paths[job].workload.tally.trips.get(incident.circuit, 0)
    assert _value(incidents, f"min_over_time({selector}{run})") == 0
    assert _value(incidents, f"max_over_time({selector}{run})") == trips
    assert _value(incidents, f"round(increase({selector}{run}))") == trips


@PATHS
def test_a_healthy_circuit_reads_closed_from_its_first_scrape(
    incidents: harness.IncidentStack, job: str
) -> None:
    """The baseline's circuit never trips: on both paths it reads closed = 1 in every scrape,
    its four transitions 0 (issue 31: no series at all on the OpenTelemetry path)."""
    circuit = INCIDENTS["baseline"].circuit
    run = f"[{_run()}]"
    closed = (
        f'{names.CIRCUIT_STATE.prometheus}{{job="{job}", {names.LABEL_CIRCUIT}="{circuit}", '
        f'{names.LABEL_CIRCUIT_STATE}="closed"}}'
    )
    assert _value(incidents, f"min_over_time({closed}{run})") == 1
    # In the first scrape, before the first call, and in every scrape since.
    api = incidents.prometheus.api
    (series,) = api("query", query=f"{closed}{run}", time=incidents.end)["result"]
    (up,) = api("query", query=f'up{{job="{job}"}}{run}', time=incidents.end)["result"]
    assert [t for t, _ in series["values"]] == [t for t, _ in up["values"]]
    assert float(series["values"][0][0]) == incidents.start
    for previous, state in names.CIRCUIT_TRANSITION_PAIRS:
        assert (
            _value(incidents, f"max_over_time({_transition(job, circuit, previous, state)}{run})")
            == 0
        )


def _query_values(incidents: harness.IncidentStack, incident: harness.Incident) -> dict[str, str]:
    """Grafana's variables for one incident on the Prometheus path."""
    return {
        "job": harness.JOB,
        "instance": incidents.paths[harness.JOB].instance,
        "policy": incident.name,
        "target": ".+",
        "__rate_interval": "1m",
        "__range": _run(),
        "__interval": "15s",
    }


def _may_be_empty(query: harness.Query, incidents: harness.IncidentStack, incident: Any) -> bool:
    """Whether no data is the truth for this panel and shape: refusals where nothing was
    refused, trips where the circuit never tripped (those series are created by their first
    event, docs/telemetry.md), and a pacer's where the policy has none (they are created with
    the first pacer)."""
    paced = any(spec.prometheus in query.expr for spec in names.PACER_METRICS)
    if paced and incident.limit is None:
        return True
    tally = incidents.workload.tally
    refused = sum(tally.refused(t) for t in incident.targets)
    trips = sum(tally.trips.get(incident.circuit_of(h), 0) for h in range(incident.hosts))
    if 'retrymw_outcome=~"circuit_open|shed|paced"' in query.expr and refused == 0:
        return True
    return "Circuit opened" in query.where and trips == 0


@SHAPES
def test_every_panel_returns_data_in_each_incident(
    incidents: harness.IncidentStack, incident: harness.Incident
) -> None:
    """Every panel and annotation, filtered to the incident's policy, has data over the run
    (no refusals and no trips are the truth where there were none)."""
    values = _query_values(incidents, incident)
    empty = []
    for query in harness.queries(harness.load_dashboard()):
        expr = harness.substitute(query.expr.replace("[5m]", f"[{values['__range']}]"), values)
        result = incidents.prometheus.query_range(expr, incidents.start, incidents.end, 15)
        has_data = any(math.isfinite(float(v)) for r in result for _, v in r["values"])
        if not has_data and not _may_be_empty(query, incidents, incident):
            empty.append(query.where)
    assert empty == []
