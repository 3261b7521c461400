"""Backoff strategies and jitter: DESIGN §2's delay table, caps, overflow safety and jitter."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrymw._core.backoff import (
    JITTER_KINDS,
    Backoff,
    CustomBackoff,
    ExponentialBackoff,
    FibonacciBackoff,
    FixedBackoff,
    JitterKind,
    LinearBackoff,
    apply_jitter,
    jitter_bounds,
)
from retrymw._core.errors import ConfigError
from retrymw._core.policy import RetryPolicy

# -- DESIGN §2's delay table -----------------------------------------------------------------

DELAY_TABLE = [
    pytest.param(FixedBackoff(), 30.0, [1.0, 1.0, 1.0, 1.0], id="fixed"),
    pytest.param(LinearBackoff(), 30.0, [1.0, 2.0, 3.0, 4.0], id="linear-default"),
    pytest.param(LinearBackoff(increment="2s"), 30.0, [1.0, 3.0, 5.0, 7.0], id="linear-2s"),
    pytest.param(ExponentialBackoff(), 30.0, [1.0, 2.0, 4.0, 8.0, 16.0], id="exponential"),
    pytest.param(FibonacciBackoff(), 30.0, [1.0, 1.0, 2.0, 3.0, 5.0, 8.0], id="fibonacci"),
    pytest.param(
        CustomBackoff([1, 3, 7, 15]),
        60.0,
        [1.0, 3.0, 7.0, 15.0, 60.0, 60.0, 60.0],
        id="custom-then-max",
    ),
    pytest.param(CustomBackoff([]), 60.0, [60.0, 60.0, 60.0], id="custom-empty"),
]


@pytest.mark.parametrize(("strategy", "max_delay", "expected"), DELAY_TABLE)
def test_strategy_delays_match_the_design_table(
    strategy: Backoff, max_delay: float, expected: list[float]
) -> None:
    """Each strategy object gives DESIGN §2's delays for retries 1, 2, 3, ... with a 1 s base."""
    delays = [strategy.delay(n, 1.0, max_delay) for n in range(1, len(expected) + 1)]
    assert delays == expected


@pytest.mark.parametrize(("strategy", "max_delay", "expected"), DELAY_TABLE)
def test_policy_delay_for_matches_the_design_table(
    strategy: Backoff, max_delay: float, expected: list[float]
) -> None:
    """`RetryPolicy.delay_for(n)` gives DESIGN §2's delays for retries 1, 2, 3, ... (1 s base)."""
    policy = RetryPolicy(backoff=strategy, initial_delay="1s", max_delay=max_delay)
    assert [policy.delay_for(n) for n in range(1, len(expected) + 1)] == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("fixed", [1.0, 1.0, 1.0, 1.0], id="fixed"),
        pytest.param("linear", [1.0, 2.0, 3.0, 4.0], id="linear"),
        pytest.param("exponential", [1.0, 2.0, 4.0, 8.0, 16.0], id="exponential"),
        pytest.param("fibonacci", [1.0, 1.0, 2.0, 3.0, 5.0, 8.0], id="fibonacci"),
    ],
)
def test_named_backoffs_match_the_design_table(name: str, expected: list[float]) -> None:
    """A backoff given by name behaves like its strategy object with default parameters."""
    policy = RetryPolicy(backoff=name)
    assert [policy.delay_for(n) for n in range(1, len(expected) + 1)] == expected


