"""Render dashboards/preview.png: the overview's key panels, from a real Prometheus.

Plays the test harness's storyline (healthy → brownout → outage → recovery) against a real
``prometheus`` on 127.0.0.1, runs the dashboard's own panel queries with ``query_range``, and
draws them with matplotlib (install it with ``pip install matplotlib``)::

    .venv/bin/python -m dashboards.render_preview            # writes dashboards/preview.png
    .venv/bin/python -m dashboards.render_preview --seconds 30 --output /tmp/preview.png
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests import prometheus_harness as harness

#: The panels drawn, by dashboard title, in reading order (two rows of three).
PANELS = (
    "Amplification (attempts per call)",
    "Calls/s by outcome",
    "Retries denied/s by reason",
    "Call success ratio",
    "Retry budget available",
    "Circuit state",
)
COLORS = {
    "success": "#73bf69",
    "retried": "#fade2a",
    "failed": "#f2495c",
    "exhausted": "#ff9830",
    "throttled": "#b877d9",
    "budget_exhausted": "#fade2a",
    "circuit_open": "#f2495c",
    "deadline_exceeded": "#8f3bb8",
    "failure": "#8e8e8e",
    "cancelled": "#5794f2",
    "max_attempts": "#ff9830",
}
STATE_COLORS = {0: "#73bf69", 1: "#fade2a", 2: "#f2495c"}
STATE_NAMES = {0: "closed", 1: "half_open", 2: "open"}
PHASE_SHADES = {"healthy": 0.0, "brownout": 0.05, "outage": 0.11, "recovery": 0.0}
BACKGROUND, PANEL, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"


def legend(template: str, labels: dict[str, str]) -> str:
    """Expand a Grafana ``{{label}}`` legend template."""
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), template)
    return text if text and text != "__auto" else ",".join(labels.values()) or "value"


def fetch(
    live: harness.LiveStack, step: float
) -> dict[str, list[tuple[str, list[float], list[float]]]]:
    """Each panel's series as (legend, seconds since start, values), from query_range."""
    by_title = {panel["title"]: panel for panel in harness.panels(harness.load_dashboard())}
    values = {"__rate_interval": "5s", "__range": "5m", "__interval": f"{step:g}s"}
    values |= {"job": ".+", "instance": ".+", "policy": ".+", "target": ".+"}
    start, end = live.start, live.end + 2 * step
    panels: dict[str, list[tuple[str, list[float], list[float]]]] = {}
    for title in PANELS:
        series = []
        for target in by_title[title]["targets"]:
            expr = harness.substitute(target["expr"], values)
            for result in live.prometheus.query_range(expr, start, end, step):
                xs = [float(t) - live.start for t, _ in result["values"]]
                ys = [float(v) for _, v in result["values"]]
                series.append((legend(target.get("legendFormat", ""), result["metric"]), xs, ys))
        panels[title] = sorted(series)
    return panels


def render(
    panels: dict[str, list[tuple[str, list[float], list[float]]]],
    duration: float,
    output: Path,
) -> None:
    """Draw the panels in a Grafana-like dark theme and save a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 10,
            "text.color": TEXT,
            "axes.labelcolor": TEXT,
            "xtick.color": TEXT,
            "ytick.color": TEXT,
            "axes.edgecolor": GRID,
        }
    )
    figure, grid = plt.subplots(2, 3, figsize=(16, 8.6), dpi=100, facecolor=BACKGROUND)
    figure.suptitle(
        "retrymw / Overview: healthy → brownout → outage → recovery "
        "(live Prometheus data; x axis in seconds)",
        color=TEXT,
        fontsize=14,
        x=0.01,
        ha="left",
    )
    for axes, title in zip(grid.flat, PANELS, strict=True):
        axes.set_facecolor(PANEL)
        axes.set_title(title, loc="left", color=TEXT, fontsize=11)
        axes.grid(color=GRID, linewidth=0.6)
        axes.set_xlim(0, duration)
        _phases(axes, duration)
        series = panels[title]
        if title == "Circuit state":
            _state_timeline(axes, series)
        elif title in ("Calls/s by outcome", "Retries denied/s by reason"):
            _stacked(axes, series)
        else:
            for name, xs, ys in series:
                axes.plot(xs, ys, linewidth=1.6, label=name, color=COLORS.get(name))
        if title == "Amplification (attempts per call)":
            # Below 1 while the circuit is open: short-circuited calls make no attempt at all.
            axes.axhline(1.0, color="#8e8e8e", linewidth=0.8, linestyle="--")
        if title == "Call success ratio":
            axes.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        axes.set_axisbelow(True)
        if series:
            axes.legend(
                fontsize=8,
                frameon=False,
                labelcolor=TEXT,
                loc="upper center",
                bbox_to_anchor=(0.5, -0.09),
                ncol=3,
            )
    figure.tight_layout(rect=(0, 0, 1, 0.95), h_pad=2.5)
    figure.savefig(output, facecolor=BACKGROUND)
    plt.close(figure)


def _phases(axes: Any, duration: float) -> None:
    for phase in harness.STORY:
        left = phase.start / harness.STORY_SECONDS * duration
        right = phase.end / harness.STORY_SECONDS * duration
        shade = PHASE_SHADES[phase.name]
        if shade:
            axes.axvspan(left, right, color="#f2495c", alpha=shade, linewidth=0)
        axes.text(
            (left + right) / 2,
            0.97,
            phase.name,
            transform=axes.get_xaxis_transform(),
            ha="center",
            va="top",
            zorder=10,
            fontsize=7,
            color="#8e8e8e",
        )


def _stacked(axes: Any, series: list[tuple[str, list[float], list[float]]]) -> None:
    shown = [(name, xs, ys) for name, xs, ys in series if max(ys, default=0.0) > 0.0]
    if not shown:
        return
    # Series share one step grid but may start late: align them on the union of timestamps.
    times = sorted({x for _, xs, _ in shown for x in xs})
    stacks = [[dict(zip(xs, ys, strict=True)).get(t, 0.0) for t in times] for _, xs, ys in shown]
    colors = [COLORS.get(name, "#5794f2") for name, _, _ in shown]
    labels = [name for name, _, _ in shown]
    axes.stackplot(times, *stacks, labels=labels, colors=colors, alpha=0.85, linewidth=0)


def _state_timeline(axes: Any, series: list[tuple[str, list[float], list[float]]]) -> None:
    for row, (name, xs, ys) in enumerate(series):
        for x, y in zip(xs, ys, strict=True):
            axes.broken_barh([(x - 0.5, 1.0)], (row + 0.1, 0.8), color=STATE_COLORS[int(y)])
        axes.text(0.5, row + 0.5, name, va="center", fontsize=9, color=TEXT)
    axes.set_yticks([])
    axes.set_ylim(0, max(1, len(series)))
    for state, label in STATE_NAMES.items():
        axes.bar(0, 0, color=STATE_COLORS[state], label=label)


def main(argv: list[str] | None = None) -> int:
    """Play the storyline, query Prometheus and write the PNG."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=harness.ROOT / "dashboards/preview.png")
    parser.add_argument("--seconds", type=float, default=60.0, help="real time of the storyline")
    args = parser.parse_args(argv)
    binary = shutil.which("prometheus")
    if binary is None:
        print("prometheus not found: apt-get install prometheus", file=sys.stderr)
        return 1
    with (
        tempfile.TemporaryDirectory() as workdir,
        harness.live_stack(binary, Path(workdir), seconds=args.seconds) as live,
    ):
        panels = fetch(live, step=1.0)
    render(panels, args.seconds, args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
