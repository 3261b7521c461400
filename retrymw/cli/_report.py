"""What the demo shows: its statistics instrument, the console, the progress line and summary."""

from __future__ import annotations

import math
import shutil
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from .._core.events import (
    AttemptFinished,
    BreakerStateChanged,
    CallFinished,
    RetryDenied,
    RetryScheduled,
)
from ..instrumentation import Instrument
from ._common import human_duration, percent

if TYPE_CHECKING:
    from .._core.retrier import Retrier
    from ._trace import CallTrace
    from ._upstream import FlakyUpstream

__all__ = ["Console", "DemoStats", "percentile", "progress_line", "summary"]

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
_TRACES_PER_SECOND = 2


class DemoStats(Instrument):
    """Counts what the demo's calls do, from the same events the other instruments get.

    Args:
        on_transition: called with every breaker transition as it happens.

    Attributes:
        calls: finished calls.
        rejected: calls the breaker rejected before any attempt.
        rescued: calls that succeeded on a retry.
        attempts: finished attempts.
        retries: retries scheduled.
        outcomes: calls by outcome.
        denied: denied retries by reason.
        transitions: every breaker transition, in order.
        latencies: durations of the latest calls, in seconds.
    """

    def __init__(self, on_transition: Callable[[BreakerStateChanged], None] | None = None) -> None:
        self._on_transition = on_transition
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
        """Count the denial by reason."""
        self.denied[event.reason] += 1

    def call_finished(self, event: CallFinished, /) -> None:
        """Count the call by outcome and keep its duration."""
        self.calls += 1
        self.rejected += event.attempts == 0
        self.rescued += event.outcome == "success" and event.attempts > 1
        self.outcomes[event.outcome] += 1
        self.latencies.append(event.duration)

    def breaker_state_changed(self, event: BreakerStateChanged, /) -> None:
        """Keep the transition and pass it on."""
        self.transitions.append(event)
        if self._on_transition is not None:
            self._on_transition(event)

    @property
    def amplification(self) -> float:
        """Attempts per call (1.0 before the first call)."""
        return self.attempts / self.calls if self.calls else 1.0

    @property
    def amplification_admitted(self) -> float:
        """Attempts per call that made at least one attempt (not rejected by the breaker)."""
        admitted = self.calls - self.rejected
        return self.attempts / admitted if admitted else 1.0


