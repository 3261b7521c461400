"""The ``retrymw`` command: every subcommand through its entry point, errors and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from retrymw import CustomBackoff, Retrier, RetryBudgetExhausted, RetryDenied, RetryPolicy
from retrymw.cli import main
from retrymw.cli._timeline import build_plan, jitter_range
from retrymw.testing import FakeClock, RecordingInstrument

REPO = Path(__file__).resolve().parents[2]
WAIT = 60.0  # the longest any subprocess may take


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RETRYMW_"))}
    return {**env, "PYTHONIOENCODING": "utf-8", **extra}


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m retrymw ARGS`` (the console script's ``main``) to completion."""
    return subprocess.run(
        [sys.executable, "-m", "retrymw", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=_env(**env),
        check=False,
    )


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``main(args)`` in this process; return the exit code, stdout and stderr."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# -- the command and its usage errors ----------------------------------------------------------


def test_help_lists_the_commands_and_the_exit_codes() -> None:
    """``retrymw --help`` names every subcommand, shows examples and documents exit codes."""
    result = run_cli("--help")
    assert result.returncode == 0
    for word in ("demo", "plan", "check", "simulate", "examples:", "exit codes:", "2  usage"):
        assert word in result.stdout


@pytest.mark.parametrize("command", ["demo", "plan", "check", "simulate"])
def test_every_subcommand_has_help_with_examples(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Each subcommand's --help has examples and the exit codes, and exits 0."""
    code, out, _ = cli(capsys, command, "--help")
    assert code == 0
    assert f"retrymw {command}" in out
    assert "examples:" in out
    assert "exit codes:" in out


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="no-command"),
        pytest.param(["frobnicate"], id="unknown-command"),
        pytest.param(["plan", "--attempts", "many"], id="bad-int"),
        pytest.param(["plan", "--initial-delay", "5"], id="duration-without-unit"),
        pytest.param(["plan", "--backoff", "zigzag"], id="unknown-backoff"),
        pytest.param(["check"], id="missing-config"),
        pytest.param(["demo", "--duration", "5s", "--forever"], id="exclusive-options"),
        pytest.param(["demo", "--outage", "6s"], id="bad-outage"),
        pytest.param(["simulate", "--rate", "0"], id="zero-rate"),
        pytest.param(["simulate", "--failure", "150%"], id="share-above-100"),
        pytest.param(["simulate", "--clients", "0"], id="zero-clients"),
        pytest.param(["demo", "--rate", "-1"], id="negative-rate"),
        pytest.param(["demo", "--metrics-port", "70000"], id="port-out-of-range"),
        pytest.param(["demo", "--upstream-port", "http"], id="port-not-a-number"),
        pytest.param(["demo", "--outage", "5s:0s"], id="empty-outage"),
        pytest.param(["demo", "--outage", "1s:5s:2s"], id="outage-longer-than-period"),
        pytest.param(["demo", "--failure-rate", "often"], id="share-not-a-number"),
        pytest.param(["plan", "extra.yaml", "more.yaml"], id="unrecognized-argument"),
    ],
)
def test_usage_errors_are_one_line_with_exit_code_2(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """A bad argument prints one line on stderr that points at --help, and exits 2."""
    code, out, err = cli(capsys, *args)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.fullmatch(r"retrymw( \w+)?: error: .+ \(see 'retrymw( \w+)? --help'\)", lines[0])


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["demo", "--rate", "fast"], id="demo"),
        pytest.param(["plan", "--jitter", "lots"], id="plan"),
        pytest.param(["check", "--no-such-option", "x.yaml"], id="check"),
        pytest.param(["simulate", "--scenario", "meteor"], id="simulate"),
    ],
)
def test_bad_arguments_through_the_entry_point(args: list[str]) -> None:
    """Through the real entry point, a bad argument is one stderr line, no traceback, exit 2."""
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"retrymw {args[0]}: error: ")
    assert result.stderr.count("\n") == 1


