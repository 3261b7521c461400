"""PrometheusInstrument: exact series per scenario, sharing, caps, exemplars, tools, modes."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from retrymw import BreakerStateChanged, CallFinished, CircuitBreaker, PerTarget
from retrymw.instrumentation import PrometheusInstrument
from retrymw.instrumentation import _names as names
from retrymw.testing import FakeClock
from tests.instrumentation import (
    HTTP_TARGET,
    POLICY,
    SCENARIOS,
    TARGET,
    retrier,
    run_http_scenario,
    run_scenario,
    script,
)
from tests.system import require_binary

pytestmark = pytest.mark.anyio

LIVE_GAUGES = {spec.prometheus for spec in names.LIVE_GAUGES}
SPECS = {spec.prometheus: spec for spec in (*names.METRICS, *names.BODY_METRICS)}
P, T = POLICY, TARGET


@pytest.fixture
def registry() -> CollectorRegistry:
    """A fresh registry per test."""
    return CollectorRegistry()


def samples(registry: CollectorRegistry) -> dict[tuple[Any, ...], float]:
    """Every sample but buckets and ``_created``: ``(sample name, *label values in spec order)``."""
    found: dict[tuple[Any, ...], float] = {}
    text = generate_latest(registry).decode()
    for family in text_string_to_metric_families(text):
        if family.name.endswith("_created"):  # the text parser's family for created timestamps
            continue
        if family.name in LIVE_GAUGES:  # the saturation gauges: test_protection_series.py
            continue
        spec = SPECS[family.name + "_total" if family.type == "counter" else family.name]
        for sample in family.samples:
            if sample.name.endswith(("_created", "_bucket")):
                continue
            key = (sample.name, *(sample.labels[label] for label in spec.labels))
            found[key] = sample.value
    return found


def buckets(registry: CollectorRegistry, metric: str, *labels: str) -> dict[float, float]:
    """The cumulative bucket counts of one histogram series, by upper bound."""
    spec = SPECS[metric]
    text = generate_latest(registry).decode()
    return {
        float(sample.labels["le"]): sample.value
        for family in text_string_to_metric_families(text)
        if family.name == metric
        for sample in family.samples
        if sample.name == metric + "_bucket"
        and tuple(sample.labels[label] for label in spec.labels) == labels
    }


def zeros(policy: str = P, target: str = T) -> dict[tuple[Any, ...], float]:
    """The series a new (policy, target) has from its first record: the successes of calls and
    attempts, and the denial its retry budget gives (every scenario has one)."""
    return {
        ("retrymw_call_duration_seconds_count", policy, target, "success"): 0.0,
        ("retrymw_call_duration_seconds_sum", policy, target, "success"): 0.0,
        ("retrymw_attempt_duration_seconds_count", policy, target, "success", ""): 0.0,
        ("retrymw_attempt_duration_seconds_sum", policy, target, "success", ""): 0.0,
        ("retrymw_retries_denied_total", policy, target, "throttled"): 0.0,
    }


Series = dict[tuple[Any, ...], float]


def expected(scenario: str, t: str, error: str, tokens: float) -> Series:
    """The non-pre-created series of one scenario, for target ``t`` failing with ``error``.

    ``tokens`` is what the retry budget holds at the end (its algorithm is tested elsewhere).
    """

    def call(outcome: str, seconds: float, *attempts: int) -> Series:
        """``len(attempts)`` calls; the attempts histogram observes those that made other than
        one attempt (its series exists from the first of them)."""
        other = [count for count in attempts if count != 1]
        series: Series = {
            ("retrymw_call_duration_seconds_count", P, t, outcome): len(attempts),
            ("retrymw_call_duration_seconds_sum", P, t, outcome): seconds,
        }
        if other:
            series["retrymw_call_attempts_count", P, t, outcome] = len(other)
            series["retrymw_call_attempts_sum", P, t, outcome] = sum(other)
        return series

    def attempts(outcome: str, count: int) -> Series:
        error_type = "" if outcome == "success" else error
        return {
            ("retrymw_attempt_duration_seconds_count", P, t, outcome, error_type): count,
            ("retrymw_attempt_duration_seconds_sum", P, t, outcome, error_type): count * 0.25,
        }

    def backoff(*delays: float) -> Series:
        return {
            ("retrymw_backoff_duration_seconds_count", P, t): len(delays),
            ("retrymw_backoff_duration_seconds_sum", P, t): sum(delays),
        }

    def denied(reason: str) -> Series:
        return {("retrymw_retries_denied_total", P, t, reason): 1}

    def budget(tokens: float) -> Series:
        return {("retrymw_retry_budget_available", P, t): tokens}

    # A Retrier uses the breaker as given (its own name); a transport keeps one circuit per
    # host, named "<name>:<host>" (DESIGN §15).
    circuit = "db:api.test" if t == HTTP_TARGET else "db"
    return {
        "success_first_try": {
            **call("success", 0.25, 1),
            **attempts("success", 1),
            **budget(tokens),
        },
        "success_after_2_retries": {
            **call("success", 3.75, 3),
            **attempts("retried", 2),
            **attempts("success", 1),
            **backoff(1.0, 2.0),
            **budget(tokens),
        },
        "exhausted": {
            **call("exhausted", 3.75, 3),
            **attempts("retried", 2),
            **attempts("failed", 1),
            **backoff(1.0, 2.0),
            **denied("max_attempts"),
            **budget(tokens),
        },
        "budget_exhausted": {
            **call("budget_exhausted", 1.5, 2),
            **attempts("retried", 1),
            **attempts("failed", 1),
            **backoff(1.0),
            **denied("budget_exhausted"),
            **budget(tokens),
        },
        "throttled": {
            **call("throttled", 0.25, 1),
            **attempts("failed", 1),
            **denied("throttled"),
            **budget(tokens),
        },
        "circuit_open": {
            # One call opened the circuit (its retry denied: a failure, what its attempt got),
            # the next was refused before any attempt: 0 attempts, outcome circuit_open.
            **call("failure", 0.25, 1),
            **call("circuit_open", 0.0, 0),
            **attempts("failed", 1),
            **denied("circuit_open"),
            **budget(tokens),
            ("retrymw_circuit_transitions_total", circuit, "closed", "open"): 1,
            # The other transitions exist from the circuit's first (or its announcement).
            ("retrymw_circuit_transitions_total", circuit, "open", "half_open"): 0,
            ("retrymw_circuit_transitions_total", circuit, "half_open", "closed"): 0,
            ("retrymw_circuit_transitions_total", circuit, "half_open", "open"): 0,
            ("retrymw_circuit_state", circuit, "closed"): 0,
            ("retrymw_circuit_state", circuit, "open"): 1,
            ("retrymw_circuit_state", circuit, "half_open"): 0,
        },
        "not_idempotent": {
            **call("failure", 0.25, 1),
            **attempts("failed", 1),
            **denied("not_idempotent"),
            **budget(tokens),
        },
        "retry_after_too_long": {
            **call("failure", 0.25, 1),
            **attempts("failed", 1),
            **denied("retry_after_exceeds_limit"),
            **budget(tokens),
        },
    }[scenario]


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_scenario_exports_exactly_these_series(
    scenario: str, registry: CollectorRegistry, clock: FakeClock
) -> None:
    """Each scripted scenario leaves exactly the expected series, zeros included."""
    budget = await run_scenario(scenario, clock, [PrometheusInstrument(registry)])
    assert budget is not None
    series = expected(scenario, T, "ConnectionError", budget.available())
    assert samples(registry) == pytest.approx({**zeros(), **series})


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_http_scenario_exports_exactly_these_series(
    scenario: str, registry: CollectorRegistry, clock: FakeClock
) -> None:
    """Through the httpx transport, the same scenarios give the same series, keyed by host."""
    upstream = await run_http_scenario(scenario, clock, [PrometheusInstrument(registry)])
    assert upstream.budget is not None
    tokens = upstream.budget.available()
    series = {**zeros(P, HTTP_TARGET), **expected(scenario, HTTP_TARGET, "503", tokens)}
    assert samples(registry) == pytest.approx(series)


async def test_attempts_per_call_use_the_design_buckets(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    """retrymw_call_attempts has buckets 1, 2, 3, 4, 5, 6, 8, 10 and +Inf; 3 attempts land in 3."""
    await run_scenario("success_after_2_retries", clock, [PrometheusInstrument(registry)])
    counts = buckets(registry, "retrymw_call_attempts", P, T, "success")
    assert counts == {1: 0, 2: 0, 3: 1, 4: 1, 5: 1, 6: 1, 8: 1, 10: 1, float("inf"): 1}
    assert names.CALL_ATTEMPTS_BUCKETS == (1, 2, 3, 4, 5, 6, 8, 10)


async def test_circuit_rejection_counts_zero_attempts(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    """A call the breaker rejects observes 0 attempts, in the lowest bucket; the call that
    opened the circuit made its one attempt and is counted by the call histogram alone."""
    await run_scenario("circuit_open", clock, [PrometheusInstrument(registry)])
    assert buckets(registry, "retrymw_call_attempts", P, T, "circuit_open")[1] == 1
    assert samples(registry)["retrymw_call_attempts_sum", P, T, "circuit_open"] == 0


async def test_instruments_on_one_registry_share_the_collectors(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    """Two instruments on one registry never raise "Duplicated timeseries" and feed one series."""
    first, second = PrometheusInstrument(registry), PrometheusInstrument(registry)
    await run_scenario("success_first_try", clock, [first])
    await run_scenario("success_first_try", clock, [second])
    assert samples(registry)["retrymw_call_duration_seconds_count", P, T, "success"] == 2


def test_default_registry_is_used_when_none_is_given() -> None:
    """Without a registry the instrument registers once with prometheus_client's REGISTRY."""
    import prometheus_client

    assert PrometheusInstrument().registry is prometheus_client.REGISTRY
    assert PrometheusInstrument().registry is prometheus_client.REGISTRY


