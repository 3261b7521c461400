"""What the demo shows: its statistics instrument, the progress line and the summary.

The terminal they are written to is `Console` (``_console``).
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..._core.events import (
    AttemptFinished,
    BreakerStateChanged,
    CallFinished,
    RetryDenied,
    RetryScheduled,
)
from ..._core.redact import redact_url
from ..._protect.targets import PerTarget
from ...instrumentation import Instrument
from .._common import human_duration, percent

if TYPE_CHECKING:
    from ..._engine.retrier import Retrier
    from ._upstream import FlakyUpstream

__all__ = ["DemoStats", "percentile", "progress_line", "summary"]

_OUTCOME_ORDER = (
    "success",
    "failure",
    "exhausted",
    "throttled",
    "budget_exhausted",
    "circuit_open",
    "deadline_exceeded",
    "cancelled",
)
_LATENCIES_KEPT = 100_000  # --forever runs keep the latest calls only
#: Who refused a call or its retry, by the call outcome or retry-denial reason it leaves.
REFUSERS = {"circuit_open": "breaker", "shed": "throttle", "throttled": "budget"}
# What the progress line gives up, in order, to fit a narrow terminal: each step moves that
# part to its next, shorter form (see `progress_line`).
_GIVE_UP = ("success", "upstream", "budget", "attempts", "others", "others")


class DemoStats(Instrument):
    """Counts what the demo's calls do, from the same events the other instruments get.

    A call is *refused* when the breaker, the throttle or the budget stops it: its first attempt
    (outcome ``circuit_open`` or ``shed``, no attempt made) or a retry the policy granted (a
    `RetryDenied` for ``circuit_open``, ``shed`` or ``throttled``). A call is refused at most
    once: either way it ends there. Each refusal is counted by whether the upstream was up at
    that moment: refused while up is what the protection cost, calls the upstream would have
    answered.

    Args:
        on_transition: called with every breaker transition as it happens.
        upstream_up: whether the upstream answers right now (outside its outage windows);
            ``None``: always.

    Attributes:
        calls: finished calls.
        rejected: calls the breaker or throttle refused before any attempt.
        rescued: calls that succeeded on a retry.
        attempts: finished attempts.
        retries: retries scheduled.
        outcomes: calls by outcome.
        denied: denied retries by reason.
        transitions: every breaker transition, in order.
        latencies: durations of the latest calls, in seconds.
        refused_up: calls refused while the upstream was up, by refuser (``breaker``,
            ``throttle``, ``budget``).
        refused_down: calls refused while it was down, by refuser.
    """

    def __init__(
        self,
        on_transition: Callable[[BreakerStateChanged], None] | None = None,
        upstream_up: Callable[[], bool] | None = None,
    ) -> None:
        self._on_transition = on_transition
        self._upstream_up = upstream_up
        self.refused_up: Counter[str] = Counter()
        self.refused_down: Counter[str] = Counter()
        self.calls = 0
        self.rejected = 0
        self.rescued = 0
        self.attempts = 0
        self.retries = 0
        self.outcomes: Counter[str] = Counter()
        self.denied: Counter[str] = Counter()
        self.transitions: list[BreakerStateChanged] = []
        self.latencies: deque[float] = deque(maxlen=_LATENCIES_KEPT)

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        """Count the attempt."""
        self.attempts += 1

    def retry_scheduled(self, event: RetryScheduled, /) -> None:
        """Count the retry."""
        self.retries += 1

    def retry_denied(self, event: RetryDenied, /) -> None:
        """Count the denial by reason, and a refused retry by refuser."""
        self.denied[event.reason] += 1
        if event.reason in REFUSERS:
            self._refused(REFUSERS[event.reason])

    def call_finished(self, event: CallFinished, /) -> None:
        """Count the call by outcome and keep its duration."""
        self.calls += 1
        self.rejected += event.attempts == 0
        if event.attempts == 0 and event.outcome in REFUSERS:
            self._refused(REFUSERS[event.outcome])
        self.rescued += event.outcome == "success" and event.attempts > 1
        self.outcomes[event.outcome] += 1
        self.latencies.append(event.duration)

    def _refused(self, refuser: str) -> None:
        up = self._upstream_up is None or self._upstream_up()
        (self.refused_up if up else self.refused_down)[refuser] += 1

    def breaker_state_changed(self, event: BreakerStateChanged, /) -> None:
        """Keep the transition and pass it on."""
        self.transitions.append(event)
        if self._on_transition is not None:
            self._on_transition(event)

    @property
    def amplification(self) -> float | None:
        """Attempts per admitted call, or ``None`` before the first admitted call finishes.

        Calls refused before any attempt made none: they are counted apart (as the
        dashboards do) rather than diluting the ratio below 1x during an outage.
        """
        admitted = self.calls - self.rejected
        return self.attempts / admitted if admitted else None


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile of sorted ``values`` (``share`` in ``[0, 1]``)."""
    if not values:
        return 0.0
    rank = max(1, min(len(values), math.ceil(share * len(values))))
    return values[rank - 1]


