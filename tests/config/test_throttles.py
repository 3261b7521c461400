"""``throttles:`` configures an AdaptiveThrottle per policy name, like breakers and budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from retrymw import AdaptiveThrottle, ConfigError, LoadShedError, load_config
from retrymw.cli._check import check_data
from retrymw.httpx import TransportLoadShedError
from retrymw.testing import instant

CONFIG = {
    "policies": {"search": {"attempts": 2, "delay": "1ms"}},
    "throttles": {"search": {"k": 1.5, "window": "30s", "max_reject": 0.5}},
}


def test_a_configured_throttle_is_built_with_its_options_and_named_after_its_key() -> None:
    """throttles.search builds AdaptiveThrottle(name="search", k=1.5, window=30 s, ...)."""
    throttle = load_config(CONFIG).throttle("search")
    assert isinstance(throttle, AdaptiveThrottle)
    stats = throttle.statistics()
    assert (stats.name, stats.k, stats.window, stats.max_reject) == ("search", 1.5, 30.0, 0.5)


def test_the_retrier_and_the_transport_use_the_very_throttle_of_the_config() -> None:
    """config.throttle(name) is the object config.retrier(name) and config.transport(name) use."""
    config = load_config(CONFIG)
    throttle = config.throttle("search")
    assert config.retrier("search").throttle is throttle
    transport = config.transport("search", httpx.MockTransport(lambda r: httpx.Response(200)))
    assert transport.retrier.throttle is throttle
    assert config.retrier().throttle is None  # the defaults have no throttle


def test_a_configured_throttle_sheds_a_dead_dependency() -> None:
    """Once its window is full of failures the shared throttle sheds calls (LoadShedError)."""
    config = load_config(CONFIG)
    retrier = config.retrier("search")

    def dead() -> None:
        raise ConnectionError("refused")

    def shed() -> bool:
        try:
            retrier.call_sync(dead)
        except LoadShedError:
            return True
        except ConnectionError:
            return False
        raise AssertionError("a dead dependency answered")  # pragma: no cover

    with instant():
        assert sum(shed() for _ in range(200)) > 0
    assert config.throttle("search").statistics().reject_probability > 0.0
    assert issubclass(TransportLoadShedError, LoadShedError)


@pytest.mark.parametrize(
    ("options", "path"),
    [
        pytest.param({"kk": 2.0}, "throttles.search.kk", id="unknown-option"),
        pytest.param({"window": 10}, "throttles.search.window", id="bare-number-window"),
        pytest.param({"max_reject": 2.0}, "throttles.search", id="out-of-range"),
        pytest.param({"overload_k": 0.5}, "throttles.search", id="overload-k-below-one"),
        pytest.param({"overload_k": "high"}, "throttles.search", id="overload-k-not-a-number"),
        pytest.param({"clock": "now"}, "throttles.search.clock", id="clock-is-code-not-data"),
    ],
)
def test_bad_throttle_options_name_their_path(options: dict[str, object], path: str) -> None:
    """load_config refuses a bad throttle at once, naming where it is."""
    with pytest.raises(ConfigError) as caught:
        load_config({**CONFIG, "throttles": {"search": options}})
    assert str(caught.value.field).startswith(path)


def test_throttles_in_a_yaml_file(tmp_path: Path) -> None:
    """The section reads from YAML like the others."""
    pytest.importorskip("yaml")
    path = tmp_path / "retry.yaml"
    path.write_text(
        "policies:\n  search: {attempts: 2}\nthrottles:\n  search: {k: 3.0, window: 5s}\n",
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.throttles["search"]["k"] == 3.0
    assert config.retrier("search").throttle is config.throttle("search")


def test_overload_k_is_a_throttle_option_and_check_validates_it() -> None:
    """throttles.<name>.overload_k sets the overload term's multiplier; `retrymw check` accepts
    it and reports a bad one by its path, with the value and an example."""
    search: dict[str, Any] = {"search": {}}  # the policy the throttle binds to
    config = load_config({"policies": search, "throttles": {"search": {"overload_k": 1.2}}})
    assert config.throttle("search").statistics().overload_k == 1.2
    default = load_config({"policies": search, "throttles": {"search": {}}})
    assert default.throttle("search").statistics().overload_k
    assert (
        check_data({"policies": search, "throttles": {"search": {"overload_k": 1.2}}}).errors == []
    )
    bad = check_data({"policies": search, "throttles": {"search": {"overload_k": 0.5}}})
    assert len(bad.errors) == 1
    message = bad.errors[0].message
    assert message.startswith("throttles.search.overload_k")
    assert "got 0.5, expected e.g. 1.4" in message