def test_default_policy_backoff_is_exponential_base_two() -> None:
    """The default policy doubles from 1 s: 1, 2, 4, 8, 16, then the 30 s cap."""
    policy = RetryPolicy()
    assert [policy.delay_for(n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_exponential_base_three() -> None:
    """`ExponentialBackoff(base=3.0)` triples the delay at each retry."""
    strategy = ExponentialBackoff(base=3.0)
    assert [strategy.delay(n, 0.5, 100.0) for n in range(1, 6)] == [0.5, 1.5, 4.5, 13.5, 40.5]


@pytest.mark.parametrize("n", [pytest.param(0, id="zero"), pytest.param(-1, id="negative")])
def test_delay_for_rejects_retry_numbers_below_one(n: int) -> None:
    """`delay_for` counts retries from 1, so 0 and negatives are a `ConfigError`."""
    with pytest.raises(ConfigError, match=r"^n: "):
        RetryPolicy().delay_for(n)


# -- the cap ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "initial", "max_delay", "expected"),
    [
        pytest.param(FixedBackoff(), 5.0, 5.0, [5.0, 5.0, 5.0], id="fixed-at-cap"),
        pytest.param(LinearBackoff(increment=10), 1.0, 15.0, [1.0, 11.0, 15.0, 15.0], id="linear"),
        pytest.param(
            ExponentialBackoff(), 1.0, 10.0, [1.0, 2.0, 4.0, 8.0, 10.0, 10.0], id="exponential"
        ),
        pytest.param(FibonacciBackoff(), 1.0, 4.0, [1.0, 1.0, 2.0, 3.0, 4.0, 4.0], id="fibonacci"),
        pytest.param(
            CustomBackoff(["1s", "100s", "2s"]), 1.0, 30.0, [1.0, 30.0, 2.0, 30.0], id="custom"
        ),
    ],
)
def test_cap_is_applied(
    strategy: Backoff, initial: float, max_delay: float, expected: list[float]
) -> None:
    """No strategy ever returns more than `max_delay`; smaller delays are left alone."""
    delays = [strategy.delay(n, initial, max_delay) for n in range(1, len(expected) + 1)]
    assert delays == expected


def test_policy_cap_is_applied() -> None:
    """`RetryPolicy.delay_for` caps the strategy's delay at the policy's `max_delay`."""
    policy = RetryPolicy(backoff=ExponentialBackoff(base=10.0), initial_delay=1, max_delay="1m")
    assert [policy.delay_for(n) for n in range(1, 5)] == [1.0, 10.0, 60.0, 60.0]


# -- huge retry numbers and extreme bases ----------------------------------------------------

GROWING = [
    pytest.param(ExponentialBackoff(), id="exponential-2"),
    pytest.param(ExponentialBackoff(base=10.0), id="exponential-10"),
    pytest.param(FibonacciBackoff(), id="fibonacci"),
]
HUGE_N = [pytest.param(10**6, id="n=1e6"), pytest.param(10**9, id="n=1e9")]
INITIAL_AND_CAP = [
    pytest.param(1.0, 30.0, id="1s-to-30s"),
    pytest.param(1e-300, 30.0, id="1e-300s-to-30s"),
    pytest.param(5e-324, 30.0, id="subnormal-to-30s"),
    pytest.param(1e-300, 1e10, id="1e-300s-to-1e10s"),
]


@pytest.mark.parametrize(("initial", "max_delay"), INITIAL_AND_CAP)
@pytest.mark.parametrize("n", HUGE_N)
@pytest.mark.parametrize("strategy", GROWING)
def test_growing_strategies_reach_the_cap_without_overflow(
    strategy: Backoff, n: int, initial: float, max_delay: float
) -> None:
    """Exponential and Fibonacci backoff return exactly `max_delay` for huge `n`, never raising."""
    assert strategy.delay(n, initial, max_delay) == max_delay


@pytest.mark.parametrize(("initial", "max_delay"), INITIAL_AND_CAP)
@pytest.mark.parametrize("n", HUGE_N)
def test_non_growing_strategies_handle_huge_n(n: int, initial: float, max_delay: float) -> None:
    """Fixed, linear and custom backoff give their formula's value for huge `n`."""
    assert FixedBackoff().delay(n, initial, max_delay) == initial
    assert LinearBackoff().delay(n, initial, max_delay) == min(max_delay, initial * n)
    assert LinearBackoff(increment=1).delay(n, initial, max_delay) == min(
        max_delay, initial + (n - 1)
    )
    assert CustomBackoff([1, 2]).delay(n, initial, max_delay) == max_delay
    assert CustomBackoff([]).delay(n, initial, max_delay) == max_delay


@pytest.mark.parametrize("n", HUGE_N)
@pytest.mark.parametrize(
    "backoff",
    [
        pytest.param("exponential", id="exponential"),
        pytest.param(ExponentialBackoff(base=10.0), id="exponential-10"),
        pytest.param("fibonacci", id="fibonacci"),
        pytest.param("linear", id="linear"),
    ],
)
def test_policy_delay_for_huge_n_with_tiny_initial_delay(backoff: Backoff | str, n: int) -> None:
    """`delay_for(10**6)` and `delay_for(10**9)` stay finite and capped with a 1e-300 s base."""
    policy = RetryPolicy(backoff=backoff, initial_delay=1e-300, max_delay=30)
    delay = policy.delay_for(n)
    assert math.isfinite(delay)
    assert 0.0 < delay <= 30.0


def _strategies() -> st.SearchStrategy[Backoff]:
    return st.one_of(
        st.just(FixedBackoff()),
        st.builds(LinearBackoff, st.none() | st.floats(0, 1e6)),
        st.builds(ExponentialBackoff, st.floats(1.0, 1e6)),
        st.just(FibonacciBackoff()),
        st.builds(CustomBackoff, st.lists(st.floats(0, 1e6), max_size=5)),
    )


@settings(max_examples=300, deadline=None)
@given(
    strategy=_strategies(),
    n=st.integers(1, 10**18),
    # Tiny bases are where `max_delay / initial_delay` and `fib(n)` leave the float range.
    initial=st.floats(0.0, 1e4) | st.sampled_from([1e-300, 1e-310, 5e-324]),
    extra=st.floats(0.0, 1e12),
)
def test_no_exception_for_any_attempt_number(
    strategy: Backoff, n: int, initial: float, extra: float
) -> None:
    """Every strategy returns a finite delay in `[0, max_delay]` for any `n` and any finite base."""
    max_delay = initial + extra
    delay = strategy.delay(n, initial, max_delay)
    assert math.isfinite(delay)
    assert 0.0 <= delay <= max_delay


@settings(max_examples=200, deadline=None)
@given(
    strategy=st.one_of(
        st.builds(LinearBackoff, st.none() | st.floats(0, 1e3)),
        st.builds(ExponentialBackoff, st.floats(1.0, 100.0)),
        st.just(FibonacciBackoff()),
    ),
    n=st.integers(1, 2000),
    initial=st.floats(1e-3, 100.0),
    extra=st.floats(0.0, 1e6),
)
def test_growing_delays_never_decrease(
    strategy: Backoff, n: int, initial: float, extra: float
) -> None:
    """Linear, exponential and Fibonacci delays never shrink from one retry to the next."""
    max_delay = initial + extra
    assert strategy.delay(n, initial, max_delay) <= strategy.delay(n + 1, initial, max_delay)


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "field"),
    [
        pytest.param(lambda: ExponentialBackoff(base=0.5), "backoff.base", id="base-below-1"),
        pytest.param(lambda: ExponentialBackoff(base=math.inf), "backoff.base", id="base-inf"),
        pytest.param(lambda: ExponentialBackoff(base=math.nan), "backoff.base", id="base-nan"),
        pytest.param(lambda: ExponentialBackoff(base=True), "backoff.base", id="base-bool"),
        pytest.param(lambda: CustomBackoff("1s"), "backoff.delays", id="custom-string"),
        pytest.param(
            lambda: CustomBackoff(5),  # type: ignore[arg-type]
            "backoff.delays",
            id="custom-number",
        ),
        pytest.param(
            lambda: CustomBackoff(["1s", "soon"]), "backoff.delays[1]", id="custom-bad-item"
        ),
        pytest.param(
            lambda: LinearBackoff(increment=-1), "backoff.increment", id="increment-negative"
        ),
        pytest.param(
            lambda: LinearBackoff(increment="fast"), "backoff.increment", id="increment-text"
        ),
    ],
)
def test_invalid_strategy_parameters_raise_config_error(
    build: Callable[[], object], field: str
) -> None:
    """A bad strategy parameter is a `ConfigError` whose message starts with the field name."""
    with pytest.raises(ConfigError) as excinfo:
        build()
    assert excinfo.value.field == field
    assert str(excinfo.value).startswith(f"{field}: ")
    assert isinstance(excinfo.value, ValueError)


