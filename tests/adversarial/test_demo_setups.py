"""``retrymw demo`` shows the recommended protection and what it costs (issue 29, "The demo").

The demo's default is the setup docs/protection.md recommends for one dependency that is up or
down (retries, the default budget and a breaker with the default, sane thresholds, read from
`retrymw.simulate.SETUPS`); ``--setup``, ``--[no-]breaker``, ``--[no-]throttle`` and
``--[no-]budget`` change what the transport is given; the summary counts the calls the
protection refused while the upstream was up; ``--seed`` repeats the upstream's fault
schedule; and the README's sample is the demo's own summary.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import re
from collections import Counter
from pathlib import Path
from random import Random

import httpx
import pytest

from retrymw import AdaptiveThrottle, CircuitBreaker, PerTarget, RetryBudget
from retrymw._core.events import CallFinished, RetryDenied
from retrymw.cli import build_parser, main
from retrymw.cli.demo._command import _script
from retrymw.cli.demo._report import DemoStats, summary
from retrymw.cli.demo._run import DemoRun, demo_policy, demo_transport
from retrymw.cli.demo._upstream import FlakyUpstream, Outage, UpstreamScript
from retrymw.httpx import TransportCircuitOpenError, TransportLoadShedError
from retrymw.simulate import SETUPS
from retrymw.testing import FakeClock, Fault

README = Path(__file__).resolve().parents[2] / "README.md"
URL = "http://upstream.test/"
OUTAGE = Outage(2.0, 2.0)


def _args(*flags: str) -> argparse.Namespace:
    return build_parser().parse_args(["demo", "--metrics-port", "0", *flags])


def _demo(*flags: str) -> DemoRun:
    args = _args(*flags)
    demo = DemoRun(args, _script(args))
    demo.console.stream = io.StringIO()  # nothing on the test's stdout
    return demo


# -- what each flag builds -------------------------------------------------------------------------


def test_the_default_is_the_recommended_setup_with_a_sane_breaker() -> None:
    """No flag: retries, one budget and one breaker per host, the breaker built from the
    simulator's ``+ budget + breaker`` arguments (80% over 100 attempts, never 50%)."""
    demo = _demo()
    built = demo.protection
    assert demo.setup.name == "+ budget + breaker"
    assert demo.setup.breaker is SETUPS["+ budget + breaker"]["breaker"]
    assert isinstance(built.breaker, PerTarget)
    assert isinstance(built.breaker.template, CircuitBreaker)
    expected = CircuitBreaker(**demo.setup.breaker).settings
    assert built.breaker.template.settings == expected
    rate = built.breaker.template.settings.failure_rate_threshold
    assert rate is None or rate > 0.5
    assert isinstance(built.budget, PerTarget)
    assert isinstance(built.budget.template, RetryBudget)
    assert built.throttle is None
    assert demo.attempts == 4


@pytest.mark.parametrize(
    ("flags", "breaker", "budget", "throttle", "attempts"),
    [
        pytest.param(("--no-breaker",), False, True, False, 4, id="no-breaker"),
        pytest.param(("--throttle",), True, True, True, 4, id="throttle"),
        pytest.param(("--no-budget",), True, False, False, 4, id="no-budget"),
        pytest.param(("--no-breaker", "--no-budget"), False, False, False, 4, id="neither"),
        pytest.param(("--setup", "budget+throttle"), False, True, True, 4, id="setup"),
        pytest.param(("--setup", "retries + throttle"), False, False, True, 4, id="long-name"),
        pytest.param(("--setup", "no-retries"), False, False, False, 1, id="no-retries"),
        pytest.param(("--setup", "budget", "--breaker"), True, True, False, 4, id="add-breaker"),
        pytest.param(("--setup", "no-retries", "--attempts", "3"), False, False, False, 3, id="n"),
    ],
)
def test_each_flag_changes_what_the_transport_is_given(
    flags: tuple[str, ...], breaker: bool, budget: bool, throttle: bool, attempts: int
) -> None:
    """The flags add or remove one protection of the setup; the transport gets those very
    objects (its retrier reads them back), and the policy the setup's attempts."""
    demo = _demo(*flags)
    built = demo.protection
    assert (built.breaker is not None, built.budget is not None) == (breaker, budget)
    assert (built.throttle is not None) == throttle
    if throttle:
        assert built.throttle is not None
        assert isinstance(built.throttle.template, AdaptiveThrottle)
    transport = demo_transport(demo_policy(demo.attempts), built, instruments=[])
    assert transport.retrier.breaker is built.breaker
    assert transport.retrier.budget is built.budget
    assert transport.retrier.throttle is built.throttle
    assert transport.retrier.policy.attempts == attempts


