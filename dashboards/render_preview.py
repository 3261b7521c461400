"""Render dashboards/preview.png: every panel of the overview, from a real Prometheus.

Plays the end-to-end test's six incident shapes (a healthy baseline, brief outages, a 3-minute
outage, a 10% brownout, one dead host of five, a 429 overload; 18 minutes on virtual time) into a
real ``prometheus`` on 127.0.0.1, runs each panel's own queries on the Prometheus path's data and
draws every panel where the dashboard puts it, with matplotlib (the ``preview`` dependency
group)::

    .venv/bin/python -m dashboards.render_preview            # writes dashboards/preview.png
    .venv/bin/python -m dashboards.render_preview --output /tmp/preview.png
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests import prometheus_harness as harness

BACKGROUND, PANEL, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"
PALETTE = ("#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#705da0")
STATE_COLORS = {0: "#73bf69", 1: "#fade2a", 2: "#f2495c"}
#: Grafana's variables on the compressed clock (the harness scales ranges and rates).
VARIABLES = {
    "job": ".+",
    "instance": ".+",
    "policy": ".+",
    "target": ".+",
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": f"{round(harness.INCIDENT_SECONDS)}s",
}
#: The Prometheus path's job: the OpenTelemetry path's tells the same story twice.
JOB = harness.JOB
#: The figure: 20 inches wide at 80 dpi, 0.42 inch per grid row under a 0.8 inch header.
WIDTH, DPI, UNIT_HEIGHT, HEADER = 20.0, 80, 0.42, 0.8
Series = list[tuple[str, list[float], list[float]]]
#: A table panel's instant results: (the series' labels, the target's column name, value).
Cells = list[tuple[dict[str, str], str, float]]


def legend(template: str, labels: dict[str, str]) -> str:
    """Expand a Grafana ``{{label}}`` legend template."""
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), template)
    return text if text and text != "__auto" else ",".join(labels.values()) or "value"


def expression(expr: str) -> str:
    """A panel expression with the variables filled in (the Prometheus path's job)."""
    return harness.substitute(expr, {**VARIABLES, "job": JOB})


def fetch(live: harness.IncidentStack, panel: dict[str, Any]) -> Series:
    """A panel's series as (legend, virtual minutes since start, values)."""
    found: Series = []
    for target in panel["targets"]:
        expr = expression(target["expr"])
        template = target.get("legendFormat", "")
        results: Series = []
        if target.get("instant"):
            for result in live.prometheus.query(expr, live.end):
                name = legend(template, result["metric"])
                results.append((name, [], [float(result["value"][1])]))
        else:
            for result in live.prometheus.query_range(expr, live.start, live.end, 15):
                # Minutes since the start of the run.
                xs = [(float(t) - live.start) / 60 for t, _ in result["values"]]
                ys = [float(v) for _, v in result["values"]]
                results.append((legend(template, result["metric"]), xs, ys))
        if target.get("format") == "heatmap":
            found.extend(buckets(results))  # in bucket order, as Grafana shows them
        else:
            found.extend(sorted(results))
    return found


def buckets(series: Series) -> Series:
    """Grafana's ``heatmap`` query format: cumulative ``le`` buckets (named by their bound)
    sorted by bound and de-accumulated, each one counting what falls between the bound below
    and its own; every bucket on the same steps (0 where a series has no point)."""
    ordered = sorted(series, key=lambda item: float(item[0]))
    steps = sorted({x for _, xs, _ in ordered for x in xs})
    found: Series = []
    below = [0.0] * max(len(steps), 1)
    for name, xs, ys in ordered:
        if steps:
            points = dict(zip(xs, ys, strict=True))
            values = [points.get(x, 0.0) for x in steps]
        else:  # an instant query's one value
            values = ys[-1:]
        found.append((name, steps, [y - b for y, b in zip(values, below, strict=True)]))
        below = values
    return found


def fetch_cells(live: harness.IncidentStack, panel: dict[str, Any]) -> Cells:
    """A table panel's cells: each target's instant result, its legend naming the column."""
    return [
        (
            {k: v for k, v in result["metric"].items() if k not in ("job", "instance")},
            target.get("legendFormat", ""),
            float(result["value"][1]),
        )
        for target in panel["targets"]
        for result in live.prometheus.query(expression(target["expr"]), live.end)
    ]


def _format(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return "n/a"
    if unit == "percentunit":
        return f"{value:.1%}"
    if unit == "reqps":
        return f"{value:.2f}/s"
    if unit == "s":
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
    return f"{value:.2f}"


def grid_rows(dashboard: dict[str, Any]) -> int:
    """How many grid rows the dashboard's panels take, top to bottom."""
    return max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in harness.panels(dashboard, rows=True))


def size(dashboard: dict[str, Any]) -> tuple[int, int]:
    """The preview's width and height in pixels for the dashboard's layout.

    Matplotlib's Agg canvas truncates a figure's size in pixels; so does this, past a float
    error's worth (115 rows: 3927.9999999999995 here, 3928 pixels in matplotlib's product).
    """
    height = (grid_rows(dashboard) * UNIT_HEIGHT + HEADER) * DPI
    return int(WIDTH * DPI), int(height + 1e-6)


def render(
    dashboard: dict[str, Any], data: dict[int, Series], tables: dict[int, Cells], output: Path
) -> None:
    """Draw every panel at its grid position, in a Grafana-like dark theme, and save a PNG.

    ``data`` holds the series of every panel but the tables, ``tables`` the tables' cells.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 8,
            "text.color": TEXT,
            "axes.labelcolor": TEXT,
            "xtick.color": TEXT,
            "ytick.color": TEXT,
            "axes.edgecolor": GRID,
        }
    )
    items = harness.panels(dashboard, rows=True)
    bottom = grid_rows(dashboard)
    height_inches = bottom * UNIT_HEIGHT + HEADER
    figure = plt.figure(figsize=(WIDTH, height_inches), dpi=DPI, facecolor=BACKGROUND)
    figure.suptitle(
        "retrymw / Overview: brief outages · 3-min outage · 10% brownout · dead host of five · "
        "429 overload; real Prometheus data, x axis in minutes",
        color=TEXT,
        fontsize=14,
        x=0.01,
        y=1 - 0.3 / height_inches,  # inside the header: the first row's title is just below
        ha="left",
        va="center",
    )
    top = 1 - HEADER / height_inches
    for panel in items:
        pos = panel["gridPos"]
        left, width = pos["x"] / 24, pos["w"] / 24
        height = pos["h"] / bottom * top
        y = top - (pos["y"] + pos["h"]) / bottom * top
        if panel["type"] == "row":
            figure.text(left + 0.003, y + height / 2, panel["title"], fontsize=12, va="center")
            continue
        # Room on the left for the y tick labels, which matplotlib draws outside the axes.
        axes = figure.add_axes((left + 0.022, y + 0.012, width - 0.028, height - 0.03))
        axes.set_facecolor(PANEL)
        axes.set_title(panel["title"], loc="left", color=TEXT, fontsize=9)
        if panel["type"] == "table":
            _table(axes, panel, tables[panel["id"]])
        else:
            _draw(axes, panel, data[panel["id"]])
    figure.savefig(output, facecolor=BACKGROUND)
    plt.close(figure)


def _draw(axes: Any, panel: dict[str, Any], series: Series) -> None:
    unit = panel["fieldConfig"]["defaults"].get("unit", "none")
    kind = panel["type"]
    if kind == "stat":
        value = series[0][2][-1] if series else math.nan
        axes.text(0.5, 0.45, _format(value, unit), ha="center", va="center", fontsize=22)
        axes.set_axis_off()
        return
    if kind == "bargauge":
        names = [name for name, _, _ in series]
        values = [ys[-1] if ys else 0.0 for _, _, ys in series]
        axes.barh(names, values, color="#5794f2")
        axes.tick_params(labelsize=7)
        return
    axes.grid(color=GRID, linewidth=0.5)
    axes.set_axisbelow(True)
    if kind == "state-timeline":
        for row, (name, xs, ys) in enumerate(series):
            for x, value in zip(xs, ys, strict=True):
                color = STATE_COLORS.get(int(value), GRID)
                axes.broken_barh([(x, 0.25)], (row + 0.1, 0.8), color=color)
            axes.text(0.1, row + 0.5, name, va="center", fontsize=8, color=BACKGROUND)
        axes.set_yticks([])
        return
    if kind == "heatmap" and series:
        # One row per bucket, in bound order, coloured by its count at each step, as Grafana.
        rows = range(len(series))
        counts = [ys for _, _, ys in series]
        axes.pcolormesh(series[0][1], rows, counts, cmap="inferno", shading="nearest")
        axes.set_yticks(rows, [name for name, _, _ in series], fontsize=6)
        return
    for index, (name, xs, ys) in enumerate(series[:12]):
        axes.plot(xs, ys, linewidth=1.2, label=name, color=PALETTE[index % len(PALETTE)])
    if unit == "percentunit":
        import matplotlib.ticker

        axes.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    if series and kind != "heatmap":
        axes.legend(fontsize=6, frameon=False, labelcolor=TEXT, loc="upper left", ncol=3)


def _table(axes: Any, panel: dict[str, Any], cells: Cells) -> None:
    """Draw a table as Grafana shows it: one row per label set.

    The targets are merged on their labels, each target's legend naming its column, in the
    unit its override gives; a table whose ``organize`` transformation hides ``Value`` (the
    policy info table) shows only its labels.
    """
    axes.set_axis_off()
    (organize,) = [t["options"] for t in panel["transformations"] if t["id"] == "organize"]
    renamed: dict[str, str] = organize.get("renameByName", {})
    labels_only = bool(organize.get("excludeByName", {}).get("Value"))
    units = {
        override["matcher"]["options"]: prop["value"]
        for override in panel["fieldConfig"].get("overrides", [])
        for prop in override["properties"]
        if prop["id"] == "unit"
    }
    keys = sorted({key for labels, _, _ in cells for key in labels})
    columns = [] if labels_only else [t.get("legendFormat", "") for t in panel["targets"]]
    unit_of = {
        target.get("legendFormat", ""): units.get(f"Value #{target['refId']}", "none")
        for target in panel["targets"]
    }
    rows: dict[tuple[str, ...], dict[str, str]] = {}
    for labels, column, value in cells:
        row = rows.setdefault(tuple(labels.get(key, "") for key in keys), {})
        if column in columns:
            row[column] = _format(value, unit_of[column])
    header = [_short(renamed.get(key, key)) for key in keys]
    widths = [
        max(len(text) for text in (name, *(row[i] for row in rows)))
        for i, name in enumerate(header)
    ]
    width = max((len(column) for column in columns), default=0) + 3

    def line(texts: tuple[str, ...] | list[str], values: list[str]) -> str:
        left = "  ".join(f"{text:<{w}}" for text, w in zip(texts, widths, strict=True))
        return left + "".join(f"{value:>{width}}" for value in values)

    lines = [line(header, columns)]
    lines += [line(key, [row.get(c, "") for c in columns]) for key, row in sorted(rows.items())]
    axes.text(0.01, 0.95, "\n".join(lines[:12]), va="top", family="monospace", fontsize=9)


def _short(label: str) -> str:
    """A label name as a column header: ``retrymw_policy_max_delay`` → ``max_delay``."""
    return label.removeprefix("retrymw_policy_").removeprefix("retrymw_")


def main(argv: list[str] | None = None) -> int:
    """Play the incidents, query Prometheus for every panel and write the PNG."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=harness.ROOT / "dashboards/preview.png")
    args = parser.parse_args(argv)
    binary = shutil.which("prometheus")
    if binary is None:
        print("prometheus not found: apt-get install prometheus", file=sys.stderr)
        return 1
    dashboard = harness.load_dashboard()
    panels = harness.panels(dashboard)
    with (
        tempfile.TemporaryDirectory() as workdir,
        harness.incident_stack(binary, Path(workdir)) as live,
    ):
        data = {p["id"]: fetch(live, p) for p in panels if p["type"] != "table"}
        tables = {p["id"]: fetch_cells(live, p) for p in panels if p["type"] == "table"}
    empty = [p["title"] for p in panels if not (data.get(p["id"]) or tables.get(p["id"]))]
    if empty:
        print(f"no data for: {', '.join(empty)}", file=sys.stderr)
        return 1
    render(dashboard, data, tables, args.output)
    print(f"wrote {args.output} ({len(data) + len(tables)} panels)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
