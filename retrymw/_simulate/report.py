"""What the simulator's figures are reported with: the tables and `jitter_spread`.

`render_table` lays `SimulationResult` rows out as plain text or Markdown, `render_comparison`
the situation-by-setup rows of `compare`, `render_frontier` the setups of `frontier`;
`jitter_spread` measures how spread out one jitter kind's delays are once the cap binds,
through the real `RetryPolicy.decide`. Neither runs the discrete-event loop, so they live
apart from it; `retrymw.simulate` re-exports and presents them.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._core.backoff import JitterKind
from .._core.events import Outcome
from .._core.policy import CallState, Retry, RetryPolicy

if TYPE_CHECKING:
    from .engine import Comparison, FrontierPoint, SimulationResult
    from .ratelimit import RateLimitResult

__all__ = [
    "JitterSpread",
    "jitter_spread",
    "render_comparison",
    "render_frontier",
    "render_rate_limit",
    "render_table",
]


@dataclass(frozen=True, slots=True)
class JitterSpread:
    """How spread out one jitter kind's delays are once the cap binds.

    Attributes:
        kind: the jitter kind.
        mean: mean delay in seconds.
        cv: coefficient of variation (standard deviation / mean).
        share_at_cap: share of draws exactly equal to ``max_delay``.
    """

    kind: JitterKind
    mean: float
    cv: float
    share_at_cap: float


def jitter_spread(
    kind: JitterKind, *, retry: int = 10, draws: int = 20_000, seed: int = 0
) -> JitterSpread:
    """Draw the delay before retry ``retry`` through `RetryPolicy.decide` (1 s base, 30 s cap).

    Each draw replays a whole call, so decorrelated jitter sees its real previous delays.
    """
    policy = RetryPolicy(attempts=retry + 1, jitter=kind, initial_delay=1.0, max_delay=30.0)
    from .engine import SimulatedFailure  # simulate re-exports this module: import it late

    rng = random.Random(f"{seed}:{kind}")
    error = SimulatedFailure()
    delays = []
    for _ in range(draws):
        state = CallState(0.0)
        for attempt in range(1, retry + 1):
            state.attempt = attempt
            decision = policy.decide(state, Outcome(attempt, 0.0, error), now=0.0, rng=rng)
            assert isinstance(decision, Retry)
            state.last_delay = decision.delay
        delays.append(state.last_delay or 0.0)
    mean = statistics.fmean(delays)
    return JitterSpread(
        kind=kind,
        mean=mean,
        cv=statistics.pstdev(delays) / mean if mean else 0.0,
        share_at_cap=sum(delay == policy.max_delay for delay in delays) / draws,
    )


_HEADER: tuple[str, ...] = (
    *("scenario", "calls", "amplif.", "success", "peak/100ms", "retries ok/denied"),
    *("open", "to open", "recover"),
)


def render_table(results: Iterable[SimulationResult], *, markdown: bool = False) -> str:
    """Render results as a plain-text (or Markdown) table, one scenario per line."""
    rows = [_HEADER]
    for result in results:
        opened, recover = result.time_to_open, result.time_to_recover
        rows.append(
            (
                result.scenario.name,
                str(result.calls),
                f"{result.amplification:.3f}",
                f"{result.success_rate:.4f}",
                str(result.peak_attempts_per_100ms),
                f"{result.retries_admitted}/{result.retries_denied}",
                f"{result.breaker_open_fraction:.1%}",
                "-" if opened is None else f"{opened:.2f}s/{result.calls_to_open} calls",
                "-" if recover is None else f"{recover:.2f}s",
            )
        )
    return _layout(rows, markdown=markdown)


_COMPARISON: tuple[str, ...] = (
    *("situation", "setup", "success", "amplif.", "shed 10s+", "goodput/s"),
    *("herd", "retry herd", "recovered"),
)


def render_comparison(rows: Iterable[Comparison], *, markdown: bool = False) -> str:
    """Render `compare`'s rows: one situation and setup per line.

    Columns: success and amplification of the calls arriving during the fault, the share of
    those arriving from 10 s into it that a throttle shed, goodput (successful calls per
    second of the fault), the herd factors of all attempts and of retries alone, and the time
    for success to stay >= 0.99 after the fault (see `SimulationResult`).
    """
    table = [_COMPARISON]
    for row in rows:
        result = row.result
        recovered = result.recovered_in
        table.append(
            (
                row.situation,
                row.setup,
                f"{result.success_rate:.4f}",
                f"{result.amplification:.3f}",
                f"{result.shed_from_10s:.1%}",
                f"{result.goodput:.1f}",
                f"{result.herd_factor:.2f}",
                f"{result.retry_herd_factor:.2f}",
                "-" if recovered is None else f"{recovered:.0f}s",
            )
        )
    return _layout(table, markdown=markdown)


def render_frontier(points: Iterable[FrontierPoint], *, markdown: bool = False) -> str:
    """Lay out `frontier` points: one line per setup, blip rescue against outage costs."""
    rows: list[tuple[str, ...]] = [
        ("setup", "3s blip: success", "10s outage", "10s, 1000 clients", "120s outage", "recovered")
    ]
    rows += [
        (
            point.setup,
            f"{point.blip_success:.3f}",
            f"{point.outage_10s:.3f}x",
            f"{point.clients_10s:.3f}x",
            f"{point.outage_120s:.3f}x",
            f"{point.recovered_in:g}s",
        )
        for point in points
    ]
    return _layout(rows, markdown=markdown)


def render_rate_limit(results: Iterable[RateLimitResult], *, markdown: bool = False) -> str:
    """Lay out rate-limited runs: one line per pacing setup (see `RateLimitResult`)."""
    rows: list[tuple[str, ...]] = [
        ("setup", "offered/s", "attempts", "429s", "served/s", "calls ok", "wait p50", "wait p99")
    ]
    rows += [
        (
            result.scenario.name,
            f"{result.offered:g}",
            str(result.attempts),
            f"{result.throttled_share:.1%}",
            f"{result.served:.1f}",
            f"{result.succeeded}/{result.calls}",
            f"{result.wait_p50:.2f}s",
            f"{result.wait_p99:.2f}s",
        )
        for result in results
    ]
    return _layout(rows, markdown=markdown)


def _layout(rows: list[tuple[str, ...]], *, markdown: bool) -> str:
    """Lay rows out in columns: text columns (the first ones) left, numbers right."""
    header = rows[0]
    texts = 2 if header is _COMPARISON else 1
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    edge, gap = ("| ", " | ") if markdown else ("", "  ")
    lines = [
        edge
        + gap.join(
            cell.ljust(width) if column < texts else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        + edge[::-1]
        for row in rows
    ]
    rule = [
        ("-" * (width - 1) + ":") if column >= texts else "-" * width
        for column, width in enumerate(widths)
    ]
    lines.insert(1, edge + gap.join(rule if markdown else ["-" * w for w in widths]) + edge[::-1])
    return "\n".join(line.rstrip() for line in lines)