def test_an_unknown_setup_is_a_usage_error_naming_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--setup`` takes the simulator's names only; the error lists them with an example."""
    assert main(["demo", "--setup", "bulkhead"]) == 2
    err = capsys.readouterr().err
    assert "argument --setup: no setup named 'bulkhead'" in err
    assert "budget+breaker" in err
    assert "retries+throttle" in err


def test_fleet_refuses_protection_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """``--fleet`` compares budgets with its own setup: a protection flag there is an error,
    not silently ignored."""
    assert main(["demo", "--fleet", "2", "--throttle"]) == 1
    assert "--throttle" in capsys.readouterr().err


# -- the same objects at work, on a virtual clock --------------------------------------------------


class _Refusals:
    """What the driver saw: the start time of every call refused before any attempt."""

    def __init__(self) -> None:
        self.before_attempt: list[tuple[float, str]] = []


def _drive(demo: DemoRun, *, outage: Outage, calls: int = 500) -> tuple[DemoStats, _Refusals]:
    """Run ``calls`` calls at 50/s through the demo's transport on a `FakeClock`, against a
    scripted upstream (no failure but the outage), and the demo's own `DemoStats`.

    One call at a time: a call's backoff sleeps move the clock, and the next call starts at
    its arrival time or after them. So that a call's retries fit before the next arrival, the
    policy is the demo's with backoff from 1ms to 4ms, and without jitter (the transport's
    random source cannot be seeded): a run is exactly repeatable.
    """
    clock = FakeClock()
    script = UpstreamScript(failure_rate=0.0, rate_limited=0.0, latency=0.0, outage=outage)
    upstream = FlakyUpstream(script, rng=Random(0), clock=clock.now)
    stats = DemoStats(upstream_up=lambda: not upstream.in_outage())

    def answer(request: httpx.Request) -> httpx.Response:
        status, headers = upstream.respond()
        return httpx.Response(status, headers=headers)

    protection = demo.setup.build(seed=1, clock=clock)
    transport = demo_transport(
        demo_policy(demo.attempts).replace(jitter=False, initial_delay=0.001, max_delay=0.004),
        protection,
        instruments=[stats],
        clock=clock,
        inner=httpx.MockTransport(answer),
    )
    seen = _Refusals()

    async def load() -> None:
        async with httpx.AsyncClient(transport=transport) as client:
            for index in range(calls):
                clock.advance(max(0.0, index * 0.02 - clock.now()))
                started = clock.now()
                try:
                    await client.get(URL)
                except TransportCircuitOpenError:
                    seen.before_attempt.append((started, "breaker"))
                except TransportLoadShedError:
                    seen.before_attempt.append((started, "throttle"))

    asyncio.run(load())
    return stats, seen


def test_the_default_breaker_opens_in_the_outage_and_closes_after_it() -> None:
    """Telemetry of the default: the breaker trips in the outage, refuses calls, and closes."""
    stats, _ = _drive(_demo(), outage=OUTAGE)
    states = [event.state for event in stats.transitions]
    assert states[:1] == ["open"]
    assert states[-1] == "closed"
    assert stats.outcomes["circuit_open"] > 0
    assert stats.outcomes["success"] > 0


@pytest.mark.parametrize(
    ("flags", "telemetry"),
    [
        pytest.param(("--no-breaker",), {"transitions": 0, "circuit_open": 0}, id="no-breaker"),
        pytest.param(("--no-breaker", "--throttle"), {"transitions": 0}, id="throttle"),
        pytest.param(("--no-budget",), {"throttled": 0}, id="no-budget"),
    ],
)
def test_each_flag_shows_in_the_telemetry(
    flags: tuple[str, ...], telemetry: dict[str, int]
) -> None:
    """Without the breaker no circuit moves; with the throttle calls are shed; without the
    budget no retry is denied for want of tokens (and with it, some are)."""
    stats, _ = _drive(_demo(*flags), outage=OUTAGE)
    counts = {
        "transitions": len(stats.transitions),
        "circuit_open": stats.outcomes["circuit_open"],
        "throttled": stats.denied["throttled"],
    }
    for name, expected in telemetry.items():
        assert counts[name] == expected, (name, counts)
    if "--throttle" in flags:
        assert stats.outcomes["shed"] + stats.denied["shed"] > 0
    if "--no-budget" not in flags:
        assert stats.denied["throttled"] > 0  # the budget ran dry in the outage


