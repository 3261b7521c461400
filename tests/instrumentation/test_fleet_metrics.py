"""The fleet's health as Prometheus metrics: members, degraded, sync age and lag, tokens leased.

An unreachable store (degraded), and multiprocess mode in a child process against a real
redis-server. Two members of one namespace are in test_otel_fleet.py, read through both
exporters at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from retrymw import RetryBudget
from retrymw.fleet import RedisFleet
from retrymw.instrumentation import PrometheusInstrument
from retrymw.instrumentation import _names as names
from tests.instrumentation import fleet_samples
from tests.redis_server import RedisServer, redis_server

ROOT = Path(__file__).parents[2]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path) as running:
        yield running


def test_an_unreachable_store_reads_degraded() -> None:
    registry = CollectorRegistry()
    PrometheusInstrument(registry)
    with RedisFleet("redis://127.0.0.1:1/0", namespace="{cart}", start=False) as fleet:
        fleet.attach(RetryBudget())
        assert not fleet.sync()
        samples = fleet_samples(registry)
    assert samples[names.FLEET_DEGRADED.prometheus, "(cart)"] == 1
    assert samples[names.FLEET_MEMBERS.prometheus, "(cart)"] == 0
    # Never synced: the view is as old as the fleet, so an alert on the age sees it.
    assert samples[names.FLEET_SYNC_AGE.prometheus, "(cart)"] > 0


_MULTIPROCESS_SCRIPT = """
import json, sys
from prometheus_client import CollectorRegistry, multiprocess, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from retrymw import RetryBudget
from retrymw._core.events import CallFinished
from retrymw.fleet import RedisFleet
from retrymw.instrumentation import PrometheusInstrument

instrument = PrometheusInstrument(CollectorRegistry())
fleet = RedisFleet(sys.argv[1], namespace="mp", start=False)
budget = RetryBudget()
fleet.attach(budget, target="db")
fleet.sync()
budget.try_acquire()
fleet.sync()
instrument.call_finished(CallFinished("p", "db", "GET", "success", 1, 0.01, None))
collected = CollectorRegistry()
multiprocess.MultiProcessCollector(collected)
text = generate_latest(collected).decode()
print(json.dumps([fleet.statistics().tokens_leased] + [
    [sample.name, sample.value]
    for family in text_string_to_metric_families(text)
    for sample in family.samples
    if sample.name.startswith("retrymw_fleet_")
]))
fleet.close()
"""


def test_multiprocess_mode_writes_the_fleet_metrics(server: RedisServer, tmp_path: Path) -> None:
    directory = tmp_path / "multiproc"
    directory.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_MULTIPROCESS_SCRIPT), server.url],
        env=env,
        capture_output=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    leased, *rows = json.loads(result.stdout)
    found = dict(rows)
    assert found[names.FLEET_MEMBERS.prometheus] == 1
    assert found[names.FLEET_DEGRADED.prometheus] == 0
    assert found[names.FLEET_TOKENS_LEASED.prometheus] == leased
    assert leased > 0
