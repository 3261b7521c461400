"""The seeds' own vocabulary maps onto retrymw's (DESIGN §7): stop, per-step blocks, RFC-006."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from retrymw._config.loader import load_config
from retrymw._core.backoff import ExponentialBackoff, FixedBackoff, LinearBackoff
from retrymw._core.errors import ConfigError
from retrymw._core.policy import RetryPolicy

# -- on_failure: stop ----------------------------------------------------------------------------


def test_on_failure_stop_means_raise() -> None:
    """``on_failure: stop`` (stop retrying, raise the last error) loads as ``raise``."""
    config = load_config({"policies": {"export": {"on_failure": "stop", "attempts": 2}}})
    assert config.policy("export").on_failure == "raise"


def test_an_unknown_on_failure_word_is_still_an_error() -> None:
    """Only the seeds' words are mapped; anything else is refused with the field path."""
    with pytest.raises(ConfigError, match='must be "raise", "continue" or "fallback"') as caught:
        load_config({"policies": {"export": {"on_failure": "halt"}}})
    assert caught.value.field == "policies.export.on_failure"


# -- a per-step retry: mapping -------------------------------------------------------------------


def test_a_per_step_retry_mapping_is_a_policy() -> None:
    """``retry: {max_attempts, backoff}`` holds the policy's fields, legacy spellings included."""
    step = {
        "retry": {
            "max_attempts": 4,
            "backoff": {"exponential": {"initial": "200ms", "multiplier": 2.0}},
        }
    }
    policy = load_config({"policies": {"step": step}}).policy("step")
    assert policy == RetryPolicy(
        name="step", attempts=4, backoff=ExponentialBackoff(2.0), initial_delay=0.2
    )
    assert [policy.delay_for(n) for n in (1, 2, 3)] == [0.2, 0.4, 0.8]


def test_fields_beside_the_retry_block_apply_too() -> None:
    """A step's other fields (``timeout``) and the retry block make one policy."""
    step = {"timeout": "5s", "retry": {"attempts": 2, "backoff": "linear"}}
    policy = load_config({"policies": {"step": step}}).policy("step")
    assert (policy.timeout, policy.attempts, policy.backoff) == (5.0, 2, LinearBackoff())


def test_a_retry_block_merges_over_the_defaults() -> None:
    """Like any policy, a per-step block inherits what it does not set."""
    config = load_config(
        {"retry_defaults": {"deadline": "30s"}, "policies": {"s": {"retry": {"max_attempts": 6}}}}
    )
    assert (config.policy("s").attempts, config.policy("s").deadline) == (6, 30.0)


@pytest.mark.parametrize(
    ("step", "field", "fragment"),
    [
        pytest.param(
            {"attempts": 3, "retry": {"max_attempts": 4}},
            "policies.s.retry.max_attempts",
            "also given beside the retry block, as attempts",
            id="count-twice",
        ),
        pytest.param(
            {"timeout": "1s", "retry": {"timeout": "2s"}},
            "policies.s.retry.timeout",
            "also given beside the retry block, as timeout",
            id="same-field-twice",
        ),
        pytest.param(
            {"retry": {"max_attempts": 0}},
            "policies.s.retry.max_attempts",
            "integer >= 1",
            id="bad-field-inside",
        ),
        pytest.param(
            {"retry": {"tries": 3}},
            "policies.s.retry.tries",
            "unknown policy field",
            id="unknown-field-inside",
        ),
        pytest.param(
            {"retry": {"jitter": "lots"}},
            "policies.s.retry.jitter",
            "must be a boolean",
            id="checked-by-the-policy",
        ),
    ],
)
def test_errors_in_a_retry_block_name_the_field(step: Any, field: str, fragment: str) -> None:
    """An error inside a per-step block names its path under ``retry``."""
    with pytest.raises(ConfigError) as caught:
        load_config({"policies": {"s": step}})
    assert caught.value.field == field
    assert fragment in caught.value.problem


def test_a_bad_compact_retry_names_both_accepted_forms() -> None:
    """``retry: many`` says both what the compact and the per-step forms look like."""
    with pytest.raises(ConfigError, match="integer >= 0") as caught:
        load_config({"policies": {"s": {"retry": "many"}}})
    assert "{max_attempts: 3}" in caught.value.example


