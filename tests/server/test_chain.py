"""Goals (issue 16) across services, against real servers on 127.0.0.1: with the companion, a
chain whose every hop retries 3 times sends the bottom service about 3 requests per call, not
3 ** (hops - 1), and succeeds at least as often as retrying at one layer only."""

from __future__ import annotations

import httpx
import pytest

from tests.server.chain import HOP_POLICY, Leaf, chain

CALLS = 10
KINDS = [pytest.param("asgi", id="asgi-uvicorn"), pytest.param("wsgi", id="wsgi-werkzeug")]


def call_top(url: str, calls: int) -> list[int]:
    """Make ``calls`` top-level calls, one after the other, without retries; their statuses."""
    with httpx.Client(timeout=10.0) as client:
        return [client.get(f"{url}items/{number}").status_code for number in range(calls)]


@pytest.mark.parametrize("kind", KINDS)
def test_three_hops_send_the_leaf_three_requests_per_call(kind: str) -> None:
    """Goal: A -> B -> C, C always 503, every hop retries 3x: C sees <= 3.3 per call (was 9)."""
    leaf = Leaf()
    with chain(3, leaf, kind=kind) as running:
        statuses = call_top(running.url, CALLS)
        assert statuses == [503] * CALLS
        assert leaf.requests / CALLS <= 3.3
        assert leaf.requests == 3 * CALLS
        # What each service saw: B only first attempts (A did not retry it), C 1 + 2 retries.
        assert running.inbound("b", "first") == CALLS
        assert running.inbound("b", "retry") == 0
        assert running.inbound("c", "first") == CALLS
        assert running.inbound("c", "retry") == 2 * CALLS
        assert running.inbound("a", "unknown") == CALLS  # the top-level client sends no header


def test_four_hops_send_the_leaf_three_requests_per_call() -> None:
    """Goal: four hops, D always 503: D sees <= 3.3 per call (was 27)."""
    leaf = Leaf()
    with chain(4, leaf) as running:
        assert call_top(running.url, CALLS) == [503] * CALLS
        assert leaf.requests / CALLS <= 3.3
        assert running.inbound("b", "retry") == running.inbound("c", "retry") == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_handler_that_raises_is_answered_final_too(kind: str) -> None:
    """B raises on C's 503 (raise_for_status): its 500 carries x-should-retry: false."""
    leaf = Leaf()
    with chain(3, leaf, kind=kind, raises=True) as running:
        with httpx.Client(timeout=10.0) as client:
            answer = client.get(f"{running.url}items/1")
        assert answer.status_code == 500
        assert leaf.requests == 3


def test_without_the_companion_the_attempts_multiply() -> None:
    """The same chains without the companion: 9 for three hops, 27 for four (the old figures)."""
    for hops, expected in ((3, 9), (4, 27)):
        leaf = Leaf()
        with chain(hops, leaf, companion=False) as running:
            assert call_top(running.url, 1) == [503]
        assert leaf.requests == expected


def test_a_flaky_leaf_succeeds_as_often_as_retrying_at_one_layer() -> None:
    """Goal: C fails 30% of requests (seeded): end-to-end success with every hop retrying and
    the companion >= success when only the top hop retries (the others send once)."""
    calls = 60
    once = HOP_POLICY.replace(attempts=1)
    layered, single = Leaf(p=0.3, seed=16), Leaf(p=0.3, seed=16)
    with chain(3, layered) as running:
        every_hop = call_top(running.url, calls).count(200)
    with chain(3, single, policies=[HOP_POLICY, once]) as running:
        one_layer = call_top(running.url, calls).count(200)
    assert every_hop >= one_layer
    assert every_hop > calls * 0.9  # 1 - 0.3 ** 3 = 0.973 expected
    assert layered.requests / calls <= 3.3
