"""`load_config`, `RetryConfig` and `to_mapping`: DESIGN §7's forms, files, errors, round trips."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrymw._config.loader import RetryConfig, load_config, to_mapping
from retrymw._core.backoff import (
    Backoff,
    CustomBackoff,
    ExponentialBackoff,
    FibonacciBackoff,
    FixedBackoff,
    LinearBackoff,
)
from retrymw._core.errors import CircuitOpenError, ConfigError
from retrymw._core.matchers import compile_matcher, on_exception, on_status
from retrymw._core.policy import RetryPolicy

NEEDS_YAML = pytest.mark.skipif(
    importlib.util.find_spec("yaml") is None, reason="PyYAML (the yaml extra) is not installed"
)

# -- every form of DESIGN §7 -----------------------------------------------------------------

FORMS = [
    pytest.param({"backoff": "fixed"}, {"backoff": FixedBackoff()}, id="fixed-name"),
    pytest.param({"backoff": {"fixed": None}}, {"backoff": FixedBackoff()}, id="fixed-null"),
    pytest.param({"backoff": "linear"}, {"backoff": LinearBackoff()}, id="linear-name"),
    pytest.param(
        {"backoff": {"linear": {"increment": "2s"}}},
        {"backoff": LinearBackoff(2.0)},
        id="linear-increment",
    ),
    pytest.param({"backoff": "exponential"}, {"backoff": ExponentialBackoff()}, id="exp-name"),
    pytest.param(
        {"backoff": {"exponential": {"base": 3.0}}},
        {"backoff": ExponentialBackoff(3.0)},
        id="exponential-base",
    ),
    pytest.param(
        {"backoff": {"exponential": {"base": 3}}},
        {"backoff": ExponentialBackoff(3.0)},
        id="exponential-int-base",
    ),
    pytest.param({"backoff": "fibonacci"}, {"backoff": FibonacciBackoff()}, id="fibonacci"),
    pytest.param(
        {"backoff": {"custom": {"delays": ["500ms", {"secs": 1, "nanos": 0}]}}},
        {"backoff": CustomBackoff([0.5, 1.0])},
        id="custom",
    ),
    pytest.param(
        {"backoff": {"custom": {"delays": []}}}, {"backoff": CustomBackoff([])}, id="custom-empty"
    ),
    # The legacy error-policy form.
    pytest.param({"max_attempts": 5}, {"attempts": 5}, id="legacy-max-attempts"),
    pytest.param(
        {"backoff": {"exponential": {"initial": "2s", "multiplier": 3.0}}},
        {"backoff": ExponentialBackoff(3.0), "initial_delay": 2.0},
        id="legacy-exponential",
    ),
    pytest.param(
        {"backoff": {"fixed": {"delay": "5s"}}},
        {"backoff": FixedBackoff(), "initial_delay": 5.0},
        id="legacy-fixed",
    ),
    pytest.param(
        {"backoff": {"linear": {"initial": "3s", "increment": "2s"}}},
        {"backoff": LinearBackoff(2.0), "initial_delay": 3.0},
        id="legacy-linear",
    ),
    pytest.param(
        {"backoff": {"fibonacci": {"initial": "2s"}}},
        {"backoff": FibonacciBackoff(), "initial_delay": 2.0},
        id="legacy-fibonacci",
    ),
    # The compact call options.
    pytest.param(
        {"retry": 3, "delay": "2s", "backoff": "exponential", "timeout": "5s"},
        {"attempts": 4, "initial_delay": 2.0, "backoff": ExponentialBackoff(), "timeout": 5.0},
        id="compact",
    ),
    # RFC-006: the compact form without a backoff is fixed.
    pytest.param({"retry": 0}, {"attempts": 1, "backoff": "fixed"}, id="compact-no-retry"),
    pytest.param({"delay": "250ms"}, {"initial_delay": 0.25}, id="compact-delay"),
    # Every RetryPolicy field, canonical spelling.
    pytest.param(
        {
            "name": "api",
            "attempts": 7,
            "initial_delay": "500ms",
            "max_delay": "2m30s",
            "retry_budget": "1h30m",
            "timeout": {"secs": 2, "nanos": 500_000_000},
            "deadline": "30s",
            "on_failure": "continue",
        },
        {
            "name": "api",
            "attempts": 7,
            "initial_delay": 0.5,
            "max_delay": 150.0,
            "retry_budget": 5400.0,
            "timeout": 2.5,
            "deadline": 30.0,
            "on_failure": "continue",
        },
        id="all-scalars",
    ),
    pytest.param({"jitter": True}, {"jitter": "proportional"}, id="jitter-true"),
    pytest.param({"jitter": "full"}, {"jitter": "full"}, id="jitter-full"),
    pytest.param({"jitter": False}, {"jitter": None}, id="jitter-false"),
    pytest.param(
        {"jitter": "equal", "jitter_factor": 1}, {"jitter": "equal", "jitter_factor": 1.0}, id="jf"
    ),
    pytest.param({"timeout": None}, {"timeout": None}, id="timeout-null"),
    pytest.param(
        {"retry_on": ["timeout", "5xx", 429, {"pattern": "reset"}, {"status": [502, 503]}]},
        {"retry_on": ["timeout", "5xx", 429, {"pattern": "reset"}, {"status": [502, 503]}]},
        id="retry-on-list",
    ),
    pytest.param({"retry_on": "network"}, {"retry_on": "network"}, id="retry-on-single"),
    pytest.param({"retry_on": []}, {"retry_on": None}, id="retry-on-empty"),
]


@pytest.mark.parametrize(("fields", "expected"), FORMS)
def test_policy_forms(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    """Each config form gives exactly the RetryPolicy built from the equivalent arguments."""
    assert load_config(fields).defaults == RetryPolicy(**expected)


@pytest.mark.parametrize(
    ("fields", "delays"),
    [
        pytest.param(
            {"backoff": {"exponential": {"initial": "2s", "multiplier": 3.0}}, "max_delay": "1m"},
            [2.0, 6.0, 18.0, 54.0, 60.0],
            id="legacy-exponential",
        ),
        pytest.param(
            {"backoff": {"linear": {"initial": "1s", "increment": "2s"}}},
            [1.0, 3.0, 5.0, 7.0],
            id="legacy-linear",
        ),
        pytest.param(
            {"backoff": {"custom": {"delays": ["500ms", "1s"]}}, "max_delay": "10s"},
            [0.5, 1.0, 10.0],
            id="custom-then-max",
        ),
    ],
)
def test_loaded_policies_compute_the_design_delays(
    fields: dict[str, Any], delays: list[float]
) -> None:
    """Loaded legacy and custom forms produce DESIGN §2's delay sequences."""
    policy = load_config(fields).defaults
    assert [policy.delay_for(n) for n in range(1, len(delays) + 1)] == delays


