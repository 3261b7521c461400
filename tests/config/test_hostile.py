"""Hostile and odd config input: each is a quick `ConfigError` at load time (issue 12)."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import pytest

from retrymw._config.files import MAX_ALIAS_NODES, read_document
from retrymw._config.loader import load_config
from retrymw._core.durations import MAX_DURATION
from retrymw._core.errors import ConfigError
from retrymw._core.policy import RetryPolicy
from retrymw._engine.retrier import Retrier
from retrymw.testing import FakeClock

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("yaml") is None, reason="PyYAML (the yaml extra) is not installed"
)

# Nine levels of nine aliases each: 9**9 (387 million) strings once expanded, in 400 bytes.
BOMB = "policies:\n  p:\n    - &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"    - &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)
# An error message echoes a value; however big the value, the message stays short.
MESSAGE_LIMIT = 1_000


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    """A 'billion laughs' file fails with a short ConfigError naming the line, not a hang."""
    path = write(tmp_path, BOMB)
    assert path.stat().st_size < 1024
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=r"aliases expand to more than 100000 values") as caught:
        load_config(path)
    # A generous bound that the old behaviour (> 20 s, or MemoryError) cannot meet.
    assert time.perf_counter() - started < 5.0
    assert "at line 8" in str(caught.value)  # the first alias past the limit: *e in &f
    assert len(str(caught.value)) < MESSAGE_LIMIT


def test_aliases_within_the_limit_still_work(tmp_path: Path) -> None:
    """Reusing blocks through anchors and merge keys (the ordinary use) loads as before."""
    text = (
        "retry_defaults: &base {attempts: 4, timeout: 2s}\n"
        "policies:\n"
        "  a: {<<: *base, attempts: 2}\n"
        "  b: *base\n"
        "  c: {retry_on: &codes [502, 503]}\n"
        "  d: {retry_on: *codes}\n"
    )
    config = load_config(write(tmp_path, text))
    assert config.policy("a").attempts == 2  # an explicit key overrides a merged one
    assert config.policy("b").attempts == 4
    assert config.policy("d").retry_on == config.policy("c").retry_on


def test_the_alias_limit_counts_expanded_values(tmp_path: Path) -> None:
    """Just under the limit loads; one alias more is refused (the limit is exact)."""
    block = "[" + ", ".join(["1"] * 999) + "]"  # 1 000 values with the list itself
    uses = MAX_ALIAS_NODES // 1000
    under = f"x: &x {block}\ny: [{', '.join(['*x'] * uses)}]\n"
    assert len(read_document(write(tmp_path, under)).data["y"]) == uses
    over = f"x: &x {block}\ny: [{', '.join(['*x'] * (uses + 1))}]\n"
    with pytest.raises(ConfigError, match="aliases expand"):
        read_document(write(tmp_path, over))


def test_an_alias_that_refers_to_itself_is_an_error(tmp_path: Path) -> None:
    """A recursive alias (which would make cyclic data) is refused with its line."""
    with pytest.raises(ConfigError, match=r"at line 2: alias \*a refers to itself"):
        load_config(write(tmp_path, "retry_defaults:\n  retry_on: &a [*a]\n"))


def test_a_duplicate_key_names_the_key_and_both_lines(tmp_path: Path) -> None:
    """A key written twice is an error naming it and both lines, not a silent last-one-wins."""
    text = "retry_defaults:\n  attempts: 3\n  timeout: 1s\n  attempts: 9\n"
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert "key 'attempts' appears twice in one mapping, at line 2 and line 4" in str(caught.value)


def test_the_same_key_in_different_mappings_is_fine(tmp_path: Path) -> None:
    """Only a repeat inside one mapping is a duplicate."""
    text = "policies:\n  a: {attempts: 2}\n  b: {attempts: 3}\n"
    assert load_config(write(tmp_path, text)).policy("b").attempts == 3


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param({"attempts": 10**5000}, "retry_defaults.attempts", id="attempts"),
        pytest.param({"retry": -(10**5000)}, "retry_defaults.retry", id="negative-retry"),
        pytest.param({"retry_on": [429, 10**5000]}, "retry_defaults.retry_on[1]", id="status"),
        pytest.param({"jitter_factor": 10**5000}, "retry_defaults.jitter_factor", id="factor"),
        pytest.param(
            {"backoff": {"exponential": {"base": 10**5000}}},
            "retry_defaults.backoff.exponential.base",
            id="exponential-base",
        ),
        pytest.param({"timeout": {"secs": 10**5000}}, "retry_defaults.timeout.secs", id="secs"),
        pytest.param({"attempts": 2**63}, "retry_defaults.attempts", id="just-past-64-bit"),
    ],
)
def test_huge_integers_are_refused_with_their_path(fields: dict[str, Any], field: str) -> None:
    """A 5 000-digit integer anywhere is a ConfigError naming its path, never a crash."""
    with pytest.raises(ConfigError) as caught:
        load_config({"retry_defaults": fields})
    assert caught.value.field == field
    assert "out of range (64-bit at most)" in caught.value.problem
    assert "expected e.g. 3" in str(caught.value)


def test_huge_integers_in_breakers_and_budgets_are_refused() -> None:
    """Protection options get the same check before the objects are built."""
    with pytest.raises(ConfigError) as caught:
        load_config({"breakers": {"db": {"failure_threshold": 10**5000}}})
    assert caught.value.field == "breakers.db.failure_threshold"


def test_the_largest_64_bit_integer_is_still_a_number() -> None:
    """The bound is TOML's own range: its largest integer is accepted where it makes sense."""
    config = load_config({"retry_defaults": {"attempts": 2**63 - 1}})
    assert config.defaults.attempts == 2**63 - 1


