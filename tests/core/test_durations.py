"""`parse_duration`: every accepted form, every rejected one, and the field named in errors."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrymw._core.durations import MAX_DURATION, parse_duration
from retrymw._core.errors import ConfigError


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param(0, 0.0, id="zero-int"),
        pytest.param(5, 5.0, id="int-seconds"),
        pytest.param(0.25, 0.25, id="float-seconds"),
        pytest.param(timedelta(minutes=1, milliseconds=500), 60.5, id="timedelta"),
        pytest.param("30s", 30.0, id="seconds"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("2m30s", 150.0, id="minutes-seconds"),
        pytest.param("1h30m", 5400.0, id="hours-minutes"),
        pytest.param("1h0m0s", 3600.0, id="zero-parts"),
        pytest.param("1s500ms", 1.5, id="seconds-milliseconds"),
        pytest.param("1.5s", 1.5, id="decimal"),
        pytest.param("250us", 250e-6, id="microseconds"),
        pytest.param("250µs", 250e-6, id="micro-sign"),
        pytest.param("100ns", 100e-9, id="nanoseconds"),
        pytest.param("  45s\n", 45.0, id="surrounding-whitespace"),
        pytest.param("0s", 0.0, id="zero-text"),
        pytest.param({"secs": 1, "nanos": 500_000_000}, 1.5, id="secs-nanos"),
        pytest.param({"secs": 2}, 2.0, id="secs-only"),
        pytest.param({"nanos": 1_000}, 1e-6, id="nanos-only"),
        pytest.param({}, 0.0, id="secs-nanos-empty"),
    ],
)
def test_accepted_forms(value: Any, seconds: float) -> None:
    """Each accepted duration form converts to the expected float seconds."""
    assert parse_duration(value) == pytest.approx(seconds, rel=1e-12, abs=0.0)


@pytest.mark.parametrize(
    ("value", "field", "fragment"),
    [
        pytest.param("500", "duration", "a bare number has no unit", id="bare-number-text"),
        pytest.param("1.5", "duration", "a bare number has no unit", id="bare-decimal-text"),
        pytest.param("1 second", "duration", "not a duration", id="words"),
        pytest.param("2 minutes", "duration", "not a duration", id="plural-words"),
        pytest.param("2minutes", "duration", "not a duration", id="unit-word"),
        pytest.param("1h 30m", "duration", "not a duration", id="inner-space"),
        pytest.param("30S", "duration", "not a duration", id="upper-case-unit"),
        pytest.param("1e3s", "duration", "not a duration", id="exponent"),
        pytest.param(".5s", "duration", "not a duration", id="no-leading-digit"),
        pytest.param("", "duration", "empty duration", id="empty"),
        pytest.param("   ", "duration", "empty duration", id="blank"),
        pytest.param("-5s", "duration", "must not be negative", id="negative-text"),
        pytest.param(-1, "duration", "must not be negative", id="negative-int"),
        pytest.param(-0.5, "duration", "must not be negative", id="negative-float"),
        pytest.param(timedelta(seconds=-1), "duration", "must not be negative", id="negative-td"),
        pytest.param(math.nan, "duration", "must be finite", id="nan"),
        pytest.param(math.inf, "duration", "must be finite", id="inf"),
        pytest.param("1m1h", "duration", "largest first", id="units-out-of-order"),
        pytest.param("1s2s", "duration", "largest first", id="unit-repeated"),
        pytest.param("1us2µs", "duration", "largest first", id="micro-alias-repeated"),
        pytest.param("١s", "duration", "not a duration", id="non-ascii-digit"),  # noqa: RUF001
        pytest.param(True, "duration", "a boolean is not a duration", id="boolean"),
        pytest.param([1, 2], "duration", "unsupported duration type", id="list"),
        pytest.param(None, "duration", "unsupported duration type", id="none"),
        pytest.param(10**400, "duration", "longer than the maximum", id="huge-int"),
        pytest.param(10**5000, "duration", "longer than the maximum", id="5000-digit-int"),
        pytest.param("3000000h", "duration", "longer than the maximum", id="3000000h"),
        pytest.param(MAX_DURATION + 1, "duration", "longer than the maximum", id="just-too-long"),
        pytest.param(timedelta(days=366), "duration", "longer than the maximum", id="long-td"),
        pytest.param("9" * 5000 + "s", "duration", "must be finite", id="5000-digit-text"),
        pytest.param({"secs": -1}, "duration.secs", "non-negative integer", id="negative-secs"),
        pytest.param({"secs": 1.5}, "duration.secs", "non-negative integer", id="float-secs"),
        pytest.param({"secs": True}, "duration.secs", "non-negative integer", id="bool-secs"),
        pytest.param({"nanos": 10**9}, "duration.nanos", "below 1_000_000_000", id="big-nanos"),
        pytest.param({"secs": 10**400}, "duration.secs", "longer than the maximum", id="huge-secs"),
        pytest.param({"seconds": 1}, "duration", "unknown keys", id="unknown-key"),
    ],
)
def test_rejected_forms(value: Any, field: str, fragment: str) -> None:
    """Each rejected value raises a ConfigError naming the field, the problem and an example."""
    with pytest.raises(ConfigError, match=r"expected e\.g\.") as caught:
        parse_duration(value)
    assert caught.value.field == field
    assert fragment in caught.value.problem


def test_error_names_the_given_field() -> None:
    """The ``field`` argument becomes the error's field path, also for ``{secs, nanos}`` parts."""
    with pytest.raises(ConfigError) as caught:
        parse_duration({"secs": "x"}, field="policies.api.timeout")
    assert caught.value.field == "policies.api.timeout.secs"
    assert str(caught.value).startswith("policies.api.timeout.secs: ")


def test_config_error_is_a_value_error() -> None:
    """A bad duration can be caught as a plain ValueError, as DESIGN §7 promises."""
    with pytest.raises(ValueError, match="bare number"):
        parse_duration("500")


@given(
    hours=st.integers(0, 99),
    minutes=st.integers(0, 59),
    seconds=st.integers(0, 59),
    millis=st.integers(0, 999),
)
def test_composite_text_adds_its_parts(hours: int, minutes: int, seconds: int, millis: int) -> None:
    """Any ``<h>h<m>m<s>s<ms>ms`` text equals the sum of its parts in seconds."""
    text = f"{hours}h{minutes}m{seconds}s{millis}ms"
    expected = hours * 3600 + minutes * 60 + seconds + millis / 1000
    assert parse_duration(text) == pytest.approx(expected, rel=1e-12)


@given(st.floats(min_value=0.0, max_value=MAX_DURATION, allow_nan=False))
def test_numbers_are_seconds(value: float) -> None:
    """A non-negative number up to the maximum is read as that many seconds, unchanged."""
    assert parse_duration(value) == value


def test_the_maximum_is_accepted_in_every_form() -> None:
    """365 days is the longest duration, written as text, a number or {secs, nanos}."""
    assert MAX_DURATION == 365 * 86400
    assert parse_duration("8760h") == parse_duration(int(MAX_DURATION)) == MAX_DURATION
    assert parse_duration({"secs": int(MAX_DURATION)}) == MAX_DURATION
