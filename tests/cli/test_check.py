"""``retrymw check``: every error of a file with its line, warnings, and exit codes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from retrymw.cli._check import check_data, check_file
from tests.cli.test_cli import REPO, cli, run_cli

BROKEN = """\
retry_defaults:
  attempts: 0
policies:
  payments:
    backoff: {exponential: {base: 0.5}}
    jitter: sometimes
  search:
    retry_budget: 100ms
breakers:
  payments: {recovery_timeout: 5}
surprise: 1
"""


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    """A YAML config with an error in every section and an unknown top-level key."""
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    return path


# -- check ---------------------------------------------------------------------------------------


def test_check_accepts_a_valid_config() -> None:
    """A valid file exits 0 with a one-line summary of what it defines."""
    result = run_cli("check", "examples/policies.yaml")
    assert result.returncode == 0, result.stdout
    assert result.stdout == (
        "examples/policies.yaml: OK: 3 policies (payments, search, reports), "
        "1 breaker, 1 budget, no throttles, no pacers, no hedges; no warnings\n"
    )


def test_check_reports_every_error_with_its_line_and_field_path(broken: Path) -> None:
    """A broken file gets every error, in file order, each with its line and field path."""
    result = run_cli("check", str(broken))
    assert result.returncode == 1
    errors = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    found = [line.removeprefix(f"error: {broken}:").split(": ")[:2] for line in errors]
    assert found == [
        ["2", "retry_defaults.attempts"],
        ["5", "policies.payments.backoff.exponential.base"],
        ["6", "policies.payments.jitter"],
        ["10", "breakers.payments.recovery_timeout"],
        ["11", "surprise"],
    ]
    assert (
        f"warning: {broken}:8: policies.search.retry_budget: 100ms is shorter than the first delay"
        in result.stdout
    )
    assert result.stdout.endswith(f"{broken}: 5 errors, 1 warning\n")
    assert "Traceback" not in result.stderr


def test_check_prints_errors_warnings_and_a_summary_per_file(
    capsys: pytest.CaptureFixture[str], broken: Path
) -> None:
    """Several files are checked in turn; one broken file fails the run."""
    code, out, _ = cli(capsys, "check", str(REPO / "examples" / "policies.yaml"), str(broken))
    assert code == 1
    summaries = [line for line in out.splitlines() if not line.startswith(("error", "warning"))]
    assert [line.split(".yaml: ", 1)[1] for line in summaries] == [
        "OK: 3 policies (payments, search, reports), 1 breaker, 1 budget, no throttles, "
        "no pacers, no hedges; no warnings",
        "5 errors, 1 warning",
    ]


THROTTLES = """\
policies: {api: {attempts: 3}, search: {}, reports: {}}
# throttles bind to the policy of their name
throttles:
  api:
    k: 0.5
    window: soon
    max_reject: 2
  search: {k: 1.5, window: 5s}
  reports: {max_reject: 0.5}