@pytest.mark.parametrize(
    "flags",
    [pytest.param((), id="breaker"), pytest.param(("--setup", "budget+throttle"), id="throttle")],
)
def test_refused_while_up_counts_exactly_the_calls_the_upstream_would_have_answered(
    flags: tuple[str, ...],
) -> None:
    """After a 2 s outage (2 s to 4 s) the upstream answers every request, so the calls
    refused while it is up are exactly those the breaker or throttle refused before any
    attempt from 4 s on, as the driver saw them; those refused during the outage count
    apart, and every refusal is counted once, in one of the two."""
    outage = OUTAGE
    stats, seen = _drive(_demo(*flags), outage=outage)
    up = Counter(who for started, who in seen.before_attempt if not outage.active(started))
    assert stats.refused_up == up
    assert up.total() >= 10  # the price is real: the protection lets go after the outage
    down = Counter(who for started, who in seen.before_attempt if outage.active(started))
    assert down.total() > 0
    # The outage's refusals: calls refused before any attempt, plus retries refused.
    retries_refused = sum(stats.denied[reason] for reason in ("throttled", "circuit_open", "shed"))
    assert stats.refused_down.total() == down.total() + retries_refused
    assert stats.denied["max_attempts"] == 0 or stats.refused_down.total() > 0


def test_refusals_are_classified_by_the_upstream_at_that_moment() -> None:
    """A scripted upstream state: each refused call counts once, by its refuser, in the
    state of that moment; a give-up at max attempts and a call with attempts are not
    refusals, and a call whose retry was refused is not counted again when it ends."""
    up = [True]
    stats = DemoStats(upstream_up=lambda: up[0])

    def denied(reason: str) -> None:
        stats.retry_denied(RetryDenied("demo", "h", "GET", 2, 4, reason, "HTTPStatusError"))  # type: ignore[arg-type]

    def finished(outcome: str, attempts: int) -> None:
        stats.call_finished(CallFinished("demo", "h", "GET", outcome, attempts, 0.1, None))  # type: ignore[arg-type]

    denied("throttled")  # a retry the budget refused while up
    finished("throttled", 2)
    denied("max_attempts")  # no refusal: the policy gave up
    finished("exhausted", 4)
    denied("circuit_open")  # an open breaker stopped a call mid-way
    finished("failure", 2)
    finished("circuit_open", 0)  # refused before any attempt
    finished("shed", 0)
    up[0] = False
    finished("circuit_open", 0)
    denied("shed")
    finished("failure", 1)
    finished("success", 1)
    assert stats.refused_up == Counter({"budget": 1, "breaker": 2, "throttle": 1})
    assert stats.refused_down == Counter({"breaker": 1, "throttle": 1})
    row = re.search(r"^refused\s+(.*)$", _summary_of(stats), re.MULTILINE)
    assert row is not None
    assert row.group(1) == (
        "4 while the upstream was up (breaker 2, budget 1, throttle 1) · "
        "2 while it was down (breaker 1, throttle 1)"
    )


def _summary_of(stats: DemoStats) -> str:
    upstream = FlakyUpstream(UpstreamScript())
    return summary(stats, elapsed=1.0, upstream=upstream, retrier=None, metrics_url=None)


# -- --seed ----------------------------------------------------------------------------------------


def test_a_seed_repeats_the_fault_schedule_whatever_the_outage_took() -> None:
    """With one seed the n-th request outside the outages meets the same fault and latency,
    however many requests the outage answered (that depends on real time)."""
    script = UpstreamScript(failure_rate=0.3, rate_limited=0.1, outage=Outage(1.0, 1.0))

    def schedule(seed: int, in_outage: int) -> list[tuple[Fault, float]]:
        clock = FakeClock()
        upstream = FlakyUpstream(script, rng=Random(seed), clock=clock.now)
        drawn = [upstream.next_fault() for _ in range(50)]
        clock.advance(1.5)
        for _ in range(in_outage):
            assert upstream.next_fault()[0].status == 503
        clock.advance(1.0)
        drawn += [upstream.next_fault() for _ in range(200)]
        return drawn

    first = schedule(7, in_outage=10)
    assert first == schedule(7, in_outage=173)
    assert first != schedule(8, in_outage=10)


def test_a_seed_repeats_the_throttles_draws() -> None:
    """Two demos with one seed build throttles that shed the same attempts."""

    def shed(seed: int) -> list[bool]:
        clock = FakeClock()
        demo = _demo("--seed", str(seed), "--throttle")
        throttle = demo.setup.build(seed=seed, clock=clock).throttle
        assert throttle is not None
        one = throttle.for_target("upstream.test")
        decisions = []
        for _ in range(300):
            allowed = one.allow_request()
            decisions.append(allowed)
            if allowed:
                one.record_failure()
        return decisions

    assert shed(3) == shed(3)
    assert not all(shed(3))  # it did shed
    assert shed(3) != shed(4)


