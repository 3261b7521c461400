"""Fleet-wide pacing: a member's share and limit (`SharedPacer`, FakeClock), the store's rule
for the shared limit (real redis), and its replies checked.

The arithmetic: a member paces at ``limit * HEADROOM * share``, the share the store's max-min
fair rule gives over the members' needs (``1 / members`` for equal demand, or for a member not
measured yet); before the store answered, at one over ``assumed_members``; degraded, at one
over the members it last saw, against the last limit.
"""

from __future__ import annotations

import itertools

import pytest

from retrymw import Pacer, PerTarget, Retrier
from retrymw._protect.pacer import HEADROOM, RateLimits
from retrymw.fleet import RedisFleet
from retrymw.fleet._pacer import MEASURE_OVER, MIN_NEED, REPORT_EVERY, ROOM_TO_GROW, SharedPacer
from retrymw.fleet._replies import PacerReply, ReplyError, parse_step
from retrymw.testing import FakeClock

from .conftest import RedisServer


def gaps(pacer: Pacer, clock: FakeClock, sends: int = 6) -> list[float]:
    """The waits between consecutive slots of a saturated sender (in the pacer's steady
    state: the first slots go at once within the burst)."""
    waits = [pacer.reserve(clock.now()).wait for _ in range(sends)]
    return [round(later - earlier, 9) for earlier, later in itertools.pairwise(waits)]


def learned(pacer: Pacer, clock: FakeClock, limit: float) -> None:
    pacer.learn(clock.now(), status=200, limits=RateLimits(requests=limit))


def test_before_the_store_answers_a_member_paces_at_one_over_the_assumed_members() -> None:
    clock = FakeClock()
    pacer = Pacer(name="api", clock=clock)
    link = SharedPacer(pacer, "api:", 1, assumed_members=10)
    learned(pacer, clock, 50.0)
    assert pacer.share == pytest.approx(0.1)
    assert gaps(pacer, clock) == [pytest.approx(1 / (50 * HEADROOM * 0.1))] * 5
    assert link.local_share() == pytest.approx(0.1)


def test_the_fleet_limit_and_members_set_the_pace() -> None:
    clock = FakeClock()
    pacer = Pacer(name="api", clock=clock)
    link = SharedPacer(pacer, "api:", 1, assumed_members=10)
    link.apply(PacerReply(limit=50.0, members=4), 4)
    # No limit of its own learned yet: the fleet's governs, at a quarter.
    assert pacer.share == 0.25
    assert pacer.statistics().fleet_limit == 50.0
    assert gaps(pacer, clock) == [pytest.approx(1 / (50 * HEADROOM / 4))] * 5


def test_the_lower_of_the_own_and_the_fleet_limit_governs() -> None:
    clock = FakeClock()
    pacer = Pacer(name="api", clock=clock)
    link = SharedPacer(pacer, "api:", 1, assumed_members=10)
    learned(pacer, clock, 100.0)
    link.apply(PacerReply(limit=40.0, members=2), 2)  # another member learned 40
    assert gaps(pacer, clock) == [pytest.approx(1 / (40 * HEADROOM / 2))] * 5
    clock.advance(10.0)
    link.apply(PacerReply(limit=200.0, members=2), 2)  # the fleet's is higher: our own governs
    assert gaps(pacer, clock) == [pytest.approx(1 / (100 * HEADROOM / 2))] * 5


def test_degraded_a_member_keeps_the_last_limit_and_one_over_the_last_members() -> None:
    clock = FakeClock()
    pacer = Pacer(name="api", clock=clock)
    link = SharedPacer(pacer, "api:", 1, assumed_members=10)
    link.apply(PacerReply(limit=50.0, members=5), 5)
    link.fall_back()
    assert pacer.share == pytest.approx(0.2)
    assert pacer.statistics().fleet_limit == 50.0
    assert gaps(pacer, clock) == [pytest.approx(1 / (50 * HEADROOM / 5))] * 5
    assert link.due()  # it reports again once the store answers


def test_joining_or_degraded_a_member_counts_the_namespace_if_it_saw_more_there() -> None:
    # It last saw 2 members pacing the target, but 4 processes in the namespace: the other two
    # may have joined the target since, so it paces at a quarter until the store answers.
    clock = FakeClock()
    pacer = Pacer(name="api", clock=clock)
    link = SharedPacer(pacer, "api:", 1, assumed_members=10)
    link.apply(PacerReply(limit=50.0, members=2), 4)
    assert pacer.share == 0.25  # joining: the namespace's count, the others may be joining too
    link.apply(PacerReply(limit=50.0, members=2), 4)
    assert pacer.share == 0.5  # joined: the target's own count
    link.fall_back()
    assert pacer.share == 0.25