class Console:
    """Writes the demo's lines, and a progress line that a terminal redraws in place.

    On a terminal the progress line is rewritten in place and other lines print above it; when
    stdout is a pipe or a file every progress update is a plain line. Every write is flushed,
    so a reader of the pipe sees the metrics URL at once.

    Args:
        stream: where to write.
        tty: whether ``stream`` is a terminal.
        traces: ``"interesting"`` (retried or failed calls, at most 2 a second), ``"all"`` or
            ``"none"``.
    """

    def __init__(self, stream: TextIO, *, tty: bool, traces: str = "interesting") -> None:
        self.stream = stream
        self.tty = tty
        self.traces = traces
        self.suppressed = 0
        self.printed = 0
        self._status = ""
        self._second = -1
        self._in_second = 0

    def line(self, text: str) -> None:
        """Print ``text`` on its own line (above the progress line on a terminal)."""
        if self.tty and self._status:
            self.stream.write(f"\r\x1b[2K{text}\n{self._status}")
        else:
            self.stream.write(f"{text}\n")
        self.stream.flush()

    def status(self, text: str) -> None:
        """Show the progress line, cut to the terminal's width (a wrapped one cannot be redrawn)."""
        if self.tty:
            width = shutil.get_terminal_size().columns - 1
            if len(text) > width:
                text = text[: max(0, width - 1)] + "…"
            self._status = text
            self.stream.write(f"\r\x1b[2K{text}")
        else:
            self.stream.write(f"{text}\n")
        self.stream.flush()

    def trace(self, trace: CallTrace, elapsed: float) -> None:
        """Print a call's trace line if the ``traces`` setting wants it."""
        if self.traces == "none":
            return
        if self.traces == "interesting":
            if trace.outcome == "success" and trace.attempts <= 1:
                return
            if trace.attempts == 0:  # rejected by the open circuit: the progress line counts them
                return
            second = int(elapsed)
            if second != self._second:
                self._second, self._in_second = second, 0
            if self._in_second >= _TRACES_PER_SECOND:
                self.suppressed += 1
                return
            self._in_second += 1
        self.printed += 1
        self.line(f"[{elapsed:6.1f}s] {trace.render()}")

    def finish(self) -> None:
        """End the progress line so that what follows starts on a fresh line."""
        if self.tty and self._status:
            self.stream.write("\n")
            self._status = ""
        self.stream.flush()


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile of sorted ``values`` (``share`` in ``[0, 1]``)."""
    if not values:
        return 0.0
    rank = max(1, min(len(values), math.ceil(share * len(values))))
    return values[rank - 1]


def _outcomes(stats: DemoStats, *, with_share: bool) -> str:
    shown = []
    for outcome in (*_OUTCOME_ORDER, *sorted(set(stats.outcomes) - set(_OUTCOME_ORDER))):
        count = stats.outcomes.get(outcome, 0)
        if count or outcome == "success":
            text = f"{outcome} {count:,}"
            if with_share and stats.calls:
                text += f" ({percent(count / stats.calls)})"
            shown.append(text)
    return " · ".join(shown)


def _breaker_state(retrier: Retrier | None) -> str:
    registry = retrier.breakers if retrier is not None else None
    if registry is None:
        return "none"
    states = {stats.state for stats in registry.statistics().values()}
    return "/".join(sorted(states)) or "closed"


def progress_line(elapsed: float, stats: DemoStats, retrier: Retrier | None, outage: bool) -> str:
    """One line: time, upstream, breaker, budget, calls, attempts, amplification, outcomes.

    The longest part comes last, so that a terminal too narrow for the line loses the least.
    """
    parts = [
        f"[{elapsed:6.1f}s] upstream {'DOWN' if outage else 'up'}",
        f"breaker {_breaker_state(retrier)}",
    ]
    budget = retrier.budget if retrier is not None else None
    if budget is not None:
        snapshot = budget.statistics()
        parts.append(f"budget {snapshot.available:.0f}/{snapshot.capacity:.0f}")
    parts += [
        f"calls {stats.calls:,}",
        f"attempts {stats.attempts:,} ({stats.amplification:.2f}x)",
        _outcomes(stats, with_share=False),
    ]
    return " · ".join(parts)


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
    amplification = f"{stats.amplification:.2f}x attempts per call"
    if stats.rejected:
        amplification += (
            f" ({stats.amplification_admitted:.2f}x for the {stats.calls - stats.rejected:,} "
            "calls the breaker let through)"
        )
    rows: list[tuple[str, str]] = [
        (
            "calls",
            f"{stats.calls:,} ({rate:.1f}/s)" + (f", {skipped:,} skipped" if skipped else ""),
        ),
        ("attempts", f"{stats.attempts:,} ({stats.retries:,} retries)"),
        ("amplification", amplification),
        ("outcomes", _outcomes(stats, with_share=True)),
        ("rescued", f"{stats.rescued:,} calls failed at first and succeeded on a retry"),
        ("retries denied", denied or "none"),
        ("breaker", transitions or "no transitions"),
        (
            "latency",
            " · ".join(
                f"p{round(share * 100)} {human_duration(percentile(latencies, share))}"
                for share in (0.5, 0.95, 0.99)
            ),
        ),
        (
            "upstream",
            f"{sum(upstream.statuses.values()):,} responses; by status {statuses or 'none'}",
        ),
    ]
    if metrics_url is not None:
        rows.append(("metrics", f"{metrics_url} (served while the demo ran)"))
    width = max(len(key) for key, _ in rows)
    title = f"retrymw demo: {human_duration(elapsed)} against {upstream.url or 'the upstream'}"
    lines = ["", title, "─" * len(title)]
    lines += [f"{key.ljust(width)}  {value}" for key, value in rows]
    return "\n".join(lines)
