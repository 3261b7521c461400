"""`retrymw plan` shows what a policy's retry_budget means for a call resumed across restarts."""

from __future__ import annotations

import json

import pytest

from retrymw.cli import main


def plan(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["plan", *args]) == 0
    return capsys.readouterr().out


def test_plan_shows_the_resume_semantics_of_a_retry_budget(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With a budget, the plan says when it expires and that a resumed call stops there."""
    out = plan(capsys, "--attempts", "5", "--retry-budget", "5m")
    assert "the budget expires 5m after the first failure (wall clock)" in out
    assert "never retries past it" in out
    data = json.loads(plan(capsys, "--json", "--retry-budget", "90s"))
    assert data["resume"] == {"budget_expires_after_first_failure": 90.0}


def test_plan_without_a_budget_says_nothing_of_resuming(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No budget, no expiry to show."""
    assert "resume" not in plan(capsys, "--attempts", "3")
    assert json.loads(plan(capsys, "--json", "--attempts", "3"))["resume"] is None
