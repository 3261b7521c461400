"""Machine description, tables (markdown, also printed) and the JSON document."""

from __future__ import annotations

import datetime as dt
import os
import platform
import resource
import statistics
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

from ._harness import DASH, TIMES, CaseResult, GroupResult, Settings, paired_ratio

if TYPE_CHECKING:
    from ._targets import Target

__all__ = ["document", "machine", "markdown"]


_PACKAGES = (
    "retrymw",
    "tenacity",
    "stamina",
    "backoff",
    "httpx",
    "httpx-retries",
    "httpcore",
    "anyio",
    "prometheus-client",
    "opentelemetry-api",
    "opentelemetry-sdk",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def machine() -> dict[str, Any]:
    """Where and with what the benchmarks ran."""
    versions = {name: _version(name) for name in _PACKAGES}
    return {
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(terse=True),
        "versions": versions,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average_at_start": [round(load, 2) for load in os.getloadavg()],
    }


def _max_rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def document(
    results: Sequence[GroupResult],
    targets: Sequence[Target],
    settings: Settings,
    info: dict[str, Any],
) -> dict[str, Any]:
    """The ``--json`` document: units are seconds per unit of work, or bytes."""
    return {
        "machine": info,
        "settings": {
            "repeats": settings.repeats,
            "sample_seconds": settings.sample_seconds,
            "quick": settings.quick,
        },
        "peak_rss_mib": round(_max_rss_mib(), 1),
        "groups": {
            result.group.name: {
                "title": result.group.title,
                "unit": result.group.unit,
                "per": result.group.per,
                "clock": result.group.clock if result.group.unit == "s" else None,
                "seconds": round(result.seconds, 2),
                "rounds": result.rounds,
                "skipped": result.skipped,
                "cases": [
                    {
                        "name": case.name,
                        "library": case.library,
                        "baseline": case.baseline,
                        "median": case.median,
                        "q1": case.q1,
                        "q3": case.q3,
                        "ratio": case.ratio,
                        "ratio_q1": case.ratio_q1,
                        "ratio_q3": case.ratio_q3,
                        "delta": case.delta,
                        "n": case.n,
                        "samples": case.samples,
                        "wall_median": statistics.median(case.wall_samples),
                        "cpu_median": statistics.median(case.cpu_samples),
                    }
                    for case in result.cases
                ],
            }
            for result in results
        },
        "targets": [target.as_dict() for target in targets],
    }


def format_time(seconds: float) -> str:
    """``412 ns``, ``3.41 µs``, ``12.3 ms``: three significant digits."""
    magnitude = abs(seconds)
    for scale, unit in ((1e-6, "ns"), (1e-3, "µs"), (1.0, "ms")):
        if magnitude < scale:
            return _three(seconds / scale * 1e3, unit)
    return _three(seconds, "s")


def format_bytes(value: float) -> str:
    """Bytes, KiB or MiB, three significant digits."""
    magnitude = abs(value)
    if magnitude < 1024:
        return f"{value:.0f} B"
    if magnitude < 1024 * 1024:
        return _three(value / 1024, "KiB")
    return _three(value / 1024 / 1024, "MiB")


def _three(value: float, unit: str) -> str:
    if abs(value) >= 100:
        return f"{value:.0f} {unit}"
    if abs(value) >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def _format(value: float, unit: str) -> str:
    return format_bytes(value) if unit == "B" else format_time(value)


def _spread(median: float, q1: float, q3: float) -> str:
    if median <= 0:
        return DASH
    return f"±{(q3 - q1) / 2 / median * 100:.1f}%"


def _cpu_ratio(case: CaseResult, base: CaseResult) -> float:
    return paired_ratio(case.cpu_samples, base.cpu_samples)[1]


def _table(result: GroupResult) -> list[str]:
    group = result.group
    base = next((case for case in result.cases if case.baseline), None)
    unit = group.unit
    clock = "" if unit == "B" else f" ({group.clock})"
    header = ["case", "library", f"median per {group.per}{clock}", "IQR"]
    header += [f"{TIMES} baseline", "Δ vs baseline"]
    if group.rate:
        header += [f"{group.per}s/s", f"client CPU per {group.per}", f"CPU {TIMES} baseline"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for case in result.cases:
        row = [
            f"**{case.name}** (baseline)" if case.baseline else case.name,
            case.library,
            _format(case.median, unit),
            _spread(case.median, case.q1, case.q3),
            DASH if case.ratio is None else f"{case.ratio:.2f}{TIMES}",
            DASH if case.baseline or case.delta is None else _signed(case.delta, unit),
        ]
        if group.rate:
            row.append(f"{1.0 / case.median:,.0f}" if case.median > 0 else DASH)
            row.append(format_time(statistics.median(case.cpu_samples)))
            row.append(DASH if base is None else f"{_cpu_ratio(case, base):.2f}{TIMES}")
        lines.append("| " + " | ".join(row) + " |")
    for name, reason in result.skipped.items():
        lines.append(f"| {name} | skipped: {reason} |" + " |" * (len(header) - 2))
    return lines


def _signed(value: float, unit: str) -> str:
    text = _format(value, unit)
    return text if text.startswith("-") else f"+{text}"


def markdown(
    results: Sequence[GroupResult],
    targets: Sequence[Target],
    settings: Settings,
    info: dict[str, Any],
    command: str,
) -> str:
    """The whole report as markdown (what ``--markdown`` writes and what is printed)."""
    versions = ", ".join(f"{name} {version}" for name, version in info["versions"].items())
    out = [
        "# retrymw benchmarks",
        "",
        f"Generated by `{command}`; do not edit by hand.",
        "",
        f"- Machine: {info['cpu']} ({info['cpus']} CPUs), {info['platform']}",
        f"- Python: {info['python']}",
        f"- Libraries: {versions}",
        f"- Date: {info['date']}; load average at start {info['load_average_at_start']}, "
        f"at end {[round(load, 2) for load in os.getloadavg()]}",
        "- Method: one process; every case of a group runs once per round, in interleaved "
        f"rounds (up to {settings.repeats}; each table says how many) of about "
        f"{settings.sample_seconds * 1e3:g} ms per case, each result checked before timing, "
        "`gc.collect()` before every sample (imported modules frozen with `gc.freeze()`); "
        "medians per unit of work. "
        "Times marked (cpu) are the benchmarking thread's CPU time "
        "(`CLOCK_THREAD_CPUTIME_ID`), which leaves out the time other processes hold the CPU "
        "(their cache and frequency effects remain); "
        "(wall) is wall time, used where a server thread and the network stack do part of the "
        "work; there the client thread's CPU time per request is shown too (the JSON has wall "
        "and CPU medians for every case). IQR is half the interquartile range "
        f"of the rounds, relative to the median; {TIMES} baseline is the median over rounds "
        "of the ratio to the baseline measured in the same round.",
        f"- Peak RSS of the benchmark process: {_max_rss_mib():.0f} MiB",
        "",
    ]
    if targets:
        out += ["## Targets", "", "| target | figure | goal | verdict |", "|---|---|---|---|"]
        out += [f"| {t.title} | {t.figure} | {t.goal} | {t.verdict} |" for t in targets]
        out.append("")
    for result in results:
        group = result.group
        out += [f"## {group.title} (`{group.name}`)", "", group.description, ""]
        out += [f"{result.rounds} rounds; the group took {result.seconds:.1f} s.", ""]
        out += _table(result)
        out.append("")
    return "\n".join(out)


README_START = "<!-- benchmarks:start -->"
README_END = "<!-- benchmarks:end -->"


def readme_section(targets: Sequence[Target], info: dict[str, Any], command: str) -> str:
    """The short results block kept in README.md between the benchmark markers."""
    versions = ", ".join(f"{name} {version}" for name, version in info["versions"].items())
    out = [
        README_START,
        f"Regenerated by `{command}` on {info['date']}: {info['cpu']} ({info['cpus']} CPUs), "
        f"{info['python']}; {versions}. Full tables in "
        "[benchmarks/RESULTS.md](benchmarks/RESULTS.md).",
        "",
        "| ratio | measured |",
        "|---|---|",
    ]
    # What a reader of the README needs is the measured figure; the goals and their verdicts
    # are the project's own business and stay in RESULTS.md.
    out += [
        f"| {t.title} | {t.figure if t.ratio is not None else 'not measured'} |" for t in targets
    ]
    out.append(README_END)
    return "\n".join(out)


def replace_readme_section(text: str, section: str) -> str:
    """Return ``text`` with the block between the markers replaced by ``section``."""
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"README has no {README_START} ... {README_END} block to replace")
    return text[:start] + section + text[end + len(README_END) :]