def test_shared_and_cyclic_mappings_from_code_are_walked_once() -> None:
    """A mapping from Python that shares or even contains itself does not hang the check."""
    shared: dict[str, Any] = {"attempts": 2}
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    assert load_config({"policies": {"a": shared, "b": shared}}).policy("b").attempts == 2
    with pytest.raises(ConfigError, match="unknown policy field"):
        load_config({"policies": {"a": cyclic}})


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param({"max_delay": "3000000h"}, "retry_defaults.max_delay", id="max-delay"),
        pytest.param({"deadline": "8761h"}, "retry_defaults.deadline", id="deadline"),
        pytest.param({"timeout": {"secs": 10**9}}, "retry_defaults.timeout.secs", id="secs-nanos"),
        pytest.param(
            {"backoff": {"custom": {"delays": ["1s", "9000h"]}}},
            "retry_defaults.backoff.custom.delays[1]",
            id="custom-delay",
        ),
    ],
)
def test_durations_past_the_maximum_are_refused_at_load(fields: dict[str, Any], field: str) -> None:
    """A duration no timer can sleep is a load-time error, not an OverflowError at a sleep."""
    with pytest.raises(ConfigError, match="longer than the maximum of 365 days") as caught:
        load_config({"retry_defaults": fields})
    assert caught.value.field == field


def test_the_longest_duration_sleeps_without_overflow() -> None:
    """A policy at the maximum delay schedules its retry: the delay reaches the sleep intact."""
    policy = RetryPolicy(attempts=2, initial_delay="8760h", max_delay="8760h")
    clock = FakeClock()
    retrier = Retrier(policy, budget=None, instruments=(), clock=clock)
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("down")
        return "ok"

    assert retrier.call_sync(flaky) == "ok"
    assert clock.sleeps == [MAX_DURATION]


@pytest.mark.parametrize("policy_field", ["max_delay", "initial_delay", "timeout", "deadline"])
def test_retry_policy_refuses_durations_past_the_maximum(policy_field: str) -> None:
    """The Python API checks the same bound, so a huge delay fails at construction."""
    with pytest.raises(ConfigError, match="longer than the maximum") as caught:
        RetryPolicy().replace(**{policy_field: 3_000_000 * 3600})
    assert caught.value.field == policy_field


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("0.0000000001s", id="100ps"),
        pytest.param("0.5ns", id="half-a-nanosecond"),
    ],
)
@pytest.mark.parametrize("policy_field", ["initial_delay", "max_delay", "timeout", "retry_budget"])
def test_durations_below_a_nanosecond_are_refused(value: str, policy_field: str) -> None:
    """A non-zero duration below 1ns (a typo, or an attack on later arithmetic) is an error."""
    fields = {"initial_delay": "0s", policy_field: value}
    with pytest.raises(ConfigError, match="shorter than 1ns") as caught:
        load_config({"retry_defaults": fields})
    assert caught.value.field == f"retry_defaults.{policy_field}"


def test_zero_and_one_nanosecond_are_durations() -> None:
    """0s turns waits off and 1ns is the finest unit: both load."""
    config = load_config({"retry_defaults": {"initial_delay": "0s", "max_delay": "1ns"}})
    assert (config.defaults.initial_delay, config.defaults.max_delay) == (0.0, 1e-9)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param([1, 2], id="list"),
        pytest.param(42, id="int"),
        pytest.param(None, id="none"),
        pytest.param(b"retry.yaml", id="bytes"),
    ],
)
def test_a_source_that_is_neither_a_path_nor_a_mapping(source: Any) -> None:
    """load_config([1, 2]) is a ConfigError with an example, not a TypeError from os.fspath."""
    with pytest.raises(ConfigError, match=r"must be the path of a \.yaml or \.toml file") as caught:
        load_config(source)
    assert caught.value.field == "config"
    assert 'load_config("retry.yaml")' in str(caught.value)


@pytest.mark.parametrize(
    ("retry_on", "field"),
    [
        pytest.param([{"status": []}], "retry_defaults.retry_on[0].status", id="in-a-list"),
        pytest.param({"status": []}, "retry_defaults.retry_on.status", id="alone"),
        pytest.param(["timeout", {"status": []}], "retry_defaults.retry_on[1].status", id="2nd"),
    ],
)
def test_an_empty_status_list_is_an_error(retry_on: Any, field: str) -> None:
    """``status: []`` would match nothing; it is refused with its path and an example."""
    with pytest.raises(ConfigError, match="lists no status") as caught:
        load_config({"retry_defaults": {"retry_on": retry_on}})
    assert caught.value.field == field
    assert "[502, 503]" in str(caught.value)


def test_a_long_value_is_cut_in_the_message() -> None:
    """An error echoing a 100 000-character value stays short (the value is cut)."""
    with pytest.raises(ConfigError) as caught:
        load_config({"retry_defaults": {"jitter": "x" * 100_000}})
    assert caught.value.field == "retry_defaults.jitter"
    assert len(str(caught.value)) < MESSAGE_LIMIT
    assert "expected e.g." in str(caught.value)  # the example survives the cut