# -- errors: full field path, bad value, accepted example ----------------------------------

BAD = [
    pytest.param({"timeout": "1 second"}, "timeout", "not a duration", id="words"),
    pytest.param({"timeout": "500"}, "timeout", "a bare number has no unit", id="bare-text"),
    pytest.param({"max_delay": "2 minutes"}, "max_delay", "not a duration", id="plural-words"),
    pytest.param({"timeout": 5}, "timeout", "a bare number has no unit", id="int-duration"),
    pytest.param({"initial_delay": 0.5}, "initial_delay", "bare number", id="float-duration"),
    pytest.param({"deadline": True}, "deadline", "bare number", id="bool-duration"),
    pytest.param({"deadline": "-5s"}, "deadline", "must not be negative", id="negative"),
    pytest.param({"delay": "-1s"}, "delay", "must not be negative", id="negative-delay"),
    pytest.param({"timeout": {"secs": -1}}, "timeout.secs", "non-negative", id="negative-secs"),
    pytest.param({"timeout": ["5s"]}, "timeout", "not a duration", id="list-duration"),
    pytest.param({"timeout": "0s"}, "timeout", "greater than zero", id="zero-timeout"),
    pytest.param({"retry": 2, "attempts": 3}, "retry", "conflicts with attempts", id="retry+att"),
    pytest.param(
        {"retry": 2, "max_attempts": 3}, "retry", "conflicts with max_attempts", id="retry+max"
    ),
    pytest.param(
        {"attempts": 2, "max_attempts": 3}, "max_attempts", "conflicts with", id="attempts+max"
    ),
    pytest.param(
        {"delay": "1s", "initial_delay": "2s"}, "delay", "conflicts with initial_delay", id="delays"
    ),
    pytest.param(
        {"delay": "1s", "backoff": {"exponential": {"initial": "2s"}}},
        "backoff.exponential.initial",
        "conflicts with delay",
        id="legacy-initial+delay",
    ),
    pytest.param(
        {"backoff": {"exponential": {"base": 2.0, "multiplier": 3.0}}},
        "backoff.exponential.multiplier",
        "conflicts with base",
        id="base+multiplier",
    ),
    pytest.param(
        {"attempts": 3, "bakoff": "fixed"},
        "bakoff",
        "unknown policy field, known: name, attempts, backoff",
        id="unknown-field",
    ),
    pytest.param(
        {"retry_defaults": {"fallback": "log"}},
        "retry_defaults.fallback",
        "unknown policy field",
        id="fallback-field",
    ),
    pytest.param(
        {"backoff": "expo"},
        "backoff",
        "unknown backoff strategy, known: fixed, linear, exponential, fibonacci, custom",
        id="unknown-strategy",
    ),
    pytest.param(
        {"backoff": {"gaussian": {"sigma": 1}}},
        "backoff",
        "unknown backoff strategy",
        id="unknown-strategy-mapping",
    ),
    pytest.param(
        {"backoff": {"exponential": {"factor": 2}}},
        "backoff.exponential.factor",
        "unknown exponential option, known: base, multiplier, initial",
        id="unknown-option",
    ),
    pytest.param(
        {"backoff": {"fixed": None, "linear": None}},
        "backoff",
        "one strategy",
        id="two-strategies",
    ),
    pytest.param({"backoff": 2}, "backoff", "strategy name", id="int-backoff"),
    pytest.param({"backoff": {"exponential": 3.0}}, "backoff.exponential", "mapping", id="opts"),
    pytest.param(
        {"backoff": {"exponential": {"base": 0.5}}}, "backoff.exponential.base", ">= 1", id="base"
    ),
    pytest.param(
        {"backoff": {"exponential": {"base": "2"}}},
        "backoff.exponential.base",
        ">= 1",
        id="base-text",
    ),
    pytest.param(
        {"backoff": {"exponential": {"multiplier": float("inf")}}},
        "backoff.exponential.multiplier",
        ">= 1",
        id="multiplier-inf",
    ),
    pytest.param(
        {"backoff": {"custom": None}}, "backoff.custom.delays", "must be a list", id="custom-null"
    ),
    pytest.param(
        {"backoff": {"custom": {"delays": ["1s", 2]}}},
        "backoff.custom.delays[1]",
        "bare number",
        id="custom-bare-number",
    ),
    pytest.param(
        {"backoff": {"linear": {"increment": 2}}},
        "backoff.linear.increment",
        "bare number",
        id="increment-number",
    ),
    pytest.param({"attempts": 0}, "attempts", "integer >= 1", id="zero-attempts"),
    pytest.param({"attempts": True}, "attempts", "integer >= 1", id="bool-attempts"),
    pytest.param({"attempts": "3"}, "attempts", "integer >= 1", id="text-attempts"),
    pytest.param({"retry": -1}, "retry", "integer >= 0", id="negative-retry"),
    pytest.param({"max_attempts": 2.5}, "max_attempts", "integer >= 1", id="float-max-attempts"),
    pytest.param({"jitter": "gaussian"}, "jitter", "must be a boolean or one of", id="jitter"),
    pytest.param({"jitter": 1}, "jitter", "must be a boolean or one of", id="int-jitter"),
    pytest.param({"jitter_factor": 1.5}, "jitter_factor", "within [0, 1]", id="jitter-factor"),
    pytest.param({"jitter_factor": "0.3"}, "jitter_factor", "within [0, 1]", id="text-factor"),
    pytest.param({"on_failure": "fallback"}, "on_failure", "fallback callable", id="fallback"),
    pytest.param({"on_failure": "ignore"}, "on_failure", '"continue"', id="bad-on-failure"),
    pytest.param({"retry_on": "flaky"}, "retry_on", "unknown matcher", id="unknown-matcher"),
    pytest.param({"retry_on": [True]}, "retry_on[0]", "matcher name", id="bool-matcher"),
    pytest.param({"retry_on": [1.5]}, "retry_on[0]", "matcher name", id="float-matcher"),
    pytest.param(
        {"retry_on": ["timeout", {"status": [700]}]},
        "retry_on[1].status",
        "HTTP status",
        id="bad-status",
    ),
    pytest.param(
        {"retry_on": [{"pattern": "("}]}, "retry_on[0].pattern", "regular expression", id="regex"
    ),
    pytest.param(
        {"initial_delay": "1m", "max_delay": "30s"},
        "initial_delay",
        "exceeds max_delay",
        id="initial-over-max",
    ),
    pytest.param({"name": ""}, "name", "non-empty string", id="empty-name"),
    pytest.param({"name": 5}, "name", "non-empty string", id="int-name"),
    # Paths inside sections.
    pytest.param(
        {"policies": {"payments": {"backoff": {"exponential": {"base": 0.5}}}}},
        "policies.payments.backoff.exponential.base",
        ">= 1",
        id="nested-base",
    ),
    pytest.param(
        {"policies": {"payments": {"timeout": "500"}}},
        "policies.payments.timeout",
        "bare number",
        id="nested-duration",
    ),
    pytest.param(
        {"retry_defaults": {"max_delay": "10s"}, "policies": {"slow": {"delay": "1m"}}},
        "policies.slow.delay",
        "exceeds max_delay",
        id="nested-merged-check",
    ),
    pytest.param(
        {"retry_defaults": {"jitter": "x"}}, "retry_defaults.jitter", "one of", id="defaults-path"
    ),
    pytest.param(
        {"retry_config": {"timeout": "1 second"}},
        "retry_config.timeout",
        "not a duration",
        id="retry-config-path",
    ),
    # Top level and sections.
    pytest.param(
        {"retry_defaults": {}, "polices": {}},
        "polices",
        "unknown top-level key, known: retry_defaults, policies, breakers, budgets",
        id="unknown-section",
    ),
    pytest.param({"foo": 1}, "foo", "unknown top-level key", id="only-unknown-keys"),
    pytest.param(
        {"retry_config": {}, "policies": {}}, "retry_config", "only top-level key", id="rc+policy"
    ),
    pytest.param({"policies": ["a"]}, "policies", "must be a mapping", id="policies-list"),
    pytest.param({"policies": {"a": 3}}, "policies.a", "must be a mapping", id="policy-int"),
    pytest.param({"policies": {1: {}}}, "policies.1", "keys must be strings", id="int-key"),
    pytest.param({"breakers": {"a": "x"}}, "breakers.a", "must be a mapping", id="breaker-str"),
    pytest.param(
        {"breakers": {"a": {"recovery_timeout": 30}}},
        "breakers.a.recovery_timeout",
        "bare number",
        id="breaker-duration",
    ),
    pytest.param(
        {"budgets": {"a": {"window": "10 seconds"}}},
        "budgets.a.window",
        "not a duration",
        id="budget-duration",
    ),
]