# -- jitter kinds ----------------------------------------------------------------------------


def _draws(
    kind: JitterKind,
    delay: float,
    *,
    initial: float = 1.0,
    max_delay: float = 30.0,
    factor: float = 0.3,
    previous: float = 1.0,
    count: int = 2000,
    seed: int = 1234,
) -> list[float]:
    rng = Random(seed)
    return [
        apply_jitter(
            kind,
            delay,
            initial_delay=initial,
            max_delay=max_delay,
            factor=factor,
            previous=previous,
            rng=rng,
        )
        for _ in range(count)
    ]


def _assert_spans(draws: list[float], low: float, high: float) -> None:
    """All draws lie in [low, high] and they reach both ends (within 2% of the width)."""
    margin = (high - low) * 0.02
    assert low <= min(draws) < low + margin
    assert high - margin < max(draws) <= high


def test_full_jitter_draws_from_zero_to_delay() -> None:
    """Full jitter spreads draws over the whole of `[0, d]`."""
    _assert_spans(_draws("full", 8.0), 0.0, 8.0)


def test_equal_jitter_draws_from_half_delay_to_delay() -> None:
    """Equal jitter spreads draws over `[d/2, d]`."""
    _assert_spans(_draws("equal", 8.0), 4.0, 8.0)


def test_proportional_jitter_draws_around_delay() -> None:
    """Proportional jitter spreads draws over `[d(1-f), d(1+f)]` when that is under the cap."""
    _assert_spans(_draws("proportional", 10.0, factor=0.3), 7.0, 13.0)