def test_two_real_runs_with_one_seed_meet_the_same_faults() -> None:
    """Two short real demos (a loopback server, real time) with ``--seed 3``: the requests
    outside the outage met the same faults, in the same order, as far as both went."""

    def run() -> list[str]:
        args = _args(
            *("--duration", "1500ms", "--rate", "40", "--seed", "3", "--traces", "none"),
            *("--outage", "500ms:300ms", "--latency", "5ms", "--failure-rate", "30%"),
        )
        demo = DemoRun(args, _script(args))
        demo.console.stream = io.StringIO()
        asyncio.run(demo.main())
        demo.report()
        return list(demo.upstream.plan.injected)

    first, second = run(), run()
    common = min(len(first), len(second))
    # Real time: 60 requests each on an idle machine, fewer on a loaded one (27 seen).
    assert common >= 10, (len(first), len(second))
    assert first[:common] == second[:common]
    assert len(set(first)) > 1  # faults and passes, not one answer


# -- the README's sample ---------------------------------------------------------------------------


def _readme_sample() -> tuple[str, str]:
    """The README's demo sample block and the paragraph after it."""
    text = README.read_text(encoding="utf-8")
    found = re.search(r"```text\n(upstream: .*?)```\n\n(.*?)\n\n", text, re.DOTALL)
    assert found is not None, "the README shows a demo sample"
    return found.group(1), found.group(2)


def test_the_readme_sample_is_the_demos_own_summary() -> None:
    """The README's figures are a real summary: its rows re-render, from their own counts, to
    exactly what `summary` prints, the refused row included; and the sentence after it names
    the command and seed that made it, with the default setup."""
    sample, note = _readme_sample()
    seed = re.search(r"`retrymw demo --seed (\d+) \| cat`", note)
    assert seed is not None, note
    assert re.search(r"^load: .*; setup budget\+breaker: ", sample, re.MULTILINE), sample
    table = sample[sample.index("\nretrymw demo: ") :]
    rows = dict(re.findall(r"^(\w[\w ]*?)\s{2,}(.*)$", table, re.MULTILINE))
    calls = int(re.match(r"([\d,]+) ", rows["calls"]).group(1).replace(",", ""))  # type: ignore[union-attr]
    found = re.match(r"([\d,]+) \(([\d,]+) retries\)$", rows["attempts"])
    assert found is not None, rows["attempts"]
    attempts, retries = (int(group.replace(",", "")) for group in found.groups())
    outcomes = {
        name: int(count.replace(",", ""))
        for name, count in re.findall(r"(\w+) ([\d,]+) \(", rows["outcomes"])
    }
    assert sum(outcomes.values()) == calls
    up, down = r"([\d,]+) while the upstream was up(?: \((.*?)\))?", r"([\d,]+) while it was down"
    refused = re.match(rf"{up} · {down}(?: \((.*)\))?$", rows["refused"])
    assert refused is not None, rows["refused"]

    def by_refuser(text: str | None) -> Counter[str]:
        pairs = re.findall(r"(\w+) ([\d,]+)", text or "")
        return Counter({who: int(count.replace(",", "")) for who, count in pairs})

    stats = DemoStats()
    stats.attempts, stats.retries = attempts, retries
    stats.refused_up, stats.refused_down = (
        by_refuser(refused.group(2)),
        by_refuser(refused.group(4)),
    )
    assert stats.refused_up.total() == int(refused.group(1).replace(",", ""))
    for outcome, count in outcomes.items():  # as DemoStats.call_finished counts them
        stats.calls += count
        stats.rejected += count if outcome in ("circuit_open", "shed") else 0
        stats.outcomes[outcome] += count
    statuses = Counter(
        {
            int(code): int(count.replace(",", ""))
            for code, count in re.findall(r"(\d{3}): ([\d,]+)", rows["upstream"])
        }
    )
    assert statuses.total() == attempts  # every attempt met a response of the upstream
    rendered = _summary_of(stats)
    for row in ("attempts", "amplification", "outcomes", "refused"):
        again = re.search(rf"^{row}\s+(.*)$", rendered, re.MULTILINE)
        assert again is not None, row
        assert again.group(1) == rows[row], (row, rows[row])
    assert set(rows) >= {"calls", "rescued", "retries denied", "breaker", "latency", "upstream"}