def _outcomes(stats: DemoStats, *, with_share: bool) -> str:
    shown = []
    for outcome, count in _outcome_counts(stats):
        text = f"{outcome} {count:,}"
        if with_share and stats.calls:
            text += f" ({percent(count / stats.calls)})"
        shown.append(text)
    return " · ".join(shown)


def _outcome_counts(stats: DemoStats) -> list[tuple[str, int]]:
    """The outcomes seen, in the usual order, with ``success`` always first."""
    order = (*_OUTCOME_ORDER, *sorted(set(stats.outcomes) - set(_OUTCOME_ORDER)))
    return [
        (outcome, stats.outcomes.get(outcome, 0))
        for outcome in order
        if stats.outcomes.get(outcome, 0) or outcome == "success"
    ]


def _breaker_state(retrier: Retrier | None) -> str:
    breaker = retrier.breaker if retrier is not None else None
    if breaker is None:
        return "none"
    states = {one.state for one in _instances(breaker)}
    return "/".join(sorted(states)) or "closed"


def _instances(protection: Any) -> list[Any]:
    """The live instances of a breaker or budget given as it is or as a `PerTarget`."""
    if isinstance(protection, PerTarget):
        return [one for one in map(protection.get, protection) if one is not None]
    return [protection]


def _refused(stats: DemoStats) -> str:
    """The summary's refused row: while the upstream was up (the price), then while down."""

    def by_refuser(counts: Counter[str]) -> str:
        shown = ", ".join(f"{who} {count:,}" for who, count in counts.most_common())
        return f" ({shown})" if shown else ""

    up, down = stats.refused_up, stats.refused_down
    return (
        f"{up.total():,} while the upstream was up{by_refuser(up)} · "
        f"{down.total():,} while it was down{by_refuser(down)}"
    )


def progress_line(
    elapsed: float,
    stats: DemoStats,
    retrier: Retrier | None,
    outage: bool,
    *,
    width: int | None = None,
) -> str:
    """One line: time, calls, attempts and amplification, outcomes, breaker, budget, upstream.

    The essentials (time, calls, amplification, the success share and the breaker's state)
    fit in 79 columns for runs of up to 999,999 calls and 9,999 seconds. The details around
    them are given up one step at a time, least useful first, until the line fits ``width``:
    the success count, the upstream's state, the budget, the attempt count, then the other
    outcomes (listed, then as a count of failed calls); what a late step freed room for is
    then taken back. A line cut at the terminal's edge used to lose the amplification and the
    outcomes, the very things the demo is about; a fixed order of steps also keeps successive
    lines alike, so the eye finds each figure where it was.

    Args:
        elapsed: seconds since the load started.
        stats: what the calls did.
        retrier: the transport's retrier, for its breaker and budget.
        outage: whether the upstream is in an outage window.
        width: the columns available, or ``None`` for every detail (a pipe or a file).

    Returns:
        The line; only the essentials if even they do not fit.
    """
    # Each part's forms, the richest first; an empty form leaves the part out.
    parts: dict[str, list[str]] = {"time": [f"[{elapsed:6.1f}s]"]}
    amplification = stats.amplification
    if not stats.calls:  # no call has finished: no ratio or share to speak of
        parts["calls"] = ["no calls finished yet"]
        parts["attempts"] = [f"attempts {stats.attempts:,}" if stats.attempts else ""]
    else:
        successes = stats.outcomes["success"]
        failed = stats.calls - successes
        others = " · ".join(f"{name} {count:,}" for name, count in _outcome_counts(stats)[1:])
        share = percent(successes / stats.calls)
        parts["calls"] = [f"calls {stats.calls:,}"]
        parts["attempts"] = (
            [f"attempts {stats.attempts:,}"]  # every call was rejected: no ratio to show
            if amplification is None
            else [
                f"attempts {stats.attempts:,} ({amplification:.2f}x)",
                f"{amplification:.2f}x attempts",
            ]
        )
        parts["success"] = [f"success {successes:,} ({share})", f"success {share}"]
        parts["others"] = [others, f"{failed:,} failed", ""] if failed else [""]
    parts["breaker"] = [f"breaker {_breaker_state(retrier)}"]
    budget = retrier.budget if retrier is not None else None
    if budget is not None:
        snapshots = [one.statistics() for one in _instances(budget)]  # one per host by default
        available = sum(snapshot.available for snapshot in snapshots)
        capacity = sum(snapshot.capacity for snapshot in snapshots)
        parts["budget"] = [f"budget {available:.0f}/{capacity:.0f}", ""]
    parts["upstream"] = [f"upstream {'DOWN' if outage else 'up'}", ""]

    def render() -> str:
        shown = [forms[0] for forms in parts.values() if forms[0]]
        return f"{shown[0]} " + " · ".join(shown[1:])

    line = render()
    given_up: list[tuple[str, str]] = []
    for name in _GIVE_UP:
        if width is None or len(line) <= width:
            break
        forms = parts.get(name, [])
        if len(forms) > 1:
            given_up.append((name, forms.pop(0)))
            line = render()
    # A late step can free more room than it needed: take back what fits, most useful first.
    for name, form in reversed(given_up):
        parts[name].insert(0, form)
        if len(render()) > (width or 0):
            del parts[name][0]
    return render()