def test_collectors_left_by_an_earlier_copy_are_reused(registry: CollectorRegistry) -> None:
    """Collectors already registered under our names (a reloaded module) are shared, not doubled."""
    from retrymw.instrumentation._prometheus.metrics import Metrics

    first = Metrics(registry)
    again = Metrics(registry)
    assert again.call_duration is first.call_duration
    assert again.circuit_state is first.circuit_state


def test_a_foreign_metric_with_our_name_is_an_error(registry: CollectorRegistry) -> None:
    """A different metric already using a retrymw name is reported, not silently shared."""
    Counter("retrymw_retries_denied", "someone else's", ["x"], registry=registry)
    with pytest.raises(ValueError, match="Duplicated"):
        PrometheusInstrument(registry)


def finished(target: str, outcome: str = "success", error_type: str | None = None) -> CallFinished:
    return CallFinished(P, target, target, outcome, 1, 0.5, error_type)  # type: ignore[arg-type]


def test_targets_past_the_cap_are_reported_as_other(
    registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the first MAX_TARGETS targets get their own series; the rest share "_other"."""
    monkeypatch.setattr(names, "MAX_TARGETS", 2)
    instrument = PrometheusInstrument(registry)
    for target in ["a", "b", "c", "d", "a", "d"]:
        instrument.call_finished(finished(target))
    calls = {
        key[2]: value
        for key, value in samples(registry).items()
        if key[0] == "retrymw_call_duration_seconds_count" and key[3] == "success"
    }
    assert calls == {"a": 2, "b": 1, "_other": 3}


def test_error_types_past_the_cap_are_reported_as_other(
    registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the first MAX_ERROR_TYPES error types get their own attempt series."""
    from retrymw import AttemptFinished

    monkeypatch.setattr(names, "MAX_ERROR_TYPES", 1)
    instrument = PrometheusInstrument(registry)
    for error in ["E1", "E2", "E3", "E1"]:
        instrument.attempt_finished(AttemptFinished(P, T, T, 1, "failed", 0.1, error))
    errors = {
        key[4]: value
        for key, value in samples(registry).items()
        if key[0] == "retrymw_attempt_duration_seconds_count" and key[3] == "failed"
    }
    assert errors == {"E1": 2, "_OTHER": 2}


def test_breaker_transitions_move_the_state_set(registry: CollectorRegistry) -> None:
    """Each transition counts once and leaves exactly one state at 1."""
    instrument = PrometheusInstrument(registry)
    instrument.breaker_state_changed(BreakerStateChanged("db", "closed", "open", 1.0))
    instrument.breaker_state_changed(BreakerStateChanged("db", "open", "half_open", 6.0))
    found = samples(registry)
    assert found["retrymw_circuit_transitions_total", "db", "closed", "open"] == 1
    assert found["retrymw_circuit_transitions_total", "db", "open", "half_open"] == 1
    states = {key[2]: value for key, value in found.items() if key[0] == "retrymw_circuit_state"}
    assert states == {"closed": 0, "open": 0, "half_open": 1}


async def test_per_target_breakers_have_keyed_circuit_names(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    """`PerTarget(CircuitBreaker(name="db"))`: one circuit per target, named ``db:<target>``;
    one target's trip leaves the other's series closed."""
    breakers = PerTarget(
        CircuitBreaker(name="db", failure_threshold=1, recovery_timeout="30s", clock=clock)
    )
    runner = retrier(clock, [PrometheusInstrument(registry)], breaker=breakers)

    async def healthy() -> str:
        return "ok"

    assert await runner.call(healthy) == "ok"
    with pytest.raises(ConnectionError):
        await runner.call(script(clock, failures=99))  # its one failure opens its own circuit
    states = {
        (key[1], key[2]): value
        for key, value in samples(registry).items()
        if key[0] == "retrymw_circuit_state"
    }
    assert states == {
        ("db:healthy", "closed"): 1,
        ("db:healthy", "open"): 0,
        ("db:healthy", "half_open"): 0,
        ("db:fetch", "closed"): 0,
        ("db:fetch", "open"): 1,
        ("db:fetch", "half_open"): 0,
    }


# -- exemplars ------------------------------------------------------------------------------------


def _openmetrics_exemplars(registry: CollectorRegistry) -> dict[str, set[str]]:
    """Sample name → the trace ids of its exemplars in the OpenMetrics exposition."""
    found: dict[str, set[str]] = {}
    exposition = generate_openmetrics(registry)  # type: ignore[no-untyped-call]
    for line in exposition.decode().splitlines():
        if " # {" in line:
            name = line.split("{", 1)[0]
            trace_id = line.split('trace_id="', 1)[1].split('"', 1)[0]
            found.setdefault(name, set()).add(trace_id)
    return found


async def test_exemplars_carry_the_current_sampled_trace(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    """With a sampled span current, the latency histograms carry its trace id as exemplar.

    Counters and the attempts histogram do not: an exemplar costs an id read, a validation and
    a clock read per update, and only the latency panels link to traces.
    """
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("request") as span:
        await run_scenario("success_after_2_retries", clock, [PrometheusInstrument(registry)])
    trace_id = format(span.get_span_context().trace_id, "032x")
    exemplars = _openmetrics_exemplars(registry)
    assert set(exemplars) == {
        "retrymw_call_duration_seconds_bucket",
        "retrymw_attempt_duration_seconds_bucket",
        "retrymw_backoff_duration_seconds_bucket",
    }
    assert all(ids == {trace_id} for ids in exemplars.values())
    provider.shutdown()


async def test_no_exemplars_without_a_sampled_span(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    """Without a span, or with one that is not sampled, no exemplar is attached."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    await run_scenario("success_after_2_retries", clock, [PrometheusInstrument(registry)])
    provider = TracerProvider(sampler=ALWAYS_OFF)
    with provider.get_tracer("test").start_as_current_span("unsampled"):
        await run_scenario("exhausted", clock, [PrometheusInstrument(registry)])
    assert _openmetrics_exemplars(registry) == {}
    provider.shutdown()


def test_exemplars_are_off_without_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without opentelemetry-api the exemplar reader is a constant None."""
    from retrymw.instrumentation._prometheus import exemplar as _prometheus_exemplar

    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    reader = _prometheus_exemplar.exemplar_reader()
    assert reader is _prometheus_exemplar.no_exemplar
    assert reader() is None


# -- exposition tools and modes -------------------------------------------------------------------


def test_promtool_accepts_the_exposition(registry: CollectorRegistry, clock: FakeClock) -> None:
    """`promtool check metrics` finds nothing to lint in an exposition holding all ten metrics."""
    promtool = require_binary("promtool")
    for scenario in ("success_after_2_retries", "exhausted", "circuit_open", "throttled"):
        anyio.run(run_scenario, scenario, clock, [PrometheusInstrument(registry)])
    exposition = generate_latest(registry)
    assert len({key[0] for key in samples(registry)}) >= 10
    result = subprocess.run(
        [promtool, "check", "metrics"], input=exposition, capture_output=True, check=False
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert result.stdout.decode().strip() == ""


_MULTIPROCESS_SCRIPT = """
import json, anyio
from prometheus_client import CollectorRegistry, multiprocess, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from retrymw import BreakerStateChanged, CallFinished
from retrymw.instrumentation import PrometheusInstrument
from retrymw.testing import FakeClock
from tests.instrumentation import run_scenario

instrument = PrometheusInstrument(CollectorRegistry())
budget = anyio.run(run_scenario, "success_after_2_retries", FakeClock(), [instrument])
instrument.call_finished(CallFinished("p", "fetch", "fetch", "success", 1, 0.5, None))
instrument.breaker_state_changed(BreakerStateChanged("db", "closed", "open", 1.0))
collected = CollectorRegistry()
multiprocess.MultiProcessCollector(collected)
text = generate_latest(collected).decode()
print(json.dumps([budget.available()] + [
    [sample.name, sample.labels, sample.value]
    for family in text_string_to_metric_families(text)
    for sample in family.samples
    if not sample.name.endswith("_bucket")
]))
"""


def test_multiprocess_mode_merges_every_metric(tmp_path: Path) -> None:
    """Under PROMETHEUS_MULTIPROC_DIR every metric is written to and collected from the files."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_MULTIPROCESS_SCRIPT)],
        env=env,
        capture_output=True,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    tokens, *rows = json.loads(result.stdout)
    found = {(name, tuple(sorted(labels.items()))): value for name, labels, value in rows}

    def value(name: str, **labels: str) -> float:
        return float(found[name, tuple(sorted(labels.items()))])

    pt = {"retrymw_policy": P, "retrymw_target": T}
    calls = {**pt, "retrymw_outcome": "success"}
    assert value("retrymw_call_duration_seconds_count", **calls) == 2  # the scenario, one more
    assert value("retrymw_call_duration_seconds_sum", **calls) == 3.75 + 0.5
    success = {**pt, "retrymw_attempt_outcome": "success", "error_type": ""}
    assert value("retrymw_attempt_duration_seconds_count", **success) == 1
    retried = {**pt, "retrymw_attempt_outcome": "retried", "error_type": "ConnectionError"}
    assert value("retrymw_attempt_duration_seconds_count", **retried) == 2
    # Pre-created series are in the files too: the budget's first denial is an increase.
    assert value("retrymw_retries_denied_total", **pt, retrymw_reason="throttled") == 0
    assert value("retrymw_backoff_duration_seconds_sum", **pt) == 3.0
    assert value("retrymw_retry_budget_available", **pt) == pytest.approx(tokens)
    circuit = {"retrymw_circuit": "db"}
    assert value("retrymw_circuit_state", **circuit, retrymw_circuit_state="open") == 1
    assert value("retrymw_circuit_state", **circuit, retrymw_circuit_state="closed") == 0
    transition = {"retrymw_circuit_previous_state": "closed", "retrymw_circuit_state": "open"}
    assert value("retrymw_circuit_transitions_total", **circuit, **transition) == 1
    assert {file.name.split("_")[0] for file in tmp_path.iterdir()} >= {
        "counter",
        "gauge",
        "histogram",
    }
    assert any("livemin" in file.name for file in tmp_path.iterdir())
    assert any("livemax" in file.name for file in tmp_path.iterdir())


# -- failure isolation, imports and defaults ------------------------------------------------------


async def test_a_failing_client_disables_the_instrument_not_the_call(
    registry: CollectorRegistry,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """If prometheus_client raises, the instrument is disabled and the call still returns."""

    def broken(self: Any, amount: float = 1, exemplar: Any = None) -> None:
        raise RuntimeError("disk full")

    # Every call observes histograms (they count calls and attempts); counters only some.
    monkeypatch.setattr(Histogram, "observe", broken)
    instrument = PrometheusInstrument(registry)
    with caplog.at_level(logging.ERROR, logger="retrymw"):
        await run_scenario("success_after_2_retries", clock, [instrument])
        await run_scenario("exhausted", clock, [instrument])
    disabled = [record for record in caplog.records if "has been disabled" in record.getMessage()]
    assert len(disabled) == 2  # once per Retrier (each has its own dispatch)


def test_missing_prometheus_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without prometheus_client, asking for the instrument says which extra to install."""
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "retrymw.instrumentation._prometheus")
    monkeypatch.delitem(sys.modules, "retrymw.instrumentation._prometheus.instrument")
    import retrymw.instrumentation

    with pytest.raises(ImportError, match=r"pip install 'retrymw\[prometheus\]'"):
        retrymw.instrumentation.PrometheusInstrument  # noqa: B018


def test_importing_retrymw_imports_no_telemetry_library() -> None:
    """`import retrymw`, building a Retrier without defaults and logging a retry load neither
    extra (the log records' trace ids are read only where opentelemetry is already imported)."""
    code = (
        "import sys, retrymw, retrymw.instrumentation;"
        "from retrymw._core.events import RetryScheduled;"
        "retrymw.Retrier(instruments=());"
        "retrymw.instrumentation.LoggingInstrument().retry_scheduled("
        "RetryScheduled('p', 't', 'op', 1, 3, 0.5, '503'));"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('prometheus_client', 'opentelemetry')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert result.stdout.decode().strip() == "[]"
    assert b"attempt 1/3 failed with status 503" in result.stderr  # the retry was logged


def test_defaults_include_prometheus_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in defaults are logging, Prometheus (default registry) and OTel, built once."""
    import prometheus_client

    from retrymw import instrumentation

    monkeypatch.setattr(instrumentation, "_builtin", None)
    monkeypatch.setattr(instrumentation, "_defaults", None)
    first = instrumentation.default_instruments()
    assert [type(i).__name__ for i in first] == [
        "LoggingInstrument",
        "PrometheusInstrument",
        "OpenTelemetryInstrument",
    ]
    assert first[1].registry is prometheus_client.REGISTRY  # type: ignore[attr-defined]
    assert instrumentation.default_instruments() is first
    instrumentation.set_default_instruments([])
    assert instrumentation.default_instruments() == ()
    instrumentation.set_default_instruments(None)
    assert instrumentation.default_instruments() is first


def test_defaults_skip_a_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without prometheus_client the defaults are logging and OTel only."""
    from retrymw import instrumentation

    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "retrymw.instrumentation._prometheus")
    monkeypatch.delitem(sys.modules, "retrymw.instrumentation._prometheus.instrument")
    monkeypatch.setattr(instrumentation, "_builtin", None)
    monkeypatch.setattr(instrumentation, "_defaults", None)
    kinds = [type(i).__name__ for i in instrumentation.default_instruments()]
    assert kinds == ["LoggingInstrument", "OpenTelemetryInstrument"]


def test_a_default_that_cannot_be_built_is_logged_and_skipped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A default instrument whose constructor fails is left out; the defaults still work."""
    from retrymw import instrumentation
    from retrymw.instrumentation import _prometheus

    def refuse(self: Any, registry: Any = None) -> None:
        raise ValueError("Duplicated timeseries")

    monkeypatch.setattr(_prometheus.PrometheusInstrument, "__init__", refuse)
    monkeypatch.setattr(instrumentation, "_builtin", None)
    monkeypatch.setattr(instrumentation, "_defaults", None)
    with caplog.at_level(logging.ERROR, logger="retrymw"):
        kinds = [type(i).__name__ for i in instrumentation.default_instruments()]
    assert kinds == ["LoggingInstrument", "OpenTelemetryInstrument"]
    assert "could not create the default PrometheusInstrument" in caplog.text


async def test_a_retrier_with_defaults_feeds_the_default_registry(clock: FakeClock) -> None:
    """A Retrier built with instruments=None counts its calls in the default registry.

    Counted over every series: the registry is the process's, and what other tests put there
    may already fill its label bounds (this call's target then reads ``_other``)."""
    import prometheus_client

    from retrymw import Retrier, RetryPolicy

    def count() -> float:
        return sum(
            sample.value
            for family in prometheus_client.REGISTRY.collect()
            for sample in family.samples
            if sample.name == "retrymw_call_duration_seconds_count"
            and sample.labels["retrymw_outcome"] == "success"
        )

    before = count()
    fetch = script(clock, failures=0)
    assert await Retrier(RetryPolicy(name="defaults-test"), clock=clock).call(fetch) == "ok"
    assert count() == before + 1


def test_a_bucket_takes_one_exemplar_per_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prometheus keeps a bucket's latest exemplar only: later ones within a second are dropped.

    Each bucket has its own second, so a slow outlier still gets its trace id at once.
    """
    from opentelemetry.sdk.trace import TracerProvider

    from retrymw.instrumentation._prometheus import exemplar as _prometheus_exemplar

    now = [100.0]
    monkeypatch.setattr(_prometheus_exemplar, "_now", lambda: now[0])
    registry = CollectorRegistry()
    instrument = PrometheusInstrument(registry)
    tracer = TracerProvider().get_tracer("test")

    def call(duration: float) -> str:
        with tracer.start_as_current_span("request") as span:
            instrument.call_finished(CallFinished(P, T, T, "success", 1, duration, None))
        return format(span.get_span_context().trace_id, "032x")

    def exemplar_of(bound: str) -> str | None:
        text = generate_openmetrics(registry).decode()  # type: ignore[no-untyped-call]
        for line in text.splitlines():
            if line.startswith("retrymw_call_duration_seconds_bucket") and f'le="{bound}"' in line:
                return line.split('trace_id="')[1].split('"')[0] if "#" in line else None
        raise AssertionError(f"no bucket le={bound}")

    first = call(0.004)
    call(0.004)  # same bucket, same second: no new exemplar
    outlier = call(20.0)  # another bucket: its own exemplar at once
    assert exemplar_of("0.005") == first
    assert exemplar_of("30.0") == outlier
    now[0] += 1.0
    later = call(0.004)
    assert exemplar_of("0.005") == later != first