def test_an_unexpected_error_is_one_line_unless_debugging(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug surfaces as one line naming RETRYMW_DEBUG, and RETRYMW_DEBUG=1 re-raises it."""

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr("retrymw.cli._plan.build_plan", boom)
    monkeypatch.delenv("RETRYMW_DEBUG", raising=False)
    code, _, err = cli(capsys, "plan")
    assert code == 1
    assert err.strip() == (
        "retrymw plan: error: RuntimeError: boom (set RETRYMW_DEBUG=1 for the traceback)"
    )
    monkeypatch.setenv("RETRYMW_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        main(["plan"])


# -- plan ----------------------------------------------------------------------------------------


def test_plan_prints_the_timeline_and_where_the_budget_cuts_it() -> None:
    """DESIGN §2's example: 100 attempts, 2m budget: sleeps 1, 2, 4, 8, 16, 30, 30, then stops."""
    result = run_cli("plan", "--attempts", "100", "--max-delay", "30s", "--retry-budget", "2m")
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if re.match(r"\s+\d", line)]
    assert [row[1] for row in rows] == ["-", "1s", "2s", "4s", "8s", "16s", "30s"]
    assert rows[-1][:3] == ["7-8", "30s", "each"]
    assert "✗ after attempt 8: budget_exhausted" in result.stdout


def test_plan_json_lists_every_wait(capsys: pytest.CaptureFixture[str]) -> None:
    """--json gives the waits (runs of equal waits merged), the stop and the total."""
    code, out, _ = cli(capsys, "plan", "--json", "--attempts", "5", "--retry-budget", "5s")
    assert code == 0
    plan = json.loads(out)
    assert [wait["delay"] for wait in plan["waits"]] == [1.0, 2.0]
    assert plan["stop"] == {
        "after_attempt": 3,
        "reason": "budget_exhausted",
        "limit": "retry_budget",
        "detail": "retry_budget 5s: 3s waited + 4s > 5s",
        "depends_on_jitter": False,
    }
    assert plan["total_delay"] == 3.0
    assert plan["policy"]["attempts"] == 5


def test_plan_reads_a_named_policy_and_applies_overrides(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """CONFIG --policy NAME plans that policy; options override its fields."""
    config = str(REPO / "examples" / "policies.yaml")
    code, out, _ = cli(capsys, "plan", config, "--policy", "payments", "--jitter", "none")
    assert code == 0
    assert out.startswith("policy 'payments': 5 attempts, exponential backoff (x2) from 50ms")
    assert "jitter" not in out.splitlines()[0]
    code, out, _ = cli(capsys, "plan", config, "--policy", "search", "--json")
    assert json.loads(out)["policy"]["attempts"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["examples/policies.yaml", "--policy", "nope"],
            "unknown name 'nope'; known policies: payments, reports, search",
            id="unknown-policy",
        ),
        pytest.param(["--policy", "payments"], "--policy needs a CONFIG file", id="no-config"),
        # A bad option value (--attempts 0) is a usage error, exit 2: see tests/cli/test_check.py.
        pytest.param(["missing.yaml"], "missing.yaml: No such file or directory", id="no-file"),
    ],
)
def test_plan_failures_exit_1_with_one_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    """An unknown policy, a missing file or an invalid field is one line on stderr, exit 1."""
    monkeypatch.chdir(REPO)
    code, out, err = cli(capsys, "plan", *args)
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert message in err


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        pytest.param(
            ["--backoff", "linear:2s", "--attempts", "4"],
            "policy 'default': 4 attempts, linear backoff (+2s) from 1s, max 30s",
            id="linear",
        ),
        pytest.param(
            ["--backoff", "custom:500ms,2s", "--max-delay", "5s"],
            "policy 'default': 3 attempts, custom delays [500ms, 2s] from 1s, max 5s",
            id="custom",
        ),
        pytest.param(
            ["--backoff", "fibonacci", "--jitter", "equal"],
            "policy 'default': 3 attempts, fibonacci backoff from 1s, max 30s, equal jitter",
            id="fibonacci-equal",
        ),
        pytest.param(
            ["--backoff", "exponential:3", "--jitter-factor", "0.5", "--jitter", "proportional"],
            "policy 'default': 3 attempts, exponential backoff (x3) from 1s, max 30s, "
            "proportional jitter ±50%",
            id="exponential-base-3",
        ),
        pytest.param(
            ["--backoff", "fixed", "--deadline", "10s", "--attempt-time", "1s"],
            "policy 'default': 3 attempts, fixed backoff from 1s, max 30s, deadline 10s",
            id="fixed-deadline",
        ),
        pytest.param(
            ["examples/policies.yaml", "--policy", "payments", "--retry-budget", "none"],
            "policy 'payments': 5 attempts, exponential backoff (x2) from 50ms, max 2s, "
            "full jitter",
            id="budget-turned-off",
        ),
    ],
)
def test_plan_describes_the_policy_it_plans(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    first_line: str,
) -> None:
    """The table's first line says what the policy does, options applied."""
    monkeypatch.chdir(REPO)
    code, out, err = cli(capsys, "plan", *args)
    assert code == 0, err
    assert out.splitlines()[0] == first_line
    assert out.splitlines()[-1].startswith("At most ")


