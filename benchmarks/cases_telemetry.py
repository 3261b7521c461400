"""Group 5: what telemetry costs, next to the bare primitives it is made of.

The retrymw cases run the async success path (``Retrier.call`` on a trivial coroutine, default
budget) with each instrument set; the primitive cases time one Prometheus or OpenTelemetry
operation each, so a reader can add up what an instrument must spend per call and see what
retrymw adds on top.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._harness import Case, Group, Prepared
from ._instruments import Kind, otel_sdk, telemetry
from .cases_core import RESULT, flaky_async, floor_async, ok_async, retrymw_retrier

__all__ = ["groups"]

LABELS = ("default", "ok_async", "success")
ATTRIBUTES = {"retrymw.policy": "default", "retrymw.target": "ok_async", "retrymw.outcome": "ok"}

_KINDS: tuple[tuple[str, Kind], ...] = (
    ("retrymw no instruments", "none"),
    ("retrymw Prometheus", "prometheus"),
    ("retrymw OTel API, no SDK", "otel-api"),
    ("retrymw OTel SDK, in-memory", "otel-sdk"),
    ("retrymw Prometheus + OTel SDK", "both"),
)


def _check_result(result: Any) -> None:
    if result != RESULT:
        raise AssertionError(f"expected {RESULT}, got {result!r}")


def _retrymw_case(name: str, kind: Kind, *, failing: bool) -> Case:
    def make() -> Prepared:
        tel = telemetry(kind)
        retrier = retrymw_retrier(
            budget="off" if failing else "default", instruments=tel.instruments
        )
        fn = flaky_async()[0] if failing else ok_async
        return Prepared(op=retrier.call, args=(fn,), check=_check_result, reset=tel.reset)

    return Case(name, "retrymw", make)


def _default_instruments_case() -> Case:
    def make() -> Prepared:
        retrier = retrymw_retrier(budget="default", instruments=None)
        return Prepared(op=retrier.call, args=(ok_async,), check=_check_result)

    return Case("retrymw default instruments", "retrymw", make)


def _noop_instrument_case() -> Case:
    """An instrument whose per-call hooks do nothing: the engine's own cost of emitting events."""

    def make() -> Prepared:
        from retrymw.instrumentation import Instrument

        class Noop(Instrument):
            def call_started(self, event: Any, /) -> None:
                return None

            def attempt_started(self, event: Any, /) -> None:
                return None

            def attempt_finished(self, event: Any, /) -> None:
                pass

            def call_finished(self, event: Any, /) -> None:
                pass

        retrier = retrymw_retrier(budget="default", instruments=(Noop(),))
        return Prepared(op=retrier.call, args=(ok_async,), check=_check_result)

    return Case("retrymw no-op Instrument (every hook)", "retrymw", make)


def _primitive(name: str, library: str, build: Callable[[], Prepared]) -> Case:
    return Case(name, library, build, mode="sync")


def _prometheus_counter() -> Prepared:
    from prometheus_client import CollectorRegistry, Counter

    counter = Counter(
        "bench_calls", "doc", ["policy", "target", "outcome"], registry=CollectorRegistry()
    )

    def inc() -> None:
        counter.labels(*LABELS).inc()

    return Prepared(op=inc)


def _prometheus_histogram() -> Prepared:
    from prometheus_client import CollectorRegistry, Histogram

    histogram = Histogram(
        "bench_seconds", "doc", ["policy", "target", "outcome"], registry=CollectorRegistry()
    )

    def observe() -> None:
        histogram.labels(*LABELS).observe(0.001)

    return Prepared(op=observe)


def _otel_api_span() -> Prepared:
    from opentelemetry import trace

    tracer = trace.get_tracer("benchmarks")  # no SDK configured: the API's no-op tracer

    def span() -> None:
        tracer.start_span("retrymw op").end()

    return Prepared(op=span)


def _otel_sdk_span() -> Prepared:
    sdk = otel_sdk()
    tracer = sdk.tracer_provider.get_tracer("benchmarks")

    def span() -> None:
        tracer.start_span("retrymw op", attributes=ATTRIBUTES).end()

    return Prepared(op=span, reset=sdk.reset)


def _otel_sdk_current_span() -> Prepared:
    sdk = otel_sdk()
    tracer = sdk.tracer_provider.get_tracer("benchmarks")

    def span() -> None:
        with tracer.start_as_current_span("retrymw op", attributes=ATTRIBUTES):
            pass

    return Prepared(op=span, reset=sdk.reset)


def _otel_sdk_counter() -> Prepared:
    sdk = otel_sdk()
    counter = sdk.meter_provider.get_meter("benchmarks").create_counter("retrymw.calls")

    def add() -> None:
        counter.add(1, ATTRIBUTES)

    return Prepared(op=add, reset=sdk.reset)


def _otel_sdk_histogram() -> Prepared:
    sdk = otel_sdk()
    histogram = sdk.meter_provider.get_meter("benchmarks").create_histogram("retrymw.duration")

    def record() -> None:
        histogram.record(0.001, ATTRIBUTES)

    return Prepared(op=record, reset=sdk.reset)


def _bare() -> Prepared:
    return Prepared(op=ok_async, check=_check_result)


def _floor() -> Prepared:
    return Prepared(op=floor_async, args=(flaky_async()[0],), check=_check_result)


def groups(quick: bool) -> list[Group]:
    """The success-path telemetry group (with primitives) and the failure-path one."""
    success = [
        Case("bare await f()", "bare", _bare, baseline=True),
        *(_retrymw_case(name, kind, failing=False) for name, kind in _KINDS),
        _noop_instrument_case(),
        _default_instruments_case(),
        _primitive("Counter.labels(3).inc()", "prometheus_client", _prometheus_counter),
        _primitive("Histogram.labels(3).observe()", "prometheus_client", _prometheus_histogram),
        _primitive("OTel API start_span().end(), no SDK", "opentelemetry", _otel_api_span),
        _primitive("OTel SDK start_span().end()", "opentelemetry", _otel_sdk_span),
        _primitive("OTel SDK start_as_current_span", "opentelemetry", _otel_sdk_current_span),
        _primitive("OTel SDK counter.add(attrs)", "opentelemetry", _otel_sdk_counter),
        _primitive("OTel SDK histogram.record(attrs)", "opentelemetry", _otel_sdk_histogram),
    ]
    failure = [
        Case("hand-written loop", "hand-written", _floor, baseline=True),
        *(_retrymw_case(name, kind, failing=True) for name, kind in _KINDS),
    ]
    return [
        Group(
            "telemetry",
            "Telemetry cost, success path",
            "`Retrier.call` on a trivial coroutine (default budget) with each instrument set; "
            "Prometheus gets a fresh `CollectorRegistry`, the OTel SDK an in-memory span "
            'exporter (`SimpleSpanProcessor`) and metric reader; "OTel API, no SDK" uses the '
            "API's default providers. The no-op instrument implements every per-call hook and does "
            "nothing: it shows what emitting the events costs the engine. Default instruments "
            "(`instruments=None`) are logging, plus Prometheus on the default registry and "
            "OpenTelemetry on the global providers when installed. Below, the primitives alone "
            "(3 labels / 3 attributes), timed in the same rounds.",
            success,
        ),
        Group(
            "telemetry-failure",
            "Telemetry cost, failure path",
            "`Retrier.call` (budget off) on a coroutine that fails twice then succeeds, zero "
            "delay, with each instrument set: three attempts, two retries per call.",
            failure,
        ),
    ]
