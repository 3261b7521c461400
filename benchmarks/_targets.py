"""The speed floors, evaluated from one run (reported, never asserted in tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._harness import DASH, TIMES, GroupResult, paired_ratio
from .cases_core import KEPT_PROMISES

__all__ = ["Target", "evaluate"]

# A reference row has no goal: it shows what a goal's floor is made of (``met`` stays None).
Kind = Literal["at_most", "at_least", "noise", "reference"]


@dataclass(frozen=True, slots=True)
class Target:
    """One promise: ``figure`` is the measured ratio, ``met`` is None when it could not run
    or the row is a reference (no goal)."""

    title: str
    goal: str
    figure: str
    met: bool | None
    ratio: float | None
    reference: bool = False

    @property
    def verdict(self) -> str:
        """``met``, ``MISSED``, ``reference`` or ``not measured``."""
        if self.ratio is None:
            return "not measured"
        if self.reference:
            return "reference"
        return "met" if self.met else "MISSED"

    def as_dict(self) -> dict[str, Any]:
        """For the JSON document."""
        return {
            "title": self.title,
            "goal": self.goal,
            "figure": self.figure,
            "met": self.met,
            "verdict": self.verdict,
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


# Within the noise: the paired ratio is within 3% of 1, or its interquartile range contains 1.
_NOISE = 0.03


def _at_most(title: str, group: str, numerator: str, denominator: str, bound: float) -> _Spec:
    return _Spec(title, group, (numerator,), (denominator,), "at_most", bound)


def _reference(title: str, group: str, numerator: str, denominator: str) -> _Spec:
    return _Spec(title, group, (numerator,), (denominator,), "reference", 0.0)


def _noise(title: str, group: str, numerator: str, denominator: str) -> _Spec:
    return _Spec(title, group, (numerator,), (denominator,), "noise", _NOISE)


# Floors to hold: what retrymw may cost over the least code that does the same job.
_SPECS: tuple[_Spec, ...] = (
    _at_most(
        "async success: Retrier.call / hand-written loop",
        "success-async",
        "Retrier.call",
        "hand-written loop",
        1.5,
    ),
    _at_most(
        "async success: @Retrier / hand-written loop",
        "success-async",
        "@Retrier",
        "hand-written loop",
        1.5,
    ),
    _reference(
        "async success: hand-written loop with a stamp and a budget / hand-written loop",
        "success-async",
        KEPT_PROMISES,
        "hand-written loop",
    ),
    _at_most(
        "sync success: Retrier.call_sync / hand-written loop",
        "success-sync",
        "Retrier.call_sync",
        "hand-written loop",
        1.5,
    ),
    _reference(
        "sync success: hand-written loop with a stamp and a budget / hand-written loop",
        "success-sync",
        KEPT_PROMISES,
        "hand-written loop",
    ),
    _at_most(
        "async fail, fail, ok: Retrier.call, no budget / hand-written + sleep(0)",
        "failure-async",
        "Retrier.call budget=None",
        "hand-written loop",
        2.5,
    ),
    *(
        _Spec(
            f"{mode} success: fastest {peer} / {ours}",
            f"success-{mode}",
            forms,
            (ours,),
            "at_least",
            30.0,
        )
        for mode, ours, peers in (
            (
                "async",
                "Retrier.call",
                (
                    ("tenacity", ("tenacity AsyncRetrying", "@tenacity.retry")),
                    ("stamina", ("@stamina.retry", "stamina AsyncRetryingCaller")),
                ),
            ),
            (
                "sync",
                "Retrier.call_sync",
                (
                    ("tenacity", ("tenacity Retrying", "@tenacity.retry")),
                    ("stamina", ("@stamina.retry", "stamina RetryingCaller")),
                ),
            ),
        )
        for peer, forms in peers
    ),
    _Spec(
        "sync success: fastest tenacity / hand-written loop with a stamp and a budget",
        "success-sync",
        ("tenacity Retrying", "@tenacity.retry"),
        (KEPT_PROMISES,),
        "reference",
        0.0,
    ),
    _at_most(
        "MockTransport 200: retrymw transport, no instruments / bare client",
        "httpx-mock-200",
        "retrymw AsyncRetryTransport",
        "bare AsyncClient",
        1.25,
    ),
    _at_most(
        "MockTransport 200: an idle Pacer / the same transport without it",
        "httpx-mock-200",
        "retrymw AsyncRetryTransport + idle Pacer",
        "retrymw AsyncRetryTransport",
        1.10,
    ),
    _at_most(
        "coroutine success, OTel SDK / the primitives it emits (floor)",
        "replay-success",
        "retrymw OTel SDK",
        "floor: today's OTel SDK primitives",
        1.5,
    ),
    _at_most(
        "coroutine fail, fail, ok, OTel SDK / the primitives it emits (floor)",
        "replay-failure",
        "retrymw OTel SDK",
        "floor: today's OTel SDK primitives",
        1.5,
    ),
    _at_most(
        "httpx 200, OTel SDK / a bare client with the primitives it emits (floor)",
        "replay-httpx",
        "retrymw AsyncRetryTransport + OTel SDK",
        "floor: bare client + today's OTel SDK primitives",
        1.5,
    ),
    _at_most(
        "coroutine success, Prometheus / its primitives replayed",
        "replay-success",
        "retrymw Prometheus",
        "replay: Prometheus primitives",
        1.0,
    ),
    _noise(
        "loopback, sequential: retrymw / bare httpx",
        "httpx-loopback-seq",
        "retrymw sequential",
        "bare sequential",
    ),
    _noise(
        "loopback, 50 concurrent tasks: retrymw / bare httpx",
        "httpx-loopback-concurrent",
        "retrymw concurrent",
        "bare concurrent",
    ),
    _noise(
        "OTel API without SDK / no instruments",
        "telemetry",
        "retrymw OTel API, no SDK",
        "retrymw no instruments",
    ),
)


def _goal(spec: _Spec) -> str:
    if spec.kind == "at_most":
        return f"≤ {spec.bound:g}{TIMES}"
    if spec.kind == "at_least":
        return f"≥ {spec.bound:g}{TIMES}"
    if spec.kind == "reference":
        return "none (what the floor is made of)"
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
    q1, ratio, q3 = paired_ratio(num.samples, den.samples)
    figure = f"{ratio:.2f}{TIMES} (IQR {q1:.2f}{DASH}{q3:.2f})"
    if len(top) > 1:
        figure += f", {num.name}"
    if spec.kind == "reference":
        return Target(spec.title, _goal(spec), figure, None, ratio, reference=True)
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
