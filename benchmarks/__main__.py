"""``python -m benchmarks``: run every group (or ``--only`` some), print and save the results."""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ._harness import Group, GroupResult, Settings, run_group
from ._report import document, machine, markdown, readme_section, replace_readme_section
from ._targets import evaluate

GroupFactory = Callable[[bool], list[Group]]


def _factories() -> list[GroupFactory]:
    from . import (
        cases_core,
        cases_fleet,
        cases_http,
        cases_memory,
        cases_replay,
        cases_telemetry,
    )

    return [
        cases_core.groups,
        cases_http.groups,
        cases_telemetry.groups,
        cases_replay.groups,
        cases_memory.groups,
        cases_fleet.groups,
    ]


def all_groups(quick: bool) -> list[Group]:
    """Every group, in report order."""
    return [group for factory in _factories() for group in factory(quick)]


def _select(groups: list[Group], only: Sequence[str]) -> list[Group]:
    if not only:
        return groups
    wanted = [name.strip() for item in only for name in item.split(",") if name.strip()]
    chosen = [g for g in groups if any(g.name == w or g.name.startswith(w) for w in wanted)]
    unknown = [w for w in wanted if not any(g.name.startswith(w) for g in groups)]
    if unknown:
        names = ", ".join(g.name for g in groups)
        raise SystemExit(f"unknown group(s): {', '.join(unknown)}; known: {names}")
    return chosen


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="retrymw against tenacity, stamina, backoff and httpx-retries, side by side.",
    )
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke test")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the results as JSON")
    parser.add_argument(
        "--markdown", metavar="PATH", type=Path, help="write the report as markdown"
    )
    parser.add_argument(
        "--only",
        metavar="GROUP",
        action="append",
        default=[],
        help="run only these groups (repeatable or comma-separated; a prefix such as "
        "'success' selects success-async and success-sync)",
    )
    parser.add_argument("--repeats", type=int, help="rounds per group (default 25, quick 3)")
    parser.add_argument(
        "--sample-ms", type=float, help="target duration of one sample (default 20, quick 2)"
    )
    parser.add_argument(
        "--readme",
        metavar="PATH",
        type=Path,
        help="refresh the results block between the benchmark markers of this README",
    )
    parser.add_argument("--list", action="store_true", help="list the groups and cases, then exit")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected groups; print the markdown report; write ``--json``/``--markdown``."""
    args = _parser().parse_args(argv)
    settings = Settings(
        repeats=args.repeats or (3 if args.quick else 25),
        sample_seconds=(args.sample_ms or (2.0 if args.quick else 20.0)) / 1e3,
        quick=args.quick,
    )
    groups = _select(all_groups(args.quick), args.only)
    if args.list:
        for group in groups:
            print(f"{group.name}: {group.title}")
            for case in group.cases:
                flag = " (baseline)" if case.baseline else ""
                print(f"  {case.name} [{case.library}, {case.mode}]{flag}")
        return 0

    def log(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    info = machine()
    gc.collect()
    gc.freeze()  # imported modules are not rescanned by every collection between samples
    started = time.perf_counter()
    results: list[GroupResult] = []
    for group in groups:
        log(f"{group.name}: {len(group.cases)} cases")
        results.append(run_group(group, settings, log))
    log(f"done in {time.perf_counter() - started:.1f}s")
    targets = evaluate(results)
    command = "python -m benchmarks" + (" --quick" if args.quick else "")
    command += "".join(f" --only {name}" for name in args.only)
    command += f" --repeats {args.repeats}" if args.repeats else ""
    command += f" --sample-ms {args.sample_ms:g}" if args.sample_ms else ""
    command += f" --markdown {args.markdown.as_posix() if args.markdown else 'PATH'}"
    report = markdown(results, targets, settings, info, command)
    print(report)
    if args.markdown is not None:
        args.markdown.write_text(report, encoding="utf-8")
    if args.readme is not None:
        section = readme_section(targets, info, command.replace(" --markdown PATH", ""))
        text = args.readme.read_text(encoding="utf-8")
        args.readme.write_text(replace_readme_section(text, section), encoding="utf-8")
    if args.json is not None:
        payload = document(results, targets, settings, info)
        args.json.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