def test_plan_table_shows_jitter_ranges_and_the_jitter_caveat(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With jitter the table has range columns, and a stop jitter may move says so."""
    code, out, _ = cli(
        capsys, "plan", "--attempts", "6", "--jitter", "full", "--retry-budget", "5s"
    )
    assert code == 0
    assert out.splitlines()[2].split() == [
        "attempt",
        "wait",
        "before",
        "jitter",
        "range",
        "cumulative",
        "with",
        "jitter",
    ]
    assert "  with jitter, shorter draws may leave room for another retry" in out
    assert out.splitlines()[-1] == "At most 3 attempts, 3s of waiting (0s-3s with jitter)."


def test_plan_flags_limits_that_jitter_may_cross() -> None:
    """A limit inside the cumulative jitter range is noted on the row and on the stop."""
    # Proportional: 1+2+4 = 7s planned fits 8s, but draws up to 9.1s may not.
    plan = build_plan(RetryPolicy(attempts=8, jitter=True, retry_budget="8s"))
    assert [wait.note for wait in plan.waits][-1] == "retry_budget may stop here (jitter)"
    assert (plan.stop.reason, plan.stop.depends_on_jitter) == ("budget_exhausted", False)
    # Full: 1+2+4 = 7s planned exceeds 5s, but draws as low as 0s may fit.
    plan = build_plan(RetryPolicy(attempts=8, jitter="full", retry_budget="5s"))
    assert (plan.stop.after_attempt, plan.stop.depends_on_jitter) == (3, True)


def test_plan_counts_attempt_time_against_the_deadline() -> None:
    """With --attempt-time the deadline stops the call once attempts and waits reach it."""
    plan = build_plan(RetryPolicy(attempts=10, deadline="10s"), attempt_time=1.0)
    assert plan.stop.reason == "deadline_exceeded"
    assert plan.stop.after_attempt == 3  # 3 attempts (3s) + waits 1s + 2s, then 4s would end at 10s


@pytest.mark.parametrize(
    ("fields", "attempt_time"),
    [
        pytest.param({"attempts": 5, "retry_budget": "5s"}, 0.0, id="budget"),
        pytest.param(
            {"attempts": 4, "backoff": "linear", "retry_budget": "6s"}, 0.0, id="budget-equal"
        ),
        pytest.param({"attempts": 100, "max_delay": "30s", "retry_budget": "2m"}, 0.0, id="design"),
        pytest.param({"attempts": 10, "deadline": "10s"}, 1.0, id="deadline"),
        pytest.param(
            {"attempts": 9, "backoff": "fibonacci", "deadline": "6s"}, 0.25, id="fibonacci"
        ),
        pytest.param(
            {"attempts": 6, "backoff": CustomBackoff(["1s", "30s", "2s"]), "max_delay": "30s"},
            0.0,
            id="custom-capped-mid-list",
        ),
        pytest.param({"attempts": 40, "backoff": "fixed", "deadline": "15s"}, 0.5, id="fixed-tail"),
    ],
)
def test_plan_waits_and_stops_like_a_real_call(fields: dict[str, Any], attempt_time: float) -> None:
    """A Retrier running the policy on a fake clock sleeps the planned waits and stops there."""
    policy = RetryPolicy(**fields)
    plan = build_plan(policy, attempt_time=attempt_time)
    clock, recorder = FakeClock(), RecordingInstrument()
    retrier = Retrier(policy, budget=None, instruments=(recorder,), clock=clock)

    def fail() -> None:
        clock.advance(attempt_time)
        raise ConnectionError("down")

    with pytest.raises((ConnectionError, RetryBudgetExhausted)):
        retrier.call_sync(fail)
    planned = [
        wait.delay for wait in plan.waits for _ in range(wait.attempt, wait.last_attempt + 1)
    ]
    assert clock.sleeps == planned
    assert [event.reason for event in recorder.of_type(RetryDenied)] == [plan.stop.reason]
    assert recorder.of_type(RetryDenied)[0].attempt == plan.stop.after_attempt


def test_plan_jitter_caveat_needs_a_short_draw_to_pass_every_limit() -> None:
    """The budget stops the planned waits; the shortest draws fit it but not the deadline."""
    # Equal jitter: 0.5s + 1s waited and a 2s draw fit the 5s budget, but the next attempt
    # would start at 3 * 0.25s + 3.5s = 4.25s, past the 4s deadline: no draw gets another retry.
    policy = RetryPolicy(attempts=5, jitter="equal", retry_budget="5s", deadline="4s")
    plan = build_plan(policy, attempt_time=0.25)
    assert (plan.stop.after_attempt, plan.stop.reason) == (3, "budget_exhausted")
    assert plan.stop.depends_on_jitter is False
    assert build_plan(policy.replace(deadline=None)).stop.depends_on_jitter is True


def test_plan_summarises_a_huge_constant_tail_in_one_row() -> None:
    """A million attempts cost a few rows: the capped tail is one merged row."""
    plan = build_plan(RetryPolicy(attempts=10**6, jitter="decorrelated", max_delay="5s"))
    assert len(plan.waits) < 10
    assert plan.waits[-1].last_attempt == 10**6
    assert plan.stop.after_attempt == 10**6


@pytest.mark.parametrize(
    ("jitter", "delay", "expected"),
    [
        pytest.param("full", 4.0, (0.0, 4.0), id="full"),
        pytest.param("equal", 4.0, (2.0, 4.0), id="equal"),
        pytest.param("proportional", 4.0, (2.8, 5.2), id="proportional"),
        pytest.param("proportional", 10.0, (4.0, 10.0), id="proportional-shifted-under-cap"),
        pytest.param("decorrelated", 2.0, (1.0, 3.0), id="decorrelated"),
    ],
)
def test_jitter_ranges_follow_the_formulas(
    jitter: str, delay: float, expected: tuple[float, float]
) -> None:
    """Jitter ranges are computed from DESIGN §2's formulas, never sampled."""
    policy = RetryPolicy(jitter=jitter, max_delay="10s")
    low, high = jitter_range(policy, delay, previous_max=1.0)
    assert (low, high) == pytest.approx(expected)


# -- simulate --------------------------------------------------------------------------------------


def test_simulate_compares_retry_layers_in_a_table() -> None:
    """The default run compares no retries, retries, budget and breaker on one outage."""
    result = run_cli("simulate", "--rate", "20", "--duration", "30s", "--fault", "10s")
    assert result.returncode == 0, result.stderr
    for name in ("no retries", "retries, no budget", "retries + budget", "+ breaker"):
        assert name in result.stdout
    assert "amplif." in result.stdout


def test_simulate_json_reports_each_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    """--json gives one object per scenario with its settings and results."""
    code, out, _ = cli(
        capsys, "simulate", "--json", "--rate", "10", "--duration", "20s", "--attempts", "5"
    )
    assert code == 0
    results = json.loads(out)
    assert [result["scenario"]["name"] for result in results] == [
        "no retries",
        "retries, no budget",
        "retries + budget",
        "retries + budget + breaker",
    ]
    assert results[0]["amplification"] == 1.0
    assert results[1]["amplification"] > results[2]["amplification"]
    assert results[1]["scenario"]["policy"]["attempts"] == 5
    assert results[3]["scenario"]["breaker"] == {}


def test_simulate_runs_a_suite_group_with_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    """--scenario picks a group of retrymw.simulate.suite; policy options override it."""
    code, out, _ = cli(capsys, "simulate", "--scenario", "breaker", "--jitter", "full")
    assert code == 0
    assert "outage+breaker 100/s" in out


def test_simulate_rejects_a_fault_after_the_last_call(capsys: pytest.CaptureFixture[str]) -> None:
    """A fault that starts after arrivals stop is a one-line error, exit 1."""
    code, _, err = cli(capsys, "simulate", "--warmup", "1m", "--duration", "30s")
    assert code == 1
    assert "no call would meet it" in err


def test_plan_piped_into_a_reader_that_leaves_early_exits_quietly() -> None:
    """`retrymw plan | head -n 1`: a broken pipe ends the command with exit 0 and no traceback."""
    plan = subprocess.Popen(
        [sys.executable, "-m", "retrymw", "plan", "--attempts", "60", "--jitter", "full"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert plan.stdout is not None
    assert plan.stderr is not None
    try:
        plan.stdout.close()  # the reader is gone before the interpreter has even started
        assert plan.wait(timeout=WAIT) == 0
        assert plan.stderr.read() == b""
    finally:
        if plan.poll() is None:
            plan.kill()
            plan.wait(timeout=WAIT)
        plan.stderr.close()


def test_simulate_ratelimit_compares_pacing(capsys: pytest.CaptureFixture[str]) -> None:
    """--scenario ratelimit runs a rate-limited server without and with pacing, in virtual time:
    without a pacer most attempts are 429s; with one hardly any, at the limit."""
    code, out, _ = cli(
        capsys, "simulate", "--scenario", "ratelimit", "--json", "--limit", "20", "--burst", "5"
    )
    assert code == 0
    results = {result["scenario"]["name"]: result for result in json.loads(out)}
    assert list(results) == ["no pacing", "Pacer() learned", "Pacer(rate=limit, burst)"]
    assert results["no pacing"]["throttled_share"] > 0.5
    for name in ("Pacer() learned", "Pacer(rate=limit, burst)"):
        assert results[name]["throttled_share"] <= 0.02
        assert 18.0 <= results[name]["served"] <= 20.0
        assert results[name]["scenario"]["limit"] == 20.0
    assert results["Pacer() learned"]["learned"] == pytest.approx(20.0)
    code, out, _ = cli(capsys, "simulate", "--scenario", "ratelimit", "--duration", "5s")
    assert code == 0
    for word in ("429s", "served/s", "wait p99", "Pacer() learned", "against a server allowing"):
        assert word in out


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--scenario", "ratelimit", "--attempts", "2"], id="policy-option"),
        pytest.param(["--scenario", "ratelimit", "--duration", "1s"], id="shorter-than-settle"),
        pytest.param(["--limit", "20"], id="limit-without-ratelimit"),
    ],
)
def test_simulate_ratelimit_refuses_options_it_cannot_use(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, _, err = cli(capsys, "simulate", *argv)
    assert code == 1
    assert "retrymw simulate: error:" in err