@pytest.mark.parametrize(("config", "field", "fragment"), BAD)
def test_bad_input_names_the_field_value_and_example(
    config: dict[Any, Any], field: str, fragment: str
) -> None:
    """Each bad input raises one ConfigError with the full field path and an accepted example."""
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    error = caught.value
    assert error.field == field
    assert fragment in str(error)
    assert str(error).startswith(f"{field}: ")
    assert "expected e.g. " in str(error)


def test_config_error_is_a_value_error() -> None:
    """ConfigError is a ValueError, so callers can catch either."""
    with pytest.raises(ValueError, match=r"timeout: a bare number has no unit"):
        load_config({"timeout": "500"})


# -- the compact form's warning --------------------------------------------------------------


def test_compact_backoff_without_delay_warns_at_the_caller() -> None:
    """`retry` + `backoff` without a delay warns, pointing at this file, and uses 1s."""
    with pytest.warns(UserWarning, match="default initial delay of 1s is used") as record:
        config = load_config({"retry": 2, "backoff": "fixed"})
    assert len(record) == 1
    assert record[0].filename == __file__
    assert config.defaults.initial_delay == 1.0
    assert config.defaults.attempts == 3


def test_compact_warning_names_the_policy() -> None:
    """The warning names the policy's backoff path."""
    config = {"policies": {"api": {"retry": 1, "backoff": "linear"}}}
    with pytest.warns(UserWarning, match=r"^policies\.api\.backoff: "):
        load_config(config)


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"retry": 2, "backoff": "fixed", "delay": "1s"}, id="compact-with-delay"),
        pytest.param({"attempts": 3, "backoff": "fixed"}, id="canonical-form"),
        pytest.param({"retry": 2}, id="compact-without-backoff"),
        pytest.param(
            {"retry": 2, "backoff": {"exponential": {"initial": "1s"}}}, id="legacy-initial"
        ),
        pytest.param(
            {
                "retry_defaults": {"delay": "2s"},
                "policies": {"api": {"retry": 1, "backoff": "fixed"}},
            },
            id="delay-inherited",
        ),
    ],
)
def test_no_warning_when_the_delay_is_known(config: dict[str, Any]) -> None:
    """No warning is given when a delay is set, inherited, or the form is not compact."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(config)


# -- shapes, merging and RetryConfig ----------------------------------------------------------


def test_policies_merge_over_the_defaults() -> None:
    """Policies inherit the defaults, override what they give, and are named after their key."""
    config = load_config(
        {
            "retry_defaults": {"retry": 4, "delay": "2s", "timeout": "5s", "name": "base"},
            "policies": {
                "payments": {"attempts": 2, "backoff": "fixed"},
                "search": {"timeout": None, "name": "search-v2"},
            },
        }
    )
    # The compact defaults have no backoff, so they are fixed (RFC-006); policies inherit it.
    base = RetryPolicy(name="base", attempts=5, backoff="fixed", initial_delay="2s", timeout="5s")
    assert config.defaults == base
    assert config.policy("payments") == base.replace(
        name="payments", attempts=2, backoff=FixedBackoff()
    )
    assert config.policy("search") == base.replace(name="search-v2", timeout=None)
    assert list(config.policies) == ["payments", "search"]


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"retry_config": {"attempts": 5, "timeout": "2s"}}, id="retry-config-block"),
        pytest.param({"attempts": 5, "timeout": "2s"}, id="bare-policy-fields"),
        pytest.param({"retry_defaults": {"attempts": 5, "timeout": "2s"}}, id="retry-defaults"),
    ],
)
def test_single_block_shapes_are_the_defaults(config: dict[str, Any]) -> None:
    """A `retry_config` block and a bare mapping of fields both become the defaults."""
    loaded = load_config(config)
    assert loaded.defaults == RetryPolicy(attempts=5, timeout="2s")
    assert dict(loaded.policies) == {}


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({}, id="empty"),
        pytest.param({"retry_defaults": None, "policies": None}, id="null-sections"),
    ],
)
def test_empty_config_is_all_defaults(config: dict[str, Any]) -> None:
    """An empty config (or empty YAML sections) gives RetryPolicy's defaults and nothing else."""
    assert load_config(config) == RetryConfig()