def test_a_detached_pacer_paces_alone_again() -> None:
    clock = FakeClock()
    pacer = Pacer(name="api", clock=clock)
    link = SharedPacer(pacer, "api:", 1, assumed_members=10)
    link.apply(PacerReply(limit=50.0, members=4), 4)
    link.detach()
    assert pacer.share == 1.0
    assert pacer.statistics().fleet_limit is None
    assert pacer.reserve(clock.now()).wait == 0.0  # nothing learned of its own: unpaced


def test_a_member_reports_what_it_learned_when_it_changes_and_every_report_period() -> None:
    clock = FakeClock()
    pacer = Pacer(name="api", clock=clock)
    link = SharedPacer(pacer, "a%3Ab:h", 7, assumed_members=10)
    assert link.due()  # a new link joins at once
    assert link.record() == ("p 7 a%3Ab:h - - 1", 0)  # no limit, no need measured yet
    link.apply(PacerReply(limit=None, members=1), 1)
    assert not link.due()
    learned(pacer, clock, 50.0)
    assert link.due()
    assert link.record() == ("p 7 a%3Ab:h 50.0 - 2", 0)  # each newer than the last (fence)
    assert not link.due()
    clock.advance(MEASURE_OVER)
    assert link.due()  # measured: it asked for nothing, so it asks for the least
    assert link.record() == (f"p 7 a%3Ab:h 50.0 {MIN_NEED!r} 3", 0)
    assert not link.due()  # quiet, and its need can fall no further
    clock.advance(REPORT_EVERY - 0.5)
    assert not link.due()
    clock.advance(0.5)
    assert link.due()  # repeated, so that the store keeps it against higher limits
    link.resend()
    assert link.due()


def test_a_member_records_its_need_and_whether_it_is_held_back() -> None:
    """Its need is what it asked for (sends and refusals) over the last second with room to
    grow, ``+`` while that nearly fills the rate it paces at; once it stops sending, one more
    record a second later gives its share back."""
    clock = FakeClock()
    pacer = Pacer(name="api", clock=clock)
    link = SharedPacer(pacer, "api:", 1, assumed_members=4)
    learned(pacer, clock, 50.0)
    for _ in range(2):  # joining, then joined, at a quarter
        link.record()
        link.apply(PacerReply(limit=50.0, members=4, share=0.25), 4)
    clock.advance(1.0)
    for _ in range(4):  # 4/s asked, well within 12.25/s
        pacer.reserve(clock.now())
    assert link.record()[0] == f"p 1 api: 50.0 {4 * ROOM_TO_GROW!r} 3"
    clock.advance(1.0)
    for _ in range(12):  # nearly all its 12.25/s: held back (the refused ones count)
        pacer.reserve(clock.now(), within=0.1)
    assert pacer.statistics().refused > 0
    assert link.record()[0] == "p 1 api: 50.0 + 4"
    assert not link.due()  # measured a moment ago
    clock.advance(1.0)
    assert link.due()  # no send since, but its need falls
    assert link.record()[0] == f"p 1 api: 50.0 {MIN_NEED!r} 5"
    assert not link.due()


def test_replies_are_checked() -> None:
    def pacer_reply(line: str) -> object:
        return parse_step(f"1 0 1 -\n{line}", ["p"], [0]).records[0]

    assert pacer_reply("50 4 0.25") == PacerReply(limit=50.0, members=4, share=0.25)
    assert pacer_reply("- 1") == PacerReply(limit=None, members=1)
    assert pacer_reply("0.83333333333333337 2 1") == PacerReply(
        limit=0.8333333333333334, members=2, share=1.0
    )
    for garbage in [
        "0 4 1",
        "-1 4 1",
        "nan 4 1",
        "inf 4 1",
        "1e10 4 1",
        "50 0 1",
        "50",
        "50 4",  # a limit comes with a share
        "50 4 0",
        "50 4 1.5",
        "50 4 x",
        "- 1 1",
        "x 1",
    ]:
        with pytest.raises(ReplyError):
            pacer_reply(garbage)
    with pytest.raises(ReplyError):
        pacer_reply("9" * 100_000 + " 1")


# -- the store's rule (real redis) --------------------------------------------------------------


def step(fleets: list[RedisFleet], pacers: list[Pacer], clock: FakeClock) -> None:
    """Each member sends once (a pacer that sends hears the fleet's news) and steps."""
    for fleet, pacer in zip(fleets, pacers, strict=True):
        pacer.reserve(clock.now())
        assert fleet.sync()


