"""The demo's upstream speaks the fault vocabulary of `retrymw.testing`, over a real socket."""

from __future__ import annotations

import asyncio
from collections import Counter
from random import Random

import httpx

from retrymw.cli.demo._upstream import FlakyUpstream, Outage, UpstreamScript
from retrymw.testing import FakeClock, Fault, FaultTransport


def test_the_script_is_a_table_of_faults() -> None:
    """Its shares become Fault rates: 429 with Retry-After, then 503/502/504 split 2:1:1."""
    rates = UpstreamScript(failure_rate=0.2, rate_limited=0.1, retry_after=3).rates()
    assert rates == {
        Fault(status=429, retry_after=3): 0.1,
        Fault(status=503): 0.1,
        Fault(status=502): 0.05,
        Fault(status=504): 0.05,
    }


def test_shares_over_one_fail_every_request_429_first() -> None:
    """A 429 share and a 5xx share adding up to more than 1 leave no success, 429s first."""
    rates = UpstreamScript(failure_rate=0.9, rate_limited=0.3).rates()
    assert rates[Fault(status=429, retry_after=1)] == 0.3
    assert sum(rates.values()) == 1.0
    upstream = FlakyUpstream(UpstreamScript(failure_rate=0.9, rate_limited=0.3), rng=Random(1))
    assert 200 not in {upstream.respond()[0] for _ in range(500)}


def test_seeded_draws_repeat_and_follow_the_shares() -> None:
    """The same seed gives the same faults and latencies; the shares hold over many draws."""
    script = UpstreamScript(failure_rate=0.2, rate_limited=0.1, latency=0.02)

    def draws(seed: int) -> list[tuple[Fault, float]]:
        upstream = FlakyUpstream(script, rng=Random(seed))
        return [upstream.next_fault() for _ in range(4000)]

    first = draws(11)
    assert first == draws(11)
    assert first != draws(12)
    counts = Counter(fault.describe() for fault, _ in first)
    assert set(counts) == {"pass", "429", "502", "503", "504"}
    assert abs(counts["429"] / 4000 - 0.1) < 0.02
    assert abs((counts["502"] + counts["503"] + counts["504"]) / 4000 - 0.2) < 0.03
    assert counts["503"] > max(counts["502"], counts["504"])  # half of the 5xx are 503s
    assert all(0.01 <= latency <= 0.03 for _, latency in first)


def test_outage_windows_answer_503_from_their_own_plan() -> None:
    """Inside a window every request meets a 503; outside, the script's draws resume."""
    clock = FakeClock()
    script = UpstreamScript(failure_rate=0.0, rate_limited=0.0, outage=Outage(5.0, 2.0))
    upstream = FlakyUpstream(script, rng=Random(0), clock=clock.now)
    assert {upstream.next_fault()[0].describe() for _ in range(20)} == {"pass"}
    clock.advance(5.0)
    assert upstream.in_outage()
    assert [upstream.respond() for _ in range(20)] == [(503, {})] * 20
    clock.advance(2.0)
    assert not upstream.in_outage()
    assert upstream.respond() == (200, {})


def test_the_upstream_and_fault_transport_answer_a_fault_alike() -> None:
    """One Fault, two injectors: the loopback server's answer carries what FaultTransport's does."""
    script = UpstreamScript(failure_rate=0.0, rate_limited=1.0, retry_after=2, latency=0.0)
    fault = Fault(status=429, retry_after=2)
    with httpx.Client(transport=FaultTransport(script=[fault], clock=FakeClock())) as client:
        injected = client.get("http://upstream.test/")

    async def over_the_socket() -> tuple[httpx.Response, Counter[int]]:
        upstream = FlakyUpstream(script, rng=Random(0))
        url = await upstream.start("127.0.0.1", 0)
        try:
            async with httpx.AsyncClient() as client:
                return await client.get(url), upstream.statuses
        finally:
            await upstream.close()

    served, statuses = asyncio.run(over_the_socket())
    assert (served.status_code, injected.status_code) == (429, 429)
    assert served.headers["Retry-After"] == injected.headers["Retry-After"] == "2"
    assert served.json() == {"status": 429}
    assert statuses == Counter({429: 1})
