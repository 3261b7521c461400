"""Smoke test of the benchmark harness: ``python -m benchmarks --quick`` runs every group.

Only the shape of the results is checked (every group, every library, positive medians, nothing
skipped); timings and ratios are never asserted, because they depend on the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PEERS = {"bare", "hand-written", "retrymw", "tenacity", "stamina", "backoff"}
EXPECTED = {
    "success-async": PEERS,
    "success-sync": PEERS,
    "failure-async": PEERS - {"bare"},
    "failure-sync": PEERS - {"bare"},
    "httpx-mock-200": {"bare", "retrymw", "httpx-retries"},
    "httpx-mock-503": {"bare", "retrymw", "httpx-retries"},
    "httpx-loopback-seq": {"bare", "retrymw", "httpx-retries"},
    "httpx-loopback-concurrent": {"bare", "retrymw", "httpx-retries"},
    "telemetry": {"bare", "retrymw", "prometheus_client", "opentelemetry"},
    "telemetry-failure": {"hand-written", "retrymw"},
    "memory-async": PEERS,
    "memory-sync": PEERS,
    "memory-breakers": {"retrymw"},
}


def test_quick_run_reports_every_group_and_library(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    markdown = tmp_path / "RESULTS.md"
    command = [sys.executable, "-m", "benchmarks", "--quick", "-q", "--json", str(out)]
    command += ["--markdown", str(markdown)]
    completed = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stderr[-4000:]

    report = json.loads(out.read_text(encoding="utf-8"))
    groups = report["groups"]
    assert set(groups) == set(EXPECTED)
    for name, libraries in EXPECTED.items():
        group = groups[name]
        assert group["skipped"] == {}, (name, group["skipped"])
        assert {case["library"] for case in group["cases"]} == libraries, name
        for case in group["cases"]:
            assert case["median"] > 0, (name, case["name"])
            assert case["samples"], (name, case["name"])
        baselines = [case for case in group["cases"] if case["baseline"]]
        assert len(baselines) == (0 if name == "memory-breakers" else 1), name

    assert report["machine"]["python"]
    assert report["machine"]["versions"]["retrymw"]
    assert {target["title"] for target in report["targets"]}, "targets are evaluated"
    text = markdown.read_text(encoding="utf-8")
    assert all(f"(`{name}`)" in text for name in EXPECTED)