def test_the_lowest_limit_wins_and_members_share_it(fleets: list[RedisFleet]) -> None:
    clock = FakeClock()
    pacers = [Pacer(name="api", clock=clock) for _ in fleets]
    for fleet, pacer in zip(fleets, pacers, strict=True):
        fleet.attach(pacer, target="llm")
    learned(pacers[0], clock, 50.0)
    learned(pacers[1], clock, 40.0)  # one member's answers say less: it slows everyone
    step(fleets, pacers, clock)
    step(fleets, pacers, clock)
    for pacer in pacers:
        stats = pacer.statistics()
        assert stats.fleet_limit == 40.0
        assert stats.share == pytest.approx(1 / 3)
    learned(pacers[1], clock, 60.0)  # a higher report does not replace a recent lower one
    step(fleets, pacers, clock)
    assert [p.statistics().fleet_limit for p in pacers] == [40.0] * 3
    learned(pacers[2], clock, 30.0)  # a lower one does, at once
    step(fleets, pacers, clock)
    step(fleets, pacers, clock)
    assert [p.statistics().fleet_limit for p in pacers] == [30.0] * 3
    fleets[2].detach(pacers[2])  # a member leaves (told at its next step): the others' share grows
    assert fleets[2].sync()
    step(fleets[:2], pacers[:2], clock)
    assert [p.share for p in pacers[:2]] == [0.5, 0.5]
    assert pacers[2].share == 1.0
    assert pacers[2].statistics().fleet_limit is None


def test_an_idle_pacer_sends_no_record(fleets: list[RedisFleet]) -> None:
    clock = FakeClock()
    pacer = Pacer(name="api", clock=clock)
    fleets[0].attach(pacer, target="llm")
    assert fleets[0].sync()
    assert fleets[0].statistics().records == 1  # joining
    assert fleets[0].sync()
    assert fleets[0].statistics().records == 0  # nothing sent, nothing learned: quiet
    pacer.reserve(clock.now())
    assert fleets[0].sync()
    assert fleets[0].statistics().records == 1


def test_a_retrier_and_a_per_host_pacer_join_the_fleet(fleets: list[RedisFleet]) -> None:
    pacers = PerTarget(Pacer(name="api"))
    Retrier(pacer=pacers, fleet=fleets[0], instruments=())
    solo = Pacer(name="solo")
    Retrier(pacer=solo, fleet=fleets[1], instruments=())
    pacer = pacers.for_target("example.com")
    for _ in range(2):  # joining, then joined
        for fleet, paced in ((fleets[0], pacer), (fleets[1], solo)):
            paced.reserve(paced.clock.now())
            assert fleet.sync()
    assert fleets[0].statistics().targets == 1
    assert fleets[1].statistics().targets == 1
    # Each the only member pacing its target (a namespace of two: a half while joining).
    assert pacer.share == solo.share == 1.0


def test_an_older_report_is_fenced_off(redis_server: RedisServer) -> None:
    """A link's report not newer than the last taken (a retried or delayed step) is ignored."""
    from retrymw.fleet._scripts import STEP

    client = redis_server.client()

    def report(line: str) -> str:
        raw = client.eval(STEP, 1, "retrymw:{fence}:members", "m1", 1000, 60000, -1, line)
        assert isinstance(raw, bytes)
        return raw.decode().split("\n")[1]

    assert report("p 1 api: 40.0 - 5") == "40 1 1"  # alone: the whole limit
    assert report("p 1 api: 30.0 - 4") == "40 1 1"  # older than report 5: not taken
    assert report("p 1 api: 30.0 - 6") == "30 1 1"
    assert report("p 1 api: - - 7") == "30 1 1"  # nothing learned: the fleet's limit stands


def test_shares_follow_demand_max_min_fair(fleets: list[RedisFleet]) -> None:
    """One member asking for far more than its equal part, two asking for little: the two get
    what they ask for with room to grow, the busy one the rest; when it goes quiet, every need
    is met and the rest is split evenly. The shares never sum past the whole limit."""
    clock = FakeClock()
    pacers = [Pacer(name="api", clock=clock) for _ in fleets]
    for fleet, pacer in zip(fleets, pacers, strict=True):
        fleet.attach(pacer, target="llm")
        learned(pacer, clock, 60.0)

    def second(asked: list[int]) -> None:
        """Each member asks for ``asked[i]`` sends in one second, two more with the steps
        (`step` reserves once each round: the last round's falls in this second); then two
        rounds of steps (the second hears every member's new need)."""
        for pacer, count in zip(pacers, asked, strict=True):
            for _ in range(count):
                pacer.reserve(clock.now())
        clock.advance(1.0)
        for _ in range(2):
            step(fleets, pacers, clock)

    step(fleets, pacers, clock)
    step(fleets, pacers, clock)
    assert [p.share for p in pacers] == [pytest.approx(1 / 3)] * 3  # nothing measured yet
    second([38, 0, 0])  # 40/s, more than the busy member's 19.6/s: it is held back
    quiet_need = 2 * ROOM_TO_GROW  # 2/s asked
    assert pacers[1].share == pytest.approx(quiet_need / 60)
    assert pacers[2].share == pytest.approx(quiet_need / 60)
    assert pacers[0].share == pytest.approx((60 - 2 * quiet_need) / 60)
    assert sum(p.share for p in pacers) <= 1.0 + 1e-9
    second([0, 0, 0])  # the busy member went quiet: it gives its share back, all equal again
    assert [p.share for p in pacers] == [pytest.approx(1 / 3)] * 3
