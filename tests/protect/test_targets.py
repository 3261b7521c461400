"""PerTarget: one live instance per target, get() never creates, LRU eviction of idle targets."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from retrymw import CircuitBreaker, RetryBudget
from retrymw._core.errors import ConfigError
from retrymw._core.events import BreakerStateChanged
from retrymw._protect.targets import PerTarget
from retrymw._protect.throttle import AdaptiveThrottle
from retrymw.testing import FakeClock


def trip(breaker: CircuitBreaker, times: int = 2) -> None:
    """Report ``times`` failed attempts."""
    for _ in range(times):
        assert breaker.allow_request()
        breaker.record_failure()


def test_get_never_creates(clock: FakeClock) -> None:
    """get() of an unknown target is None and leaves nothing behind; for_target creates it."""
    per_target = PerTarget(CircuitBreaker(clock=clock))
    assert per_target.get("a.example") is None
    assert len(per_target) == 0
    assert "a.example" not in per_target
    created = per_target.for_target("a.example")
    assert per_target.get("a.example") is created
    assert per_target.for_target("a.example") is created
    assert list(per_target) == ["a.example"]


def test_each_target_has_its_own_live_breaker(clock: FakeClock) -> None:
    """A dead target's open circuit is its own: other targets stay closed; get() shows it live."""
    seen: list[BreakerStateChanged] = []
    template = CircuitBreaker(name="http", clock=clock, failure_threshold=2)
    template.add_listener(seen.append)
    per_target = PerTarget(template)
    dead, healthy = per_target.for_target("dead"), per_target.for_target("healthy")
    trip(dead)
    assert dead.name == "http:dead"
    held = per_target.get("dead")
    assert held is not None
    assert held.statistics().state == "open"
    assert healthy.allow_request()
    assert template.statistics().trips == 0  # the template is never used itself
    stats = per_target.statistics()
    assert {target: snapshot.state for target, snapshot in stats.items()} == {  # type: ignore[union-attr]
        "dead": "open",
        "healthy": "closed",
    }
    assert seen == [BreakerStateChanged("http:dead", "closed", "open", 0.0)]


def test_a_dead_target_among_2000_refuses_no_healthy_call(clock: FakeClock) -> None:
    """One dead target among 2 000 (max_targets 1024): no call to a healthy target is refused."""
    per_target = PerTarget(CircuitBreaker(clock=clock, failure_threshold=2))
    refused = 0
    for _ in range(2):
        for index in range(2000):
            target = "dead" if index % 100 == 0 else f"host-{index}"
            breaker = per_target.for_target(target)
            admitted = breaker.allow_request()
            if target == "dead":
                if admitted:
                    breaker.record_failure()
            elif not admitted:
                refused += 1
            else:
                breaker.record_success()
        assert len(per_target) == 1024
    assert refused == 0
    dead = per_target.get("dead")
    assert dead is not None  # an open circuit is not evicted while idle targets can be
    assert dead.statistics().state == "open"


def test_least_recently_used_idle_target_is_evicted_first(clock: FakeClock) -> None:
    """Full: the LRU closed breaker goes; open (and half-open) ones are kept while others can go."""
    per_target = PerTarget(CircuitBreaker(clock=clock, failure_threshold=1), max_targets=3)
    trip(per_target.for_target("a"), 1)  # oldest, but open
    per_target.for_target("b")
    per_target.for_target("c")
    per_target.for_target("b")  # b is now more recent than c
    per_target.for_target("d")
    assert list(per_target) == ["a", "b", "d"]  # c was the LRU idle one
    assert per_target.get("c") is None


def test_when_every_target_holds_back_the_lru_one_is_evicted(clock: FakeClock) -> None:
    """More dead targets than max_targets: memory stays bounded, the LRU one goes."""
    per_target = PerTarget(CircuitBreaker(clock=clock, failure_threshold=1), max_targets=2)
    for target in ("a", "b"):
        trip(per_target.for_target(target), 1)
    per_target.for_target("c")
    assert list(per_target) == ["b", "c"]


def test_budget_per_target_keeps_a_dead_targets_drain_to_itself(clock: FakeClock) -> None:
    """A dead host spending its budget leaves the healthy host's retries untouched."""
    per_target = PerTarget(RetryBudget(clock=clock, min_capacity=3), max_targets=2)
    dead = per_target.for_target("dead")
    while dead.try_acquire():
        pass
    assert per_target.for_target("healthy").try_acquire()
    per_target.for_target("new")  # full: the healthy (idle) budget goes, the drained one stays
    assert list(per_target) == ["dead", "new"]
    assert per_target.for_target("dead") is dead
    assert not dead.try_acquire()


def test_throttle_per_target_and_its_eviction(clock: FakeClock) -> None:
    """Throttles are per target; one that is shedding is kept over an idle one."""
    per_target = PerTarget(AdaptiveThrottle(name="t", clock=clock), max_targets=2)
    shedding = per_target.for_target("dead")
    for _ in range(50):
        shedding.record_failure()
    idle = per_target.for_target("ok")
    assert idle.name == "t:ok"
    assert idle.reject_probability() == 0.0
    per_target.for_target("dead")
    per_target.for_target("ok")  # ok is the most recent, but idle
    per_target.for_target("new")
    assert list(per_target) == ["dead", "new"]
    assert per_target.statistics()["dead"].reject_probability > 0.8  # type: ignore[union-attr]


