"""``pacers:`` and ``hedges:`` in a config file: built once per name, bound to the policy of that
name, checked at load time with errors naming the path."""

from __future__ import annotations

from typing import Any

import pytest

from retrymw import ConfigError, Hedge, Pacer, PerTarget, load_config
from retrymw.cli._check import check_data

CONFIG: dict[str, Any] = {
    "policies": {"llm": {"attempts": 4}, "plain": {}},
    "pacers": {"llm": {"rate": "50/s", "burst": 10, "tokens": "10000/min"}},
    "hedges": {"llm": {"after": "50ms", "max_extra": 2}},
}


def test_a_pacer_and_a_hedge_bind_to_the_policy_of_their_name() -> None:
    config = load_config(CONFIG)
    pacer, hedge = config.pacer("llm"), config.hedge("llm")
    assert isinstance(pacer, Pacer)
    assert pacer.name == "llm"  # named after its key
    stats = pacer.statistics()
    assert stats.rate == pytest.approx(50.0)
    assert stats.tokens_rate == pytest.approx(10_000 / 60)
    assert isinstance(hedge, Hedge)
    assert config.pacer("llm") is pacer  # built once, shared
    retrier = config.retrier("llm")
    assert retrier.pacer is pacer
    assert retrier.hedge is hedge
    assert config.retrier("plain").pacer is None  # nothing configured under that name
    assert config.retrier("plain").hedge is None


def test_transports_get_the_pacer_per_host_and_only_the_async_one_hedges() -> None:
    config = load_config(CONFIG)
    sync, concurrent = config.transport("llm"), config.async_transport("llm")
    for transport in (sync, concurrent):
        per_host = transport.retrier.pacer
        assert isinstance(per_host, PerTarget)
        assert per_host.template is config.pacer("llm")
    assert concurrent.retrier.hedge is config.hedge("llm")
    assert sync.retrier.hedge is None  # a blocking attempt cannot be raced


@pytest.mark.parametrize(
    ("section", "options", "field", "fragment"),
    [
        ("pacers", {"rate": "fast"}, "pacers.llm.rate", "50/s"),
        ("pacers", {"burst": 0}, "pacers.llm.burst", "[1, 1000000]"),
        ("pacers", {"cost": "len"}, "pacers.llm.cost", "is code, not data"),
        ("pacers", {"speed": 3}, "pacers.llm.speed", "unknown Pacer option"),
        ("hedges", {"after": "p150"}, "hedges.llm.after", "p95"),
        ("hedges", {"max_extra": 0}, "hedges.llm.max_extra", "max_extra"),
    ],
)
def test_bad_options_fail_load_config_naming_the_path(
    section: str, options: dict[str, Any], field: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({"policies": {"llm": {}}, section: {"llm": options}})
    assert caught.value.field == field
    assert fragment in str(caught.value)


@pytest.mark.parametrize("section", ["pacers", "hedges"])
def test_a_name_that_is_no_policy_is_refused(section: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({"policies": {"llm": {}}, section: {"lm": {}}})
    assert caught.value.field == f"{section}.lm"
    assert "did you mean 'llm'" in str(caught.value)


def test_check_counts_pacers_and_hedges_and_reports_their_errors() -> None:
    report = check_data(CONFIG)
    assert (report.errors, report.pacers, report.hedges) == ([], ["llm"], ["llm"])
    bad = check_data({"policies": {"llm": {}}, "pacers": {"llm": {"rate": "x", "cost": 1}}})
    assert sorted(finding.message.split(": ")[0] for finding in bad.errors) == [
        "pacers.llm.cost",
        "pacers.llm.rate",
    ]
