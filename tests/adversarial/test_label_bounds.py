"""Label cardinality stays bounded: however many hosts, policies and error types, the series
one registry (or meter provider) holds never pass `names.MAX_SERIES`, and no record is lost.

The transport tests drive real `AsyncRetryTransport`s on `httpx.MockTransport` (successes,
retried 503s, exhausted 502s, connect errors) in virtual time and count the series of the real
exposition. 200 hosts are enough: the unbounded code exported 25 519 series from 101 of them
(the first 100 hosts and ``_other``, about 250 series each), and 22 039 through OpenTelemetry
from 700 (``http.client.request.duration`` has a ``server.address`` per host). The
100 000-host run gives the same count as 200 (13 908 series: every host past the bound lands
in the same series) and takes minutes, too long for the suite;
``python -m tests.adversarial.test_label_bounds 100000`` runs it.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections import Counter
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from retrymw import AttemptFinished, CallFinished, RetryDenied, RetryPolicy, RetryScheduled
from retrymw.httpx import AsyncRetryTransport
from retrymw.instrumentation import OpenTelemetryInstrument, PrometheusInstrument
from retrymw.instrumentation import _names as names
from retrymw.testing import FakeClock

pytestmark = pytest.mark.anyio

#: Hosts per transport test: past the old bound (80 hosts already gave 20 161 series).
HOSTS = 200
#: Hosts for the OpenTelemetry test: past its old bound (700 gave 22 039 series).
OTEL_HOSTS = 800
#: Policies, targets and error types of the worst input.
WORST = (40, 120, 60)


def series_of(registry: CollectorRegistry) -> Counter[str]:
    """Exposition series per sample name (one per non-comment line of the real exposition)."""
    found: Counter[str] = Counter()
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            found[line.split("{")[0].split(" ")[0]] += 1
    return found


def totals(registry: CollectorRegistry, sample_name: str) -> float:
    """The sum of one sample over every series (a ``_count`` summed over all labels)."""
    text = generate_latest(registry).decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == sample_name
    )


def handler_for_hosts() -> tuple[Any, Counter[str]]:
    """A mock server whose hosts ``h-<i>.example`` behave by ``i % 4``: success; a 503 then a
    success; 502 every time; a refused connection every time. Counts attempts per host."""
    attempts: Counter[str] = Counter()

    def handle(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        attempts[host] += 1
        kind = int(host.split("-")[1].split(".")[0]) % 4
        if kind == 0 or (kind == 1 and attempts[host] > 1):
            return httpx.Response(200)
        if kind in (1, 2):
            return httpx.Response(503 if kind == 1 else 502)
        raise httpx.ConnectError("refused", request=request)

    return handle, attempts


async def drive_hosts(instrument: Any, hosts: int) -> int:
    """GET each of ``hosts`` distinct hosts once through one transport; returns the calls made."""
    handle, _ = handler_for_hosts()
    transport = AsyncRetryTransport(
        httpx.MockTransport(handle),
        policy=RetryPolicy(attempts=3, initial_delay=0.01),
        instruments=[instrument],
        clock=FakeClock(),
    )
    async with httpx.AsyncClient(transport=transport) as client:
        for index in range(hosts):
            with contextlib.suppress(httpx.ConnectError):  # the refusing hosts
                await client.get(f"http://h-{index}.example/")
    return hosts


async def test_prometheus_series_stay_within_the_bound_for_many_hosts() -> None:
    """200 distinct hosts through one transport: at most MAX_SERIES series, and every call and
    attempt is still counted (in its host's series, its policy's ``_other``, or the overflow)."""
    registry = CollectorRegistry()
    calls = await drive_hosts(PrometheusInstrument(registry=registry), HOSTS)
    found = series_of(registry)
    assert sum(found.values()) <= names.MAX_SERIES
    assert totals(registry, "retrymw_call_duration_seconds_count") == calls
    # Attempts per host by kind: 1, 2, 3 and 3.
    expected_attempts = sum((1, 2, 3, 3)[index % 4] for index in range(HOSTS))
    assert totals(registry, "retrymw_attempt_duration_seconds_count") == expected_attempts
    # The first hosts keep series of their own; the rest are reported under ``_other``.
    labels = {
        sample.labels[names.LABEL_TARGET]
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
        if names.LABEL_TARGET in sample.labels
    }
    assert {"h-0.example", names.OVERFLOW} <= labels
    assert len(labels) <= names.MAX_TARGETS + 1


async def test_otel_series_stay_within_the_bound_for_many_hosts() -> None:
    """The same hosts through `OpenTelemetryInstrument` and the OTel Prometheus exporter: at
    most MAX_SERIES series, ``http.client.request.duration`` (one ``server.address`` per host)
    included, and every call still counted."""
    from opentelemetry.sdk.metrics import MeterProvider

    exporter = importlib.import_module("opentelemetry.exporter.prometheus")
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[exporter.PrometheusMetricReader(registry=registry)])
    try:
        calls = await drive_hosts(OpenTelemetryInstrument(meter_provider=provider), OTEL_HOSTS)
        found = series_of(registry)
        ours = sum(
            count
            for name, count in found.items()
            if name.startswith(("retrymw_", "http_client_request_duration"))
        )
        assert ours <= names.MAX_SERIES
        assert totals(registry, "retrymw_call_duration_seconds_count") == calls
        assert totals(registry, "http_client_request_duration_seconds_count") == sum(
            (1, 2, 3, 3)[index % 4] for index in range(OTEL_HOSTS)
        )
    finally:
        provider.shutdown()


def adversarial_events(policies: int, targets: int, errors: int) -> list[Any]:
    """Every kind of record, for every policy and target, with ``errors`` distinct error types:
    far more label combinations than any registry should hold."""
    events: list[Any] = []
    for p in range(policies):
        policy = f"p{p}"
        for t in range(targets):
            target = f"t{t}"
            error = f"E{(p * targets + t) % max(errors, 1)}"
            outcome = names.OUTCOMES[(p + t) % len(names.OUTCOMES)]
            attempt_outcome = names.ATTEMPT_OUTCOMES[t % len(names.ATTEMPT_OUTCOMES)]
            reason = names.REASONS[(p * 7 + t) % len(names.REASONS)]
            events += [
                AttemptFinished(policy, target, target, 1, attempt_outcome, 0.2, error),
                RetryScheduled(policy, target, target, 1, 3, 0.5, error, budget_available=3.0),
                RetryDenied(policy, target, target, 2, 3, reason, error, budget_available=2.0),
                CallFinished(policy, target, target, outcome, 2, 1.0, error),
            ]
    return events


def feed(instrument: Any, events: list[Any]) -> None:
    hooks = {
        AttemptFinished: instrument.attempt_finished,
        RetryScheduled: instrument.retry_scheduled,
        RetryDenied: instrument.retry_denied,
        CallFinished: instrument.call_finished,
    }
    for event in events:
        hooks[type(event)](event)


@settings(deadline=None, max_examples=4, derandomize=True)
@given(
    policies=st.integers(min_value=1, max_value=40),
    targets=st.integers(min_value=1, max_value=120),
    errors=st.integers(min_value=0, max_value=60),
)
def test_no_input_takes_the_prometheus_registry_past_the_bound(
    policies: int, targets: int, errors: int
) -> None:
    """Any mix of policies, targets, error types, outcomes and reasons stays within
    MAX_SERIES, and every call is counted somewhere."""
    registry = CollectorRegistry()
    events = adversarial_events(policies, targets, errors)
    feed(PrometheusInstrument(registry=registry), events)
    assert sum(series_of(registry).values()) <= names.MAX_SERIES
    assert totals(registry, "retrymw_call_duration_seconds_count") == policies * targets


def test_the_worst_input_fills_but_never_passes_the_bound() -> None:
    """40 policies, 120 targets and 60 error types (1.3 million series before) stays within
    MAX_SERIES, and keeps the counts."""
    registry = CollectorRegistry()
    feed(PrometheusInstrument(registry=registry), adversarial_events(*WORST))
    found = sum(series_of(registry).values())
    assert names.MAX_SERIES // 2 < found <= names.MAX_SERIES  # filled, not starved
    assert totals(registry, "retrymw_call_duration_seconds_count") == WORST[0] * WORST[1]
    assert totals(registry, "retrymw_retries_denied_total") == WORST[0] * WORST[1]


def test_otel_attribute_sets_stay_within_the_bound() -> None:
    """The same worst input through `OpenTelemetryInstrument`: at most MAX_SERIES series once
    exported to Prometheus, every call counted."""
    from opentelemetry.sdk.metrics import MeterProvider

    exporter = importlib.import_module("opentelemetry.exporter.prometheus")
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[exporter.PrometheusMetricReader(registry=registry)])
    try:
        feed(OpenTelemetryInstrument(meter_provider=provider), adversarial_events(*WORST))
        found = series_of(registry)
        ours = sum(count for name, count in found.items() if name.startswith("retrymw_"))
        assert ours <= names.MAX_SERIES
        assert totals(registry, "retrymw_call_duration_seconds_count") == WORST[0] * WORST[1]
    finally:
        provider.shutdown()


def main(hosts: int) -> None:  # pragma: no cover - the long run, by hand
    """Drive ``hosts`` hosts through both instruments and print the series counts."""
    registry = CollectorRegistry()
    anyio.run(drive_hosts, PrometheusInstrument(registry=registry), hosts)
    print(f"prometheus: {hosts} hosts -> {sum(series_of(registry).values())} series")


if __name__ == "__main__":  # pragma: no cover
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