@pytest.mark.parametrize(
    ("delay", "factor", "low", "high"),
    [
        pytest.param(25.0, 0.3, 15.0, 30.0, id="crossing-cap"),
        pytest.param(30.0, 0.3, 12.0, 30.0, id="at-cap"),
        pytest.param(30.0, 1.0, 0.0, 30.0, id="shift-floored-at-zero"),
    ],
)
def test_proportional_jitter_window_is_shifted_under_the_cap(
    delay: float, factor: float, low: float, high: float
) -> None:
    """A proportional window crossing the cap is moved down whole, keeping its width."""
    _assert_spans(_draws("proportional", delay, factor=factor), low, high)


def test_proportional_jitter_with_zero_factor_is_the_delay() -> None:
    """With `jitter_factor=0` proportional jitter leaves the delay unchanged."""
    assert set(_draws("proportional", 7.0, factor=0.0, count=50)) == {7.0}


@pytest.mark.parametrize(
    ("previous", "high"),
    [
        pytest.param(4.0, 12.0, id="three-times-previous"),
        pytest.param(20.0, 30.0, id="capped"),
        pytest.param(0.1, 3.0, id="previous-below-initial"),
    ],
)
def test_decorrelated_jitter_draws_from_initial_to_three_times_previous(
    previous: float, high: float
) -> None:
    """Decorrelated jitter draws from `[initial, min(cap, 3 * previous)]`, whatever `d` is."""
    _assert_spans(_draws("decorrelated", 30.0, previous=previous), 1.0, high)


def test_jitter_is_reproducible_with_a_seeded_random() -> None:
    """The same seed gives the same jittered delays, and a different seed different ones."""
    for kind in JITTER_KINDS:
        first = _draws(kind, 10.0, previous=10.0, count=20, seed=7)
        assert first == _draws(kind, 10.0, previous=10.0, count=20, seed=7)
        assert first != _draws(kind, 10.0, previous=10.0, count=20, seed=8)


def _chain(kind: JitterKind, count: int, seed: int) -> Iterator[float]:
    """Jittered delays at the cap as a driver produces them, feeding each draw back as previous."""
    rng = Random(seed)
    previous = 30.0
    for _ in range(count):
        previous = apply_jitter(
            kind, 30.0, initial_delay=1.0, max_delay=30.0, factor=0.3, previous=previous, rng=rng
        )
        yield previous


@pytest.mark.parametrize("kind", [pytest.param(kind, id=kind) for kind in JITTER_KINDS])
def test_no_pile_up_at_the_cap(kind: JitterKind) -> None:
    """At `d == max_delay` no jitter kind ever lands exactly on the cap in 10 000 seeded draws."""
    draws = list(_chain(kind, 10_000, seed=2024))
    assert all(0.0 <= draw <= 30.0 for draw in draws)
    assert sum(draw == 30.0 for draw in draws) == 0
    # Not clamped just under the cap either: the top 1% of the range holds a small share.
    assert sum(draw >= 29.7 for draw in draws) / len(draws) < 0.05