def test_listeners_reach_every_breaker_now_and_later(clock: FakeClock) -> None:
    """add_listener() reaches the live breakers and the ones made later."""
    per_target = PerTarget(CircuitBreaker(clock=clock, failure_threshold=1))
    early = per_target.for_target("early")
    seen: list[str] = []
    per_target.add_listener(lambda event: seen.append(event.circuit))
    trip(early, 1)
    trip(per_target.for_target("late"), 1)
    assert seen == ["default:early", "default:late"]


def test_only_breakers_have_listeners(clock: FakeClock) -> None:
    """add_listener on a PerTarget of budgets is a TypeError that says why."""
    per_target = PerTarget(RetryBudget(clock=clock))
    with pytest.raises(TypeError, match="only a PerTarget of CircuitBreaker"):
        per_target.add_listener(print)


def test_repr_and_max_targets(clock: FakeClock) -> None:
    """The repr shows the kind and the fill."""
    per_target = PerTarget(RetryBudget(clock=clock), max_targets=8)
    per_target.for_target("a")
    assert repr(per_target) == "<PerTarget RetryBudget targets=1/8>"
    assert per_target.max_targets == 8


@pytest.mark.parametrize(
    ("template", "kwargs", "field"),
    [
        pytest.param("breaker", {}, "template", id="not-a-protection"),
        pytest.param(None, {"max_targets": 0}, "max_targets", id="zero-targets"),
        pytest.param(None, {"max_targets": True}, "max_targets", id="bool-targets"),
    ],
)
def test_invalid_arguments_raise_config_error(
    template: Any, kwargs: dict[str, Any], field: str
) -> None:
    """A PerTarget needs a breaker, budget or throttle and at least one target."""
    with pytest.raises(ConfigError) as caught:
        PerTarget(template if template is not None else CircuitBreaker(), **kwargs)
    assert caught.value.field == field


def test_racing_threads_create_one_instance_per_target(clock: FakeClock) -> None:
    """Eight threads asking for the same new targets all get the same instances."""
    per_target = PerTarget(CircuitBreaker(clock=clock), max_targets=64)
    barrier = threading.Barrier(8)
    got: list[dict[str, int]] = []

    def work() -> None:
        barrier.wait()
        got.append({f"t{n}": id(per_target.for_target(f"t{n}")) for n in range(50)})

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(seen == got[0] for seen in got)
    assert len(per_target) == 50


class PerTargetMachine(RuleBasedStateMachine):
    """Random uses and lookups: get never creates, at most max_targets live, nothing shared."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.max_targets = 3
        self.per_target = PerTarget(CircuitBreaker(clock=self.clock), max_targets=3)
        # Each live target's instance and the failures recorded through that very instance.
        self.model: dict[str, tuple[CircuitBreaker, int]] = {}

    @initialize(max_targets=st.integers(1, 5))
    def configure(self, max_targets: int) -> None:
        self.max_targets = max_targets
        template = CircuitBreaker(clock=self.clock, failure_threshold=3, recovery_timeout="1s")
        self.per_target = PerTarget(template, max_targets=max_targets)

    @rule(name=st.sampled_from("abcdefg"))
    def lookup(self, name: str) -> None:
        before = list(self.per_target)
        found = self.per_target.get(name)
        assert list(self.per_target) == before  # get() never creates, nor reorders
        assert (found is not None) == (name in before)

    @rule(name=st.sampled_from("abcdefg"), failed=st.booleans())
    def use(self, name: str, failed: bool) -> None:
        breaker = self.per_target.for_target(name)
        known, failures = self.model.get(name, (None, 0))
        if known is not breaker:
            failures = 0  # a new instance starts from nothing
        if breaker.allow_request():
            if failed:
                breaker.record_failure()
                failures += 1
            else:
                breaker.record_success()
        self.model[name] = (breaker, failures)
        live = set(self.per_target)
        self.model = {key: value for key, value in self.model.items() if key in live}

    @rule(seconds=st.floats(0.0, 2.0))
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def bounded_and_separate(self) -> None:
        live = list(self.per_target)
        assert len(live) <= self.max_targets
        assert set(live) == set(self.model)
        instances = [self.per_target.get(name) for name in live]
        assert len({id(instance) for instance in instances}) == len(live)  # never shared
        for name, instance in zip(live, instances, strict=True):
            assert instance is self.model[name][0]
            assert instance.name == f"default:{name}"
            # Its failures are exactly the ones recorded through it: nobody else's.
            assert instance.statistics().failures == self.model[name][1]


TestPerTargetMachine = PerTargetMachine.TestCase
TestPerTargetMachine.settings = settings(max_examples=80, stateful_step_count=50, deadline=None)
