"""``retrymw demo --fleet``: real client processes sharing a budget on a redis-server it starts.

The runs are real (a redis-server, the upstream, four client processes) and bounded: a 3 s load
with a 1 s outage. redis-server is stopped by its pid at the end, also after a Ctrl-C.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from retrymw.cli import main
from tests.redis_server import redis_server
from tests.system import process_gone, require_binary

REPO = Path(__file__).resolve().parents[3]
WAIT = 120.0  # the longest a run may take; these take ~5-8 s
RUN = ["--fleet", "2", "--duration", "3s", "--outage", "1s:1500ms", "--rate", "5"]
AMPLIFICATION = r"fleet amplification, {}: (\d+\.\d{{3}})x"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RETRYMW_"))}
    return {**env, "PYTHONIOENCODING": "utf-8", **extra}


def _redis_pid(out: str) -> int:
    found = re.search(r"redis: redis://127\.0\.0\.1:\d+/0 \(redis-server pid (\d+),", out)
    assert found, out
    return int(found.group(1))


def test_fleet_demo_compares_shared_and_per_process_budgets() -> None:
    require_binary("redis-server")
    done = subprocess.run(
        [sys.executable, "-m", "retrymw", "demo", *RUN],
        capture_output=True, text=True, timeout=WAIT, cwd=REPO, env=_env(), check=False,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, (out, done.stderr)
    assert process_gone(_redis_pid(out))
    assert "upstream outage begins" in out
    assert "upstream outage ends" in out
    # Both groups reported and counted the same calls: those scheduled in the outage, calls
    # 5 to 12 of each process (5 calls/s, outage from 1 s to 2.5 s), 2 processes each.
    row = r"^(shared budget \(fleet\)|per-process budgets) +2/2 +(\d+) +(\d+)"
    rows = re.findall(row, out, re.MULTILINE)
    assert len(rows) == 2, out
    assert [int(calls) for _, calls, _ in rows] == [16, 16], out
    for _, calls, attempts in rows:
        assert int(calls) <= int(attempts) <= 4 * int(calls)

    shared = re.search(AMPLIFICATION.format(r"shared budget \(fleet\)"), out)
    alone = re.search(AMPLIFICATION.format("per-process budgets"), out)
    assert shared, out
    assert alone, out
    # The amplification lines agree with the table's counts.
    for (_, calls, attempts), line in zip(rows, (shared, alone), strict=True):
        assert float(line.group(1)) == pytest.approx(int(attempts) / int(calls), abs=0.001)
    assert re.search(r"^measured: sharing (made \d+ fewer|did not lower)", out, re.MULTILINE)
    # The shared group's processes found each other on the store.
    assert re.search(r"fleet health: 2 members seen, 0 degraded at the end, \d+ budget", out)


def test_ctrl_c_stops_the_clients_and_redis_and_still_reports() -> None:
    require_binary("redis-server")
    process = subprocess.Popen(
        [sys.executable, "-m", "retrymw", "demo", *RUN[:2], "--duration", "30s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=_env(),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        seen = []
        for line in process.stdout:  # bounded: the run ends after 30 s anyway
            seen.append(line)
            if line.startswith("clients:"):
                break
        os.kill(process.pid, signal.SIGINT)
        rest, _ = process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
    out = "".join(seen) + rest
    assert process.returncode == 0, out
    assert "stopping: the clients finish their calls in flight" in out
    assert "fleet summary" in out
    assert process_gone(_redis_pid(out))


def test_a_missing_redis_server_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server there
    assert main(["demo", "--fleet", "2", "--duration", "1s"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "apt-get install redis-server" in err
    assert "--redis URL" in err
    assert err.count("\n") == 1


def test_fleet_wants_a_duration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--fleet", "2", "--forever"]) == 1
    assert "--fleet runs for a --duration" in capsys.readouterr().err


def test_redis_alone_makes_one_demo_a_fleet_member(tmp_path: Path) -> None:
    """``retrymw demo --redis URL`` (the compose replicas): its budget and breaker (one of each
    per host, the default setup) live there."""
    import redis

    with redis_server(tmp_path) as server:
        done = subprocess.run(
            [
                sys.executable, "-m", "retrymw", "demo", "--redis", server.url,
                "--duration", "2s", "--outage", "none", "--metrics-port", "0", "--traces", "none",
            ],
            capture_output=True, text=True, timeout=WAIT, cwd=REPO, env=_env(), check=False,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert f"fleet: budget and breaker shared on {server.url}" in done.stdout
        client = redis.Redis.from_url(server.url)
        try:
            found = client.keys("retrymw:{demo}:*")
            keys = {key if isinstance(key, str) else key.decode() for key in found}
        finally:
            client.close()
    # The host's circuit is shared under its name (upstream:<host:port>, a transport keeps one
    # per host) and host, the host's budget under its policy and host:port (each part of a key
    # percent-encoded: the ":" of host:port is %3A).
    circuit = r"retrymw:\{demo\}:breaker:upstream%3A127\.0\.0\.1%3A\d+:127\.0\.0\.1%3A\d+"
    assert any(re.fullmatch(circuit, key) for key in keys), keys
    budget = r"retrymw:\{demo\}:budget:[^:]+:127\.0\.0\.1%3A\d+"
    assert any(re.fullmatch(budget, key) for key in keys), keys


def _args(fleet: int) -> Any:
    from retrymw.cli import build_parser

    return build_parser().parse_args(["demo", "--fleet", str(fleet)])


def test_the_summary_says_what_sharing_saved_or_did_not() -> None:
    from retrymw.cli.demo._fleet import Group, fleet_summary
    from retrymw.cli.demo._upstream import Outage, UpstreamScript

    script = UpstreamScript(outage=Outage(1.0, 2.0))
    shared = Group("shared budget (fleet)", True, [{"outage_calls": 10, "outage_attempts": 11}])
    alone = Group("per-process budgets", False, [{"outage_calls": 10, "outage_attempts": 14}])
    text = fleet_summary([shared, alone], script, _args(1))
    assert "fleet amplification, shared budget (fleet): 1.100x" in text
    assert "fleet amplification, per-process budgets: 1.400x" in text
    assert "measured: sharing made 3 fewer attempts" in text
    text = fleet_summary([alone, shared], script, _args(1))
    assert "measured: sharing did not lower it here (1.400x vs 1.100x)" in text
    # No call during an outage (none scripted, or nobody reported): no figure is made up.
    empty = [Group("shared budget (fleet)", True), Group("per-process budgets", False)]
    text = fleet_summary(empty, UpstreamScript(), _args(2))
    assert "calls scheduled during the no outage" in text
    assert "shared budget (fleet): n/a (no call during an outage)" in text
    assert "measured:" not in text
    assert "0/2" in text


def test_a_redis_server_that_never_answers_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A redis-server that exits at once fails the demo with one line, before any client runs."""
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["demo", "--fleet", "2", "--duration", "1s"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "redis-server did not answer PING within 10s (3 tries)" in err
    assert err.count("\n") == 1
