"""The speed promises of issue 8, evaluated from a run (reported, never asserted in tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._harness import DASH, TIMES, GroupResult, paired_ratio

__all__ = ["Target", "evaluate"]

Kind = Literal["at_most", "at_least", "noise"]


@dataclass(frozen=True, slots=True)
class Target:
    """One promise: ``figure`` is the measured ratio, ``met`` is None when it could not run."""

    title: str
    goal: str
    figure: str
    met: bool | None
    ratio: float | None

    def as_dict(self) -> dict[str, Any]:
        """For the JSON document."""
        return {
            "title": self.title,
            "goal": self.goal,
            "figure": self.figure,
            "met": self.met,
            "ratio": self.ratio,
        }


@dataclass(frozen=True, slots=True)
class _Spec:
    title: str
    group: str
    numerator: tuple[str, ...]  # the fastest of these cases is used
    denominator: tuple[str, ...]
    kind: Kind
    bound: float
    # When set, both sides are costs over this case, paired per round: (num - it) / (den - it).
    minus: str | None = None


# Within the noise: the paired ratio is within 3% of 1, or its interquartile range contains 1.
_NOISE = 0.03

_SPECS: tuple[_Spec, ...] = (
    _Spec(
        "async success: Retrier.call / hand-written loop",
        "success-async",
        ("Retrier.call",),
        ("hand-written loop",),
        "at_most",
        3.0,
    ),
    _Spec(
        "async success: @Retrier / hand-written loop",
        "success-async",
        ("@Retrier",),
        ("hand-written loop",),
        "at_most",
        3.0,
    ),
    _Spec(
        "sync success: Retrier.call_sync / hand-written loop",
        "success-sync",
        ("Retrier.call_sync",),
        ("hand-written loop",),
        "at_most",
        3.0,
    ),
    _Spec(
        "async success: fastest tenacity / Retrier.call",
        "success-async",
        ("tenacity AsyncRetrying", "@tenacity.retry"),
        ("Retrier.call",),
        "at_least",
        20.0,
    ),
    _Spec(
        "async success: fastest stamina / Retrier.call",
        "success-async",
        ("@stamina.retry", "stamina AsyncRetryingCaller"),
        ("Retrier.call",),
        "at_least",
        20.0,
    ),
    _Spec(
        "sync success: fastest tenacity / Retrier.call_sync",
        "success-sync",
        ("tenacity Retrying", "@tenacity.retry"),
        ("Retrier.call_sync",),
        "at_least",
        20.0,
    ),
    _Spec(
        "sync success: fastest stamina / Retrier.call_sync",
        "success-sync",
        ("@stamina.retry", "stamina RetryingCaller"),
        ("Retrier.call_sync",),
        "at_least",
        20.0,
    ),
    _Spec(
        "MockTransport 200: retrymw transport, no instruments / bare client",
        "httpx-mock-200",
        ("retrymw AsyncRetryTransport",),
        ("bare AsyncClient",),
        "at_most",
        1.10,
    ),
    _Spec(
        "MockTransport 200: retrymw transport + Prometheus / bare client",
        "httpx-mock-200",
        ("retrymw AsyncRetryTransport + Prometheus",),
        ("bare AsyncClient",),
        "at_most",
        1.25,
    ),
    _Spec(
        "loopback, sequential: retrymw / bare httpx",
        "httpx-loopback-seq",
        ("retrymw sequential",),
        ("bare sequential",),
        "noise",
        _NOISE,
    ),
    _Spec(
        "loopback, 50 concurrent tasks: retrymw / bare httpx",
        "httpx-loopback-concurrent",
        ("retrymw concurrent",),
        ("bare concurrent",),
        "noise",
        _NOISE,
    ),
    _Spec(
        "OTel API without SDK / no instruments",
        "telemetry",
        ("retrymw OTel API, no SDK",),
        ("retrymw no instruments",),
        "noise",
        _NOISE,
    ),
)

# Issue 18: observability at the cost of its primitives. The replayed primitives are frozen to
# what retrymw called before the trims (benchmarks/cases_replay.py).
_SPECS += tuple(
    _Spec(title, group, (numerator,), (denominator,), "at_most", bound, minus)
    for title, group, numerator, denominator, bound, minus in (
        (
            "coroutine success, Prometheus / today's Prometheus primitives replayed",
            "replay-success",
            "retrymw Prometheus",
            "replay: Prometheus primitives",
            1.3,
            None,
        ),
        (
            "coroutine success, OTel SDK / today's OTel primitives replayed",
            "replay-success",
            "retrymw OTel SDK",
            "replay: OTel SDK primitives",
            0.5,
            None,
        ),
        (
            "coroutine fail, fail, ok, OTel SDK / today's primitives replayed",
            "replay-failure",
            "retrymw OTel SDK",
            "replay: OTel SDK primitives",
            0.4,
            None,
        ),
        (
            "httpx 200, OTel SDK, cost over a bare client / the replay's cost over it",
            "replay-httpx",
            "retrymw AsyncRetryTransport + OTel SDK",
            "replay: bare client + OTel SDK primitives",
            0.55,
            "bare AsyncClient",
        ),
        (
            "Prometheus with a sampled span current / Prometheus alone",
            "replay-success",
            "retrymw Prometheus, sampled span current",
            "retrymw Prometheus, no span current",
            1.3,
            None,
        ),
        (
            "core failure path, no instruments / hand-written + sleep(0)",
            "failure-async",
            "Retrier.call budget=None",
            "hand-written loop",
            2.0,
            None,
        ),
        (
            "success path, no instruments / hand-written (kept)",
            "success-async",
            "Retrier.call",
            "hand-written loop",
            1.3,
            None,
        ),
    )
)


def _goal(spec: _Spec) -> str:
    if spec.kind == "at_most":
        return f"≤ {spec.bound:g}{TIMES}"
    if spec.kind == "at_least":
        return f"≥ {spec.bound:g}{TIMES}"
    return f"within noise (±{spec.bound * 100:g}% or IQR spans 1)"


def _evaluate(spec: _Spec, results: Mapping[str, GroupResult]) -> Target:
    group = results.get(spec.group)
    numerators = [group.case(name) for name in spec.numerator] if group else []
    denominators = [group.case(name) for name in spec.denominator] if group else []
    top = [c for c in numerators if c is not None]
    bottom = [c for c in denominators if c is not None]
    if not top or not bottom:
        return Target(spec.title, _goal(spec), "not run", None, None)
    num = min(top, key=lambda c: c.median)
    den = min(bottom, key=lambda c: c.median)
    if spec.minus is None:
        q1, ratio, q3 = paired_ratio(num.samples, den.samples)
    else:
        base = group.case(spec.minus) if group else None
        if base is None:
            return Target(spec.title, _goal(spec), "not run", None, None)
        q1, ratio, q3 = paired_ratio(
            [n - b for n, b in zip(num.samples, base.samples, strict=True)],
            [d - b for d, b in zip(den.samples, base.samples, strict=True)],
        )
    figure = f"{ratio:.2f}{TIMES} (IQR {q1:.2f}{DASH}{q3:.2f})"
    if len(top) > 1:
        figure += f", {num.name}"
    if spec.kind == "at_most":
        met = ratio <= spec.bound
    elif spec.kind == "at_least":
        met = ratio >= spec.bound
    else:
        met = abs(ratio - 1.0) <= spec.bound or q1 <= 1.0 <= q3
    return Target(spec.title, _goal(spec), figure, met, ratio)


def evaluate(results: Sequence[GroupResult]) -> list[Target]:
    """Every target whose group ran (a target of a group that was not selected is left out)."""
    by_name = {result.group.name: result for result in results}
    return [_evaluate(spec, by_name) for spec in _SPECS if spec.group in by_name]
