"""``retry_below`` in config files: the per-policy opt-out of retrying at one layer (issue 16).

A policy with ``retry_below: true`` retries even what a retrymw call nested in it already
retried and gave up on (DESIGN §12); config files accept it like any other policy field, check
it as a boolean, and `to_mapping` writes it back when it is on.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from retrymw import Retrier
from retrymw._config.loader import load_config, to_mapping
from retrymw._core.errors import ConfigError
from retrymw._core.policy import RetryPolicy
from retrymw.cli import main
from retrymw.testing import FakeClock

NEEDS_YAML = pytest.mark.skipif(
    importlib.util.find_spec("yaml") is None, reason="PyYAML (the yaml extra) is not installed"
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param({"retry_below": True}, {"default": True}, id="bare-fields"),
        pytest.param({"retry_config": {"retry_below": True}}, {"default": True}, id="block"),
        pytest.param(
            {"retry_defaults": {"retry_below": True}, "policies": {"a": {}, "b": {}}},
            {"default": True, "a": True, "b": True},
            id="inherited",
        ),
        pytest.param(
            {"retry_defaults": {"retry_below": True}, "policies": {"a": {"retry_below": False}}},
            {"default": True, "a": False},
            id="overridden",
        ),
        pytest.param(
            {"policies": {"a": {"retry_below": True}, "b": {"attempts": 2}}},
            {"default": False, "a": True, "b": False},
            id="one-policy",
        ),
        pytest.param(
            {"policies": {"a": {"retry": {"max_attempts": 3, "retry_below": True}}}},
            {"a": True},
            id="per-step-block",
        ),
    ],
)
def test_retry_below_is_read_merged_and_inherited(
    source: dict[str, Any], expected: dict[str, bool]
) -> None:
    """``retry_below`` sets the policy field, over the defaults and per policy."""
    config = load_config(source)
    for name, value in expected.items():
        policy = config.defaults if name == "default" else config.policy(name)
        assert policy.retry_below is value, name


@pytest.mark.parametrize(
    ("value", "field"),
    [
        pytest.param("yes", "retry_below", id="text"),
        pytest.param("true", "retry_below", id="text-true"),
        pytest.param(1, "retry_below", id="int"),
        pytest.param(0.0, "retry_below", id="float"),
        pytest.param(None, "retry_below", id="null"),
        pytest.param([True], "retry_below", id="list"),
    ],
)
def test_a_non_boolean_is_refused_with_field_value_and_example(value: Any, field: str) -> None:
    """Anything but a boolean is a ConfigError naming the path, the value and an example."""
    with pytest.raises(ConfigError) as caught:
        load_config({"policies": {"payments": {"retry_below": value}}})
    error = caught.value
    assert error.field == f"policies.payments.{field}"
    assert error.value == value
    assert error.example == "retry_below: true"
    assert isinstance(error, ValueError)
    assert "must be true or false" in str(error)


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        pytest.param(
            "p.yaml",
            'retry_defaults:\n  attempts: 3\npolicies:\n  payments:\n    retry_below: "yes"\n',
            5,
            id="yaml",
            marks=NEEDS_YAML,
        ),
        pytest.param(
            "p.toml", "[policies.payments]\nattempts = 2\nretry_below = 1\n", 3, id="toml"
        ),
    ],
)
def test_check_reports_a_bad_retry_below_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, line: int
) -> None:
    """`retrymw check` names FILE:LINE, the field path, the value and an accepted example."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr()
    report = out.out + out.err
    assert f"{name}:{line}: policies.payments.retry_below: must be true or false" in report
    assert "expected e.g. retry_below: true" in report


@pytest.mark.parametrize(
    ("name", "text"),
    [
        pytest.param(
            "p.yaml",
            "policies:\n  outer:\n    retry_below: true\n  inner:\n    retry_below: false\n",
            id="yaml",
            marks=NEEDS_YAML,
        ),
        pytest.param(
            "p.toml",
            "[policies.outer]\nretry_below = true\n[policies.inner]\nretry_below = false\n",
            id="toml",
        ),
    ],
)
def test_files_load_retry_below(tmp_path: Path, name: str, text: str) -> None:
    """YAML and TOML booleans both load."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    config = load_config(path)
    assert config.policy("outer").retry_below is True
    assert config.policy("inner").retry_below is False


@pytest.mark.parametrize("below", [True, False], ids=["on", "off"])
def test_to_mapping_writes_retry_below_only_when_on(below: bool) -> None:
    """The dump carries the opt-out when it is on and loads back to the same policy."""
    policy = RetryPolicy(name="outer", retry_below=below)
    mapping = to_mapping(policy)
    assert ("retry_below" in mapping) is below
    assert mapping.get("retry_below", False) is below
    assert load_config(mapping).defaults == policy


class AlwaysFails:
    """Raises a fresh ``ConnectionError`` on every call, and counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        raise ConnectionError(f"down (call {self.calls})")


@pytest.mark.parametrize(("below", "executions"), [(False, 3), (True, 9)], ids=["off", "on"])
def test_a_configured_retry_below_changes_what_the_outer_layer_retries(
    below: bool, executions: int
) -> None:
    """Outer and inner policies from one file, 3 attempts each, always failing: the outer one
    stops at the inner give-up (3 executions) unless its config says ``retry_below: true`` (9)."""
    config = load_config(
        {
            "retry_defaults": {"attempts": 3, "initial_delay": "10ms", "retry_on": "network"},
            "policies": {"outer": {"retry_below": below}, "inner": {}},
        }
    )
    clock = FakeClock()
    inner = Retrier(config.policy("inner"), clock=clock, budget=None)
    outer = Retrier(config.policy("outer"), clock=clock, budget=None)
    fn = AlwaysFails()
    with pytest.raises(ConnectionError):
        outer.call_sync(lambda: inner.call_sync(fn))
    assert fn.calls == executions