@pytest.mark.parametrize(
    "kind", [pytest.param("full", id="full"), pytest.param("decorrelated", id="decorrelated")]
)
def test_jitter_at_the_cap_is_widely_spread(kind: JitterKind) -> None:
    """Full and decorrelated jitter at the cap have a coefficient of variation of at least 0.5."""
    draws = list(_chain(kind, 10_000, seed=99))
    assert statistics.pstdev(draws) / statistics.fmean(draws) >= 0.5


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(JITTER_KINDS),
    initial=st.floats(0.0, 1e4),
    extra=st.floats(0.0, 1e6),
    fraction=st.floats(0.0, 1.0),
    factor=st.floats(0.0, 1.0),
    previous=st.floats(0.0, 1e7),
    rng=st.randoms(use_true_random=False),
)
def test_jittered_delay_is_within_zero_and_max_delay(
    kind: JitterKind,
    initial: float,
    extra: float,
    fraction: float,
    factor: float,
    previous: float,
    rng: Random,
) -> None:
    """Whatever the kind, factor, previous delay and random source, jitter stays in `[0, cap]`."""
    max_delay = initial + extra
    delay = max_delay * fraction
    jittered = apply_jitter(
        kind,
        delay,
        initial_delay=initial,
        max_delay=max_delay,
        factor=factor,
        previous=previous,
        rng=rng,
    )
    assert 0.0 <= jittered <= max_delay


@pytest.mark.parametrize(
    ("kind", "delay", "previous", "expected"),
    [
        pytest.param("full", 8.0, 1.0, (0.0, 8.0), id="full"),
        pytest.param("equal", 8.0, 1.0, (4.0, 8.0), id="equal"),
        pytest.param("proportional", 10.0, 1.0, (7.0, 13.0), id="proportional"),
        pytest.param("proportional", 25.0, 1.0, (15.0, 30.0), id="proportional-shifted"),
        pytest.param("decorrelated", 30.0, 4.0, (1.0, 12.0), id="decorrelated"),
        pytest.param("decorrelated", 30.0, 20.0, (1.0, 30.0), id="decorrelated-capped"),
    ],
)
def test_jitter_bounds_follow_the_formulas(
    kind: JitterKind, delay: float, previous: float, expected: tuple[float, float]
) -> None:
    """`jitter_bounds` gives DESIGN §2's ranges (1s initial delay, 30s cap, factor 0.3)."""
    bounds = jitter_bounds(
        kind, delay, initial_delay=1.0, max_delay=30.0, factor=0.3, previous=previous
    )
    assert bounds == pytest.approx(expected)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(JITTER_KINDS),
    initial=st.floats(0.0, 1e4),
    extra=st.floats(0.0, 1e6),
    fraction=st.floats(0.0, 1.0),
    factor=st.floats(0.0, 1.0),
    previous=st.floats(0.0, 1e7),
    seed=st.integers(0, 2**32),
)
def test_apply_jitter_draws_exactly_from_jitter_bounds(
    kind: JitterKind,
    initial: float,
    extra: float,
    fraction: float,
    factor: float,
    previous: float,
    seed: int,
) -> None:
    """apply_jitter is one uniform draw from jitter_bounds (none for an empty range)."""
    max_delay = initial + extra
    delay = max_delay * fraction
    fields = {"initial_delay": initial, "max_delay": max_delay, "factor": factor}
    low, high = jitter_bounds(kind, delay, previous=previous, **fields)
    assert 0.0 <= low <= high <= max_delay
    rng, twin = Random(seed), Random(seed)
    jittered = apply_jitter(kind, delay, previous=previous, rng=rng, **fields)
    if kind == "decorrelated" and low == high:
        assert jittered == high
    else:
        assert jittered == twin.uniform(low, high)
    # The draw used exactly as much randomness as the expected one: the sequences stay aligned.
    assert rng.random() == twin.random()