def test_unknown_policy_lists_the_known_ones() -> None:
    """`policy()` raises a KeyError that names the known policies."""
    config = load_config({"policies": {"b": {}, "a": {}}})
    with pytest.raises(KeyError, match="known policies: a, b"):
        config.policy("c")


def test_config_is_frozen() -> None:
    """Neither the config nor its mappings can be changed after loading."""
    config = load_config({"policies": {"a": {}}, "breakers": {"a": {}}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.defaults = RetryPolicy()  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.policies["b"] = RetryPolicy()  # type: ignore[index]
    with pytest.raises(TypeError):
        config.breakers["a"]["name"] = "b"  # type: ignore[index]


def test_load_does_not_mutate_its_input() -> None:
    """Loading a mapping leaves it unchanged, so it can be reused."""
    source = {"breakers": {"db": {"failure_threshold": 3}}, "policies": {"db": {"retry": 1}}}
    before = repr(source)
    load_config(source)
    assert repr(source) == before


# -- breakers, budgets and retrier ---------------------------------------------------------


def test_breakers_and_budgets_keep_their_validated_kwargs() -> None:
    """Breaker kwargs gain a `name` equal to their key; budget kwargs are kept as given."""
    config = load_config(
        {
            "policies": {"db": {}},
            "breakers": {"db": {"failure_threshold": 3, "recovery_timeout": "10s"}},
            "budgets": {"db": {"ratio": 0.1, "window": {"secs": 10}}},
        }
    )
    assert dict(config.breakers["db"]) == {
        "failure_threshold": 3,
        "recovery_timeout": "10s",
        "name": "db",
    }
    assert dict(config.budgets["db"]) == {"ratio": 0.1, "window": {"secs": 10}}


class _FakeBreaker:
    """Stands in for CircuitBreaker, to test the construction errors on their own."""

    def __init__(self, *, name: str, failure_threshold: int = 5, clock: object = None) -> None:
        if not isinstance(failure_threshold, int):
            raise TypeError(f"'failure_threshold' must be an int, not {failure_threshold!r}")
        if failure_threshold < 1:
            raise ConfigError("failure_threshold", failure_threshold, "must be >= 1", "5")
        self.name = name


@pytest.fixture
def fake_breaker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `retrymw._protect.breaker.CircuitBreaker` the fake while the test runs."""
    module = types.ModuleType("retrymw._protect.breaker")
    module.CircuitBreaker = _FakeBreaker  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "retrymw._protect.breaker", module)


@pytest.mark.usefixtures("fake_breaker")
@pytest.mark.parametrize(
    ("options", "field", "fragment"),
    [
        pytest.param(
            {"threshold": 3},
            "breakers.db.threshold",
            "unknown _FakeBreaker option, known: name, failure_threshold",
            id="unknown-option",
        ),
        pytest.param(
            {"clock": "monotonic"},
            "breakers.db.clock",
            "is code, not data: build the",
            id="clock-is-not-config",
        ),
        pytest.param(
            {"failure_threshold": "3"},
            "breakers.db.failure_threshold",
            "must be an int",
            id="type-error",
        ),
        pytest.param(
            {"failure_threshold": 0}, "breakers.db.failure_threshold", ">= 1", id="config-error"
        ),
    ],
)
def test_breaker_construction_errors_name_the_option(
    options: dict[str, Any], field: str, fragment: str
) -> None:
    """Bad breaker options fail load_config itself, naming the breaker option."""
    with pytest.raises(ConfigError) as caught:
        load_config({"breakers": {"db": options}})
    assert caught.value.field == field
    assert fragment in str(caught.value)


@pytest.mark.usefixtures("fake_breaker")
def test_breakers_are_built_once_per_config() -> None:
    """Every request for a breaker name returns the same shared instance."""
    config = load_config({"policies": {"db": {}}, "breakers": {"db": {}}})
    breaker = config.breaker("db")
    assert isinstance(breaker, _FakeBreaker)
    assert breaker.name == "db"
    assert config.breaker("db") is breaker
    with pytest.raises(KeyError, match="known breakers: db"):
        config.breaker("cache")


_RUNTIME_READY = all(
    importlib.util.find_spec(name) is not None
    for name in ("retrymw._engine.retrier", "retrymw._protect.breaker", "retrymw._protect.budget")
)


@pytest.mark.skipif(
    not _RUNTIME_READY, reason="retrymw._engine.retrier/_breaker/_budget are not written yet"
)
def test_retrier_uses_the_breaker_and_budget_named_like_the_policy() -> None:
    """`retrier(name)` passes the policy, its same-named budget, and turns the breaker on."""
    from retrymw._engine.retrier import Retrier
    from retrymw._protect.budget import RetryBudget

    config = load_config(
        {
            "policies": {"db": {"attempts": 2}, "cache": {}},
            "breakers": {"db": {"failure_threshold": 3}},
            "budgets": {"db": {"ratio": 0.5}},
        }
    )
    retrier = config.retrier("db")
    assert isinstance(retrier, Retrier)
    assert retrier.policy == config.policy("db")
    assert retrier.budget is config.budget("db")
    assert retrier.breaker is config.breaker("db")
    plain = config.retrier("cache")
    assert plain.breaker is None
    assert isinstance(plain.budget, RetryBudget)
    assert plain.budget is not config.budget("db")
    assert config.retrier().policy == config.defaults


# -- files -----------------------------------------------------------------------------------

YAML_TEXT = """\
retry_defaults:
  attempts: 3
  backoff: {exponential: {base: 3.0}}
  initial_delay: 500ms
  max_delay: 1m
  jitter: full
  retry_on: [timeout, network, 503, {pattern: reset by peer}]
policies:
  payments:
    max_attempts: 5
    backoff: {fixed: {delay: 2s}}
    deadline: 1h30m
  search:
    retry: 1
    delay: 1s
    timeout: 2m30s
breakers:
  payments: {failure_threshold: 3, recovery_timeout: 30s}
budgets:
  search: {ratio: 0.1, window: 10s}
"""

TOML_TEXT = """\
[retry_defaults]
attempts = 3
backoff = { exponential = { base = 3.0 } }
initial_delay = "500ms"
max_delay = "1m"
jitter = "full"
retry_on = ["timeout", "network", 503, { pattern = "reset by peer" }]

[policies.payments]
max_attempts = 5
backoff = { fixed = { delay = "2s" } }
deadline = "1h30m"

[policies.search]
retry = 1
delay = "1s"
timeout = "2m30s"

[breakers.payments]
failure_threshold = 3
recovery_timeout = "30s"

[budgets.search]
ratio = 0.1
window = "10s"
"""


def _expected_file_config() -> RetryConfig:
    base = RetryPolicy(
        attempts=3,
        backoff=ExponentialBackoff(3.0),
        initial_delay=0.5,
        max_delay=60.0,
        jitter="full",
        retry_on=["timeout", "network", 503, {"pattern": "reset by peer"}],
    )
    return RetryConfig(
        defaults=base,
        policies={
            "payments": base.replace(
                name="payments",
                attempts=5,
                backoff=FixedBackoff(),
                initial_delay=2.0,
                deadline=5400.0,
            ),
            "search": base.replace(name="search", attempts=2, initial_delay=1.0, timeout=150.0),
        },
        breakers={
            "payments": {"failure_threshold": 3, "recovery_timeout": "30s", "name": "payments"}
        },
        budgets={"search": {"ratio": 0.1, "window": "10s"}},
    )


@pytest.mark.parametrize(
    ("filename", "text"),
    [
        pytest.param("retry.yaml", YAML_TEXT, id="yaml", marks=NEEDS_YAML),
        pytest.param("retry.yml", YAML_TEXT, id="yml", marks=NEEDS_YAML),
        pytest.param("RETRY.YAML", YAML_TEXT, id="upper-case-suffix", marks=NEEDS_YAML),
        pytest.param("retry.toml", TOML_TEXT, id="toml"),
    ],
)
def test_files_load_into_the_expected_config(tmp_path: Path, filename: str, text: str) -> None:
    """YAML and TOML files holding the same settings load into the same RetryConfig."""
    path = tmp_path / filename
    path.write_text(text, encoding="utf-8")
    assert load_config(path) == _expected_file_config()
    assert load_config(str(path)) == _expected_file_config()


@pytest.mark.parametrize(
    ("filename", "text", "expected"),
    [
        pytest.param(
            "a.yaml",
            "retry_config:\n  retry: 2\n  delay: 1s\n",
            {"attempts": 3},
            id="yaml-block",
            marks=NEEDS_YAML,
        ),
        pytest.param("b.toml", 'attempts = 4\ntimeout = "5s"\n', {"attempts": 4}, id="toml-bare"),
        pytest.param("c.yaml", "", {}, id="empty-yaml", marks=NEEDS_YAML),
        pytest.param(
            "d.yaml", "jitter: yes\n", {"jitter": True}, id="yaml-1.1-boolean", marks=NEEDS_YAML
        ),
    ],
)
def test_single_block_files(tmp_path: Path, filename: str, text: str, expected: Any) -> None:
    """Files with a `retry_config:` block, bare fields, or nothing at all are the defaults."""
    path = tmp_path / filename
    path.write_text(text, encoding="utf-8")
    assert load_config(path).defaults.attempts == expected.get("attempts", 3)
    if "jitter" in expected:
        assert load_config(path).defaults.jitter == "proportional"


@pytest.mark.parametrize(
    ("filename", "content", "fragment"),
    [
        pytest.param("retry.json", b"{}", "unknown config file type", id="json-suffix"),
        pytest.param("retry", b"", "unknown config file type", id="no-suffix"),
        pytest.param(
            "bad.yaml",
            b"retry_defaults:\n  attempts: 3\n  backoff: [fixed\n",
            "not valid YAML at line 4",
            id="yaml-syntax",
            marks=NEEDS_YAML,
        ),
        pytest.param(
            "bad.yaml",
            b"a: 1\nb: : 2\n",
            "not valid YAML at line 2",
            id="yaml-mapping-values",
            marks=NEEDS_YAML,
        ),
        pytest.param(
            "bad.toml",
            b"[retry_defaults]\nattempts = \n",
            "not valid TOML at line 2",
            id="toml-syntax",
        ),
        pytest.param(
            "bad.toml", b'name = "x', "not valid TOML: Unterminated string", id="toml-at-end"
        ),
        pytest.param("bad.toml", b'name = "\xff"\n', "not UTF-8", id="not-utf8"),
        pytest.param(
            "list.yaml",
            b"- attempts: 3\n",
            "top level must be a mapping",
            id="list",
            marks=NEEDS_YAML,
        ),
        pytest.param(
            "sexagesimal.yaml",
            b"timeout: 1:30\n",
            "a bare number has no unit",
            id="yaml-1:30",
            marks=NEEDS_YAML,
        ),
    ],
)
def test_file_errors_name_the_file(
    tmp_path: Path, filename: str, content: bytes, fragment: str
) -> None:
    """Unknown suffixes and unparsable files raise a ConfigError naming the file and the cause."""
    path = tmp_path / filename
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert fragment in str(caught.value)
    if "bare number" not in fragment:
        assert caught.value.field == str(path)


def test_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    """A path that does not exist raises FileNotFoundError, which names it."""
    with pytest.raises(FileNotFoundError, match=r"absent\.yaml"):
        load_config(tmp_path / "absent.yaml")


def test_yaml_without_pyyaml_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without PyYAML a YAML file raises an ImportError saying which extra to install."""
    path = tmp_path / "retry.yaml"
    path.write_text("attempts: 2\n", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(ImportError, match=r"pip install 'retrymw\[yaml\]'") as caught:
        load_config(path)
    assert caught.value.__suppress_context__


def test_toml_does_not_need_pyyaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TOML files load without PyYAML installed."""
    path = tmp_path / "retry.toml"
    path.write_text("attempts = 2\n", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "yaml", None)
    assert load_config(path).defaults.attempts == 2


# -- to_mapping and round trips ------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        pytest.param(
            RetryPolicy(),
            {
                "name": "default",
                "attempts": 3,
                "backoff": "exponential",
                "initial_delay": "1s",
                "max_delay": "30s",
                "jitter_factor": 0.3,
                "on_failure": "raise",
            },
            id="defaults",
        ),
        pytest.param(RetryPolicy(jitter=False), {"jitter": False}, id="no-jitter-chosen"),
        pytest.param(
            RetryPolicy(
                backoff=LinearBackoff("2s"),
                initial_delay=0.5,
                max_delay=5400,
                timeout=150,
                deadline=1.5,
                retry_budget=1e-7,
                jitter=True,
            ),
            {
                "backoff": {"linear": {"increment": "2s"}},
                "initial_delay": "500ms",
                "max_delay": "1h30m",
                "timeout": "2m30s",
                "deadline": "1.5s",
                "retry_budget": "0.0000001s",
                "jitter": "proportional",
            },
            id="durations",
        ),
        pytest.param(
            RetryPolicy(backoff=CustomBackoff(["250ms", 3600.5]), max_delay=0),
            {"backoff": {"custom": {"delays": ["250ms", "3600.5s"]}}, "initial_delay": "1s"},
            id="custom",
        ),
        pytest.param(
            RetryPolicy(backoff=ExponentialBackoff(3.0), retry_on=["5xx", 429, {"status": [503]}]),
            {"backoff": {"exponential": {"base": 3.0}}, "retry_on": ["server_error", 429, 503]},
            id="exponential-retry-on",
        ),
        pytest.param(
            RetryPolicy(backoff="fibonacci", retry_on=[{"pattern": "x"}, {"status": [502, 504]}]),
            {"backoff": "fibonacci", "retry_on": [{"pattern": "x"}, {"status": [502, 504]}]},
            id="fibonacci-mappings",
        ),
    ],
)
def test_to_mapping_writes_the_canonical_form(
    policy: RetryPolicy, expected: dict[str, Any]
) -> None:
    """`to_mapping` writes readable canonical values, and they load back to the same policy."""
    mapping = to_mapping(policy)
    assert {key: mapping[key] for key in expected} == expected
    assert load_config(mapping).defaults == policy


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        pytest.param(
            RetryPolicy(on_failure="fallback", fallback=lambda _exc: None),
            "on_failure",
            id="fallback",
        ),
        pytest.param(RetryPolicy(retry_on=[ConnectionError]), "retry_on", id="exception-class"),
        pytest.param(
            RetryPolicy(retry_on=on_exception(OSError) | on_status(503)), "retry_on", id="mixed"
        ),
        pytest.param(RetryPolicy(retry_on=~on_status(200)), "retry_on", id="negation"),
    ],
)
def test_to_mapping_rejects_what_config_cannot_hold(policy: RetryPolicy, field: str) -> None:
    """Callables, exception classes and composed matchers have no config form."""
    with pytest.raises(ConfigError, match="no config form") as caught:
        to_mapping(policy)
    assert caught.value.field == field


def test_to_mapping_rejects_a_backoff_of_ones_own() -> None:
    """A Backoff implementation of the user's own has no config form."""

    class Halving:
        def delay(self, n: int, /, initial_delay: float, max_delay: float) -> float:
            return min(max_delay, initial_delay * 0.5**n)

    strategy: Backoff = Halving()
    with pytest.raises(ConfigError, match="no config form") as caught:
        to_mapping(RetryPolicy(backoff=strategy))
    assert caught.value.field == "backoff"


_DURATIONS = st.one_of(
    st.integers(min_value=0, max_value=10**7).map(float),
    # Config refuses non-zero durations below 1ns: a policy with one has no config form.
    st.just(0.0) | st.floats(min_value=1e-9, max_value=1e7, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=10**9).map(lambda ms: ms / 1000),
)
_POSITIVE = _DURATIONS.filter(lambda seconds: seconds > 0)
_BACKOFFS = st.one_of(
    st.just(FixedBackoff()),
    st.just(FibonacciBackoff()),
    st.builds(LinearBackoff, st.none() | _DURATIONS),
    st.builds(ExponentialBackoff, st.floats(min_value=1.0, max_value=100.0)),
    st.builds(CustomBackoff, st.lists(_DURATIONS, max_size=5)),
)
_MATCHER_SPECS = st.sampled_from(
    [
        *("timeout", "network", "server_error", "5xx", "rate_limit", 429, 503),
        *({"pattern": "re?set"}, {"status": [500, 502]}),
    ]
)


_JITTERS: list[bool | str] = [False, True, "full", "equal", "decorrelated"]


@st.composite
def _policies(draw: st.DrawFn) -> RetryPolicy:
    max_delay = draw(_DURATIONS)
    backoff = draw(_BACKOFFS)
    initial_cap = 1e7 if isinstance(backoff, CustomBackoff) else max_delay
    return RetryPolicy(
        name=draw(st.text(min_size=1, max_size=20)),
        attempts=draw(st.integers(min_value=1, max_value=1000)),
        backoff=backoff,
        initial_delay=draw(_DURATIONS.filter(lambda seconds: seconds <= initial_cap)),
        max_delay=max_delay,
        jitter=draw(st.sampled_from(_JITTERS)),
        jitter_factor=draw(st.floats(min_value=0.0, max_value=1.0)),
        retry_on=draw(st.lists(_MATCHER_SPECS, max_size=4)),
        retry_budget=draw(st.none() | _DURATIONS),
        timeout=draw(st.none() | _POSITIVE),
        deadline=draw(st.none() | _POSITIVE),
        on_failure=draw(st.sampled_from(["raise", "continue"])),
        retry_below=draw(st.booleans()),
    )


@given(_policies())
def test_round_trip_through_to_mapping(policy: RetryPolicy) -> None:
    """Loading a policy's canonical mapping gives back an equal policy."""
    assert load_config(to_mapping(policy)).defaults == policy


@NEEDS_YAML
@given(_policies())
def test_round_trip_through_yaml_text(policy: RetryPolicy) -> None:
    """A canonical mapping dumped as YAML text still loads back to an equal policy."""
    import yaml

    text = yaml.safe_dump({"retry_config": to_mapping(policy)})
    assert load_config(yaml.safe_load(text)).defaults == policy


@NEEDS_YAML
def test_round_trip_through_a_yaml_file(tmp_path: Path) -> None:
    """A policy written to a YAML file with `to_mapping` loads back equal."""
    import yaml

    policy = RetryPolicy(
        name="api",
        backoff=CustomBackoff(["100ms", "1s"]),
        initial_delay="250ms",
        retry_on=compile_matcher(["timeout", 503]),
        deadline="1m",
    )
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({"policies": {"api": to_mapping(policy)}}), encoding="utf-8")
    assert load_config(path).policy("api") == policy


def test_retriers_are_shared_per_name_so_circuit_state_is_too() -> None:
    """config.retrier(name) returns one Retrier per name: callers share its breaker state."""
    config = load_config(
        {
            "policies": {"pay": {"attempts": 1}},
            "breakers": {"pay": {"failure_threshold": 1, "failure_rate_threshold": None}},
        }
    )
    first, second = config.retrier("pay"), config.retrier("pay")
    assert first is second
    assert config.retrier() is config.retrier()
    assert config.retrier() is not first

    def down() -> None:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        first.call_sync(down)
    with pytest.raises(CircuitOpenError):
        second.call_sync(down)


@pytest.mark.parametrize(
    ("section", "options", "field"),
    [
        pytest.param("budgets", {"ratio": -1}, "budgets.x.ratio", id="budget-value"),
        pytest.param("budgets", {"ration": 1}, "budgets.x.ration", id="budget-unknown"),
        pytest.param(
            "breakers", {"failur_threshold": 5}, "breakers.x.failur_threshold", id="breaker-unknown"
        ),
    ],
)
def test_bad_breaker_and_budget_options_fail_load_config(
    section: str, options: dict[str, Any], field: str
) -> None:
    """Breakers and budgets are validated by load_config itself, not at first use."""
    with pytest.raises(ConfigError) as caught:
        load_config({section: {"x": options}})
    assert caught.value.field == field