"""


def test_check_reports_every_throttle_error_and_counts_the_valid_ones(tmp_path: Path) -> None:
    """Each bad option of a throttle is an error with its line, as for breakers and budgets;
    the throttles that build are counted in the summary."""
    path = tmp_path / "throttles.yaml"
    path.write_text(THROTTLES)
    result = run_cli("check", str(path))
    assert result.returncode == 1
    errors = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    found = [line.removeprefix(f"error: {path}:").split(": ")[:2] for line in errors]
    assert found == [
        ["5", "throttles.api.k"],
        ["6", "throttles.api.window"],
        ["7", "throttles.api.max_reject"],
    ]
    assert "got 0.5, expected e.g. 2.0" in errors[0]
    assert result.stdout.endswith(f"{path}: 3 errors, no warnings\n")
    # As for breakers and budgets, a throttle whose bad options were dropped is still checked.
    report = check_file(str(path))
    assert report.policies == ["api", "search", "reports"]
    assert report.throttles == ["api", "search", "reports"]


def test_check_counts_throttles_in_a_valid_file(tmp_path: Path) -> None:
    """A file of throttles alone is sectioned, not a bare policy: its throttles are counted
    (here the defaults' own, named ``default``)."""
    path = tmp_path / "throttles.toml"
    path.write_text('[throttles.default]\nk = 2.0\nwindow = "10s"\n')
    result = run_cli("check", str(path))
    assert result.returncode == 0, result.stdout
    assert result.stdout == (
        f"{path}: OK: no policies, no breakers, no budgets, 1 throttle, no pacers, no hedges; "
        "no warnings\n"
    )
    policies: dict[str, Any] = {"api": {}, "search": {}}
    bad = check_data({"policies": policies, "throttles": {"api": {"k": "two"}, "search": []}})
    assert [finding.message.split(": ")[0] for finding in bad.errors] == [
        "throttles.api.k",
        "throttles.search",
    ]


def test_check_reports_a_syntax_error_with_its_line(tmp_path: Path) -> None:
    """A YAML syntax error names the file and the line, and exits 1."""
    path = tmp_path / "bad.yaml"
    path.write_text("policies:\n  a: [1\n")
    result = run_cli("check", str(path))
    assert result.returncode == 1
    assert f"error: {path}: not valid YAML at line" in result.stdout


def test_check_without_the_file_is_one_line_on_stderr() -> None:
    """A missing file is a run failure: one line on stderr, exit 1."""
    result = run_cli("check", "nowhere.yaml")
    assert result.returncode == 1
    assert result.stderr == "retrymw check: error: nowhere.yaml: No such file or directory\n"


@pytest.mark.parametrize(
    ("config", "warning"),
    [
        pytest.param(
            {"retry_config": {"retry": 2, "backoff": "exponential"}},
            "retry_config.backoff: a backoff without a delay",
            id="backoff-without-delay",
        ),
        pytest.param(
            {"policies": {"a": {"backoff": {"custom": {"delays": ["1s"]}}, "jitter": "full"}}},
            "policies.a.jitter: full jitter on a custom delay list",
            id="jitter-on-custom-list",
        ),
        pytest.param(
            {"attempts": 1, "backoff": "fixed", "max_delay": "5s"},
            "attempts: attempts=1 never retries, so backoff, max_delay have no effect",
            id="attempts-1-with-retry-fields",
        ),
        pytest.param(
            {"retry_defaults": {"deadline": "500ms"}, "policies": {"a": {}}},
            "retry_defaults.deadline: 500ms is not longer than the first delay (1s)",
            id="deadline-before-first-retry",
        ),
    ],
)
def test_check_warns_about_likely_mistakes(config: dict[str, Any], warning: str) -> None:
    """Valid but suspicious settings are warnings, reported once (not per inheriting policy)."""
    report = check_data(config)
    assert report.errors == []
    assert len(report.warnings) == 1
    assert report.warnings[0].message.startswith(warning)


def test_check_strict_fails_on_warnings(tmp_path: Path) -> None:
    """--strict turns warnings into a failing exit code."""
    path = tmp_path / "retry.toml"
    path.write_text('[retry_defaults]\nattempts = 3\nretry_budget = "100ms"\n')
    assert run_cli("check", str(path)).returncode == 0
    strict = run_cli("check", "--strict", str(path))
    assert strict.returncode == 1
    assert f"warning: {path}:3: retry_defaults.retry_budget" in strict.stdout


@pytest.mark.parametrize(
    ("config", "first_error"),
    [
        pytest.param([1, 2], "config: the top level must be a mapping", id="not-a-mapping"),
        pytest.param(
            {"retry_config": {}, "policies": {}},
            "retry_config: must be the only top-level key",
            id="retry-config-and-sections",
        ),
        pytest.param({"policies": [1]}, "policies: must be a mapping", id="policies-list"),
        pytest.param({"budgets": "x"}, "budgets: must be a mapping", id="budgets-string"),
        pytest.param(
            {"policies": {"b": {}}, "budgets": {"b": {"ratio": -1}}},
            "budgets.b.ratio",
            id="budget-rejects-option",
        ),
    ],
)
def test_check_reports_structural_errors(config: Any, first_error: str) -> None:
    """Errors in the file's shape are reported like field errors."""
    report = check_data(config)
    assert report.errors
    assert report.errors[0].message.startswith(first_error)


# -- every error of a list, with lines ----------------------------------------------------------

LISTS = """\
retry_defaults:
  retry_on:
    - timeout
    - 999
    - nope
    - {status: []}
    - 503
    - {status: [200, 700]}
policies:
  payments:
    backoff:
      custom:
        delays:
          - 1s
          - 5
          - 2s
          - forever
"""


def test_check_reports_every_bad_entry_of_a_list(tmp_path: Path) -> None:
    """Each bad entry of retry_on and delays is reported with its own index and line."""
    path = tmp_path / "lists.yaml"
    path.write_text(LISTS)
    report = check_file(str(path))
    found = sorted((finding.line, finding.message.split(": ")[0]) for finding in report.errors)
    assert found == [
        (4, "retry_defaults.retry_on[1]"),
        (5, "retry_defaults.retry_on[2]"),
        (6, "retry_defaults.retry_on[3].status"),
        (8, "retry_defaults.retry_on[5].status"),
        (15, "policies.payments.backoff.custom.delays[1]"),
        (17, "policies.payments.backoff.custom.delays[3]"),
    ]


def test_check_reports_every_bad_entry_of_a_list_without_lines() -> None:
    """check_data on data (no file, so no lines) still reports each bad entry once."""
    report = check_data({"retry_defaults": {"retry_on": ["nope", 999, "timeout", "nada"]}})
    paths = [finding.message.split(": ")[0] for finding in report.errors]
    assert paths == [
        "retry_defaults.retry_on[0]",
        "retry_defaults.retry_on[1]",
        "retry_defaults.retry_on[3]",
    ]
    assert all(finding.line is None for finding in report.errors)


def test_valid_entries_after_a_bad_one_are_kept(tmp_path: Path) -> None:
    """Dropping a bad entry keeps the rest, so the policy itself still validates."""
    report = check_data({"policies": {"a": {"retry_on": ["nope", 503]}}})
    assert len(report.errors) == 1
    assert report.policies == ["a"]


TOML = """\
[retry_defaults]
attempts = 0
retry_on = [
  "timeout",
  "nope",
]

[policies.payments]
backoff = {exponential = {base = 0.5}}
"jitter" = "sometimes"
policies.x = 1
"""


def test_check_finds_lines_in_toml_by_the_key(tmp_path: Path) -> None:
    """In TOML the line is the key's: a list entry or an inline table gets its key's line."""
    path = tmp_path / "retry.toml"
    path.write_text(TOML)
    report = check_file(str(path))
    found = sorted((finding.line, finding.message.split(": ")[0]) for finding in report.errors)
    assert found == [
        (2, "retry_defaults.attempts"),
        (3, "retry_defaults.retry_on[1]"),
        (9, "policies.payments.backoff.exponential.base"),
        (10, "policies.payments.jitter"),
        (11, "policies.payments.policies"),
    ]


def test_the_delay_conflict_is_reported_on_the_legacy_field(tmp_path: Path) -> None:
    """A legacy ``initial`` above max_delay is blamed there, on its line, as written."""
    path = tmp_path / "legacy.yaml"
    path.write_text(
        "policies:\n  old:\n    max_delay: 10s\n    backoff:\n      exponential:\n"
        "        initial: 1m\n"
    )
    (finding,) = check_file(str(path)).errors
    assert finding.line == 6
    assert finding.message.startswith(
        "policies.old.backoff.exponential.initial: exceeds max_delay (10s); got '1m'"
    )


def test_the_seed_vocabulary_passes_the_check(tmp_path: Path) -> None:
    """``on_failure: stop``, a per-step retry block and the compact form are all valid."""
    path = tmp_path / "seed.yaml"
    path.write_text(
        "policies:\n"
        "  export: {on_failure: stop, attempts: 2}\n"
        "  step: {retry: {max_attempts: 3, backoff: {fixed: {delay: 2s}}}}\n"
        "  upload: {retry: 5, delay: 1s}\n"
    )
    report = check_file(str(path))
    assert report.errors == []
    assert report.policies == ["export", "step", "upload"]


# -- hostile files --------------------------------------------------------------------------------

BOMB = "policies:\n  p:\n    - &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"    - &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_check_refuses_an_alias_bomb_quickly(tmp_path: Path) -> None:
    """A 'billion laughs' file is one short error, not a MemoryError (exit 1)."""
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    started = time.perf_counter()
    result = run_cli("check", str(path))
    assert time.perf_counter() - started < 20.0  # the subprocess; the parse takes milliseconds
    assert result.returncode == 1
    assert "aliases expand to more than" in result.stdout
    assert len(result.stdout) < 2_000


def test_check_reports_a_duplicate_key(tmp_path: Path) -> None:
    """A key given twice is an error naming both lines."""
    path = tmp_path / "dup.yaml"
    path.write_text("retry_defaults:\n  attempts: 3\n  attempts: 9\n")
    (finding,) = check_file(str(path)).errors
    assert "key 'attempts' appears twice in one mapping, at line 2 and line 3" in finding.message


# -- exit codes follow the help ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["plan", "--attempts", "0"], id="plan-attempts-0"),
        pytest.param(["plan", "--jitter-factor", "2"], id="plan-jitter-factor"),
        pytest.param(["plan", "--max-delay", "100ms"], id="plan-max-below-initial"),
        pytest.param(["check", "--no-such-option", "x.yaml"], id="check-unknown-option"),
        pytest.param(["check"], id="check-no-file"),
    ],
)
def test_a_bad_option_value_exits_2_as_the_help_says(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """A usage error (bad option value) is exit 2 with one line pointing at --help."""
    code, out, err = cli(capsys, *args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert f"(see 'retrymw {args[0]} --help')" in err


def test_the_max_delay_option_is_blamed_when_it_is_too_short(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``plan --max-delay 100ms`` names --max-delay's field, not the untouched initial delay."""
    _, _, err = cli(capsys, "plan", "--max-delay", "100ms")
    assert "max_delay: is shorter than initial_delay (1s)" in err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        pytest.param(["check", "{broken}"], "5 errors", id="check-invalid-file"),
        pytest.param(["plan", "{broken}"], "surprise: unknown top-level key", id="plan-invalid"),
        pytest.param(["check", "nowhere.yaml"], "No such file", id="check-missing-file"),
    ],
)
def test_an_invalid_or_missing_file_exits_1_as_the_help_says(
    capsys: pytest.CaptureFixture[str], broken: Path, args: list[str], fragment: str
) -> None:
    """An invalid config is a validation failure, exit 1, whichever command reads it."""
    code, out, err = cli(capsys, *(arg.format(broken=broken) for arg in args))
    assert code == 1
    assert fragment in out + err


def test_the_help_states_these_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """The codes tested above are the ones ``retrymw check --help`` documents."""
    _, out, _ = cli(capsys, "check", "--help")
    assert "1  validation or run failure (invalid config" in out
    assert "2  usage error (unknown option, bad option value)" in out