def summary(
    stats: DemoStats,
    *,
    elapsed: float,
    upstream: FlakyUpstream,
    retrier: Retrier | None,
    metrics_url: str | None,
    skipped: int = 0,
    started: float | None = None,
    load_time: float | None = None,
) -> str:
    """The closing summary table.

    Args:
        stats: what the calls did.
        elapsed: seconds since the load started, the final wait for calls in flight included.
        upstream: the upstream, for its URL and response statuses.
        retrier: the transport's retrier, for the breaker and budget.
        metrics_url: where /metrics was served, if it was.
        skipped: arrivals skipped because too many calls were in flight.
        started: the monotonic time the load started, the origin of the transition times.
        load_time: how long new calls were started, for the call rate.
    """
    seconds = load_time or elapsed
    rate = stats.calls / seconds if seconds > 0 else 0.0
    latencies = sorted(stats.latencies)
    origin = time.monotonic() - elapsed if started is None else started
    transitions = " · ".join(
        f"{max(0.0, event.time - origin):.1f}s {event.previous_state} → {event.state}"
        for event in stats.transitions
    )
    denied = ", ".join(f"{reason} {count:,}" for reason, count in stats.denied.most_common())
    statuses = " · ".join(
        f"{status}: {count:,}" for status, count in sorted(upstream.statuses.items())
    )
    ratio = stats.amplification
    if ratio is None:  # "1.00x" would claim attempts that were never made
        amplification = "none: no call was let through" if stats.calls else "none: no calls"
    elif stats.rejected:
        amplification = (
            f"{ratio:.2f}x attempts per call let through "
            f"({stats.rejected:,} calls refused before any attempt made none)"
        )
    else:
        amplification = f"{ratio:.2f}x attempts per call"
    rows: list[tuple[str, str]] = [
        (
            "calls",
            f"{stats.calls:,} ({rate:.1f}/s)" + (f", {skipped:,} skipped" if skipped else ""),
        ),
        ("attempts", f"{stats.attempts:,} ({stats.retries:,} retries)"),
        ("amplification", amplification),
        ("outcomes", _outcomes(stats, with_share=True) if stats.calls else "none"),
        ("rescued", f"{stats.rescued:,} calls failed at first and succeeded on a retry"),
        ("refused", _refused(stats)),
        ("retries denied", denied or "none"),
        ("breaker", transitions or "no transitions"),
        (
            "latency",
            " · ".join(
                f"p{round(share * 100)} {human_duration(percentile(latencies, share))}"
                for share in (0.5, 0.95, 0.99)
            )
            if latencies
            else "none",
        ),
        (
            "upstream",
            f"{sum(upstream.statuses.values()):,} responses; by status {statuses or 'none'}",
        ),
    ]
    if metrics_url is not None:
        rows.append(("metrics", f"{redact_url(metrics_url)} (served while the demo ran)"))
    width = max(len(key) for key, _ in rows)
    against = redact_url(upstream.url) if upstream.url else "the upstream"
    title = f"retrymw demo: {human_duration(elapsed)} against {against}"
    lines = ["", title, "─" * len(title)]
    lines += [f"{key.ljust(width)}  {value}" for key, value in rows]
    return "\n".join(lines)