# -- the compact form without backoff is fixed (RFC-006) ------------------------------------------


def test_the_compact_form_without_backoff_is_fixed() -> None:
    """``retry: 5, delay: 1s`` waits 1, 1, 1, 1, 1 (RFC-006 "fixed (default)"), not 1..16."""
    policy = load_config({"policies": {"upload": {"retry": 5, "delay": "1s"}}}).policy("upload")
    assert policy.backoff == FixedBackoff()
    assert [policy.delay_for(n) for n in range(1, 6)] == [1.0] * 5


def test_the_compact_form_keeps_a_backoff_it_names() -> None:
    """With ``backoff`` given, the compact form uses it."""
    fields = {"retry": 5, "delay": "1s", "backoff": "exponential"}
    policy = load_config({"policies": {"upload": fields}}).policy("upload")
    assert [policy.delay_for(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 8.0, 16.0]


def test_the_compact_form_inherits_a_backoff_the_defaults_name() -> None:
    """A backoff written in the defaults is the file's choice, so a compact policy keeps it."""
    config = load_config(
        {"retry_defaults": {"backoff": "linear"}, "policies": {"u": {"retry": 2, "delay": "1s"}}}
    )
    assert config.policy("u").backoff == LinearBackoff()


def test_other_forms_keep_the_exponential_default() -> None:
    """Only the compact form (``retry: N``) changes the default; ``attempts`` keeps ours."""
    policy = load_config({"policies": {"a": {"attempts": 5, "delay": "1s"}}}).policy("a")
    assert policy.backoff == ExponentialBackoff()


def test_the_compact_form_without_backoff_gives_no_warning() -> None:
    """Fixed by default is the documented meaning, so nothing is warned about."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config({"retry": 2, "delay": "1s"})


# -- the initial/max delay conflict blames what the user wrote ---------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "value", "fragment"),
    [
        pytest.param(
            {"max_delay": "500ms"},
            "retry_defaults.max_delay",
            "500ms",
            "is shorter than the initial delay (1s, the default)",
            id="only-max-written",
        ),
        pytest.param(
            {"delay": "1m", "max_delay": "10s"},
            "retry_defaults.delay",
            "1m",
            "exceeds max_delay (10s)",
            id="compact-delay",
        ),
        pytest.param(
            {"backoff": {"exponential": {"initial": "1m"}}, "max_delay": "10s"},
            "retry_defaults.backoff.exponential.initial",
            "1m",
            "exceeds max_delay (10s)",
            id="legacy-initial",
        ),
        pytest.param(
            {"backoff": {"fixed": {"delay": "1m"}}},
            "retry_defaults.backoff.fixed.delay",
            "1m",
            "exceeds max_delay (30s)",
            id="legacy-fixed-delay",
        ),
        pytest.param(
            {"initial_delay": "45s"},
            "retry_defaults.initial_delay",
            "45s",
            "exceeds max_delay (30s)",
            id="initial-delay",
        ),
    ],
)
def test_the_delay_conflict_names_the_field_as_written(
    fields: dict[str, Any], field: str, value: str, fragment: str
) -> None:
    """The error is on the field the file sets, in its spelling, showing the written value."""
    with pytest.raises(ConfigError) as caught:
        load_config({"retry_defaults": fields})
    assert caught.value.field == field
    assert caught.value.value == value
    assert fragment in caught.value.problem


def test_the_delay_conflict_in_a_policy_names_the_inherited_delay() -> None:
    """A policy lowering max_delay under the inherited delay gets the error on max_delay."""
    with pytest.raises(ConfigError) as caught:
        load_config({"retry_defaults": {"delay": "5s"}, "policies": {"p": {"max_delay": "2s"}}})
    assert caught.value.field == "policies.p.max_delay"
    assert "(5s, inherited)" in caught.value.problem


def test_a_custom_list_may_exceed_max_delay_as_before() -> None:
    """Custom delays ignore initial_delay, so a large one with a small cap is no conflict."""
    fields = {"backoff": {"custom": {"delays": ["1s"]}}, "max_delay": "500ms"}
    assert load_config(fields).defaults.max_delay == 0.5
