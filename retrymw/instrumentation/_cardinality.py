"""The series bound of one registry (or meter provider): `Cardinality`.

Capping each label on its own (the first 100 policies, the first 100 targets, the first 50 error
types) does not bound the series, because they multiply: a (policy, target) pair carries a
histogram's buckets for every outcome, attempt outcome, error type and reason it has seen, about
40-60 series in common use and over 3 000 at worst. So the instruments also keep a ledger of
the series they have made, and place each record: under its own policy and target while they
fit, else under its policy's `names.OVERFLOW` target, else under `OVERFLOW` for both, whose room
is set aside from the start. The total never passes `names.MAX_SERIES`, and no record is lost:
it is counted in a coarser series.

New label sets (a target's first record, a circuit, a policy's info) are admitted only while the
ledger is below a watermark, one worst-case pair under its limit: the room above it is for the
series that targets already exported still gain (a new error type, an outcome seen late) and for
each policy's own ``_other``.
"""

from __future__ import annotations

from collections.abc import Hashable

from .._core.forks import ForkSafeLock
from . import _names as names

__all__ = ["BoundedValues", "Cardinality"]


def _values(label: str) -> int:
    """How many values ``label`` can take (after its own cap) besides policy, target, circuit."""
    sizes = {
        names.LABEL_OUTCOME: len(names.OUTCOMES),
        names.LABEL_ATTEMPT_OUTCOME: len(names.ATTEMPT_OUTCOMES),
        names.LABEL_REASON: len(names.REASONS),
        # "" on success, the admitted ones, then the overflow.
        names.LABEL_ERROR_TYPE: names.MAX_ERROR_TYPES + 2,
        names.LABEL_CIRCUIT_STATE: len(names.CIRCUIT_STATES),
        names.LABEL_CIRCUIT_PREVIOUS_STATE: len(names.CIRCUIT_STATES),
    }
    return sizes[label]


def worst_series(first: tuple[str, ...]) -> int:
    """The most series one value of the leading labels ``first`` can carry: one (policy,
    target) pair, or one circuit, over every metric that starts with them."""
    total = 0
    for spec in (*names.METRICS, *names.LIVE_GAUGES, *names.PACER_METRICS):
        # The info gauges are one series per label set, counted where they are made.
        if spec.labels[: len(first)] != first or spec in (names.POLICY_INFO, names.CIRCUIT_INFO):
            continue
        series = spec.series
        for label in spec.labels[len(first) :]:
            series *= _values(label)
        total += series
    return total


class Cardinality:
    """The label caps and the series ledger shared by the instruments of one registry (or meter
    provider), so that together they never export more than `names.MAX_SERIES` series.

    Attributes:
        policy: caps ``retrymw_policy`` (`names.MAX_POLICIES`).
        target: caps ``retrymw_target`` (`names.MAX_TARGETS`).
        circuit: caps ``retrymw_circuit`` (`names.MAX_TARGETS`).
        error_type: caps ``error_type`` (`names.MAX_ERROR_TYPES`).
        spent: the series counted so far, the reserved overflow aside.
    """

    __slots__ = (
        "_circuit_series",
        "_counted",
        "_limit",
        "_lock",
        "_new_until",
        "circuit",
        "error_type",
        "policy",
        "spent",
        "target",
    )

    def __init__(self) -> None:
        # Read at construction, not import, so that tests may lower the caps.
        self.policy = BoundedValues(names.MAX_POLICIES, names.OVERFLOW)
        self.target = BoundedValues(names.MAX_TARGETS, names.OVERFLOW)
        self.circuit = BoundedValues(names.MAX_TARGETS, names.OVERFLOW)
        self.error_type = BoundedValues(names.MAX_ERROR_TYPES, names.ERROR_TYPE_OVERFLOW)
        pair = worst_series((names.LABEL_POLICY, names.LABEL_TARGET))
        self._circuit_series = worst_series((names.LABEL_CIRCUIT,))
        # Set aside: the (_other, _other) pair, the _other circuit, and the overflow points of
        # the HTTP metrics (OpenTelemetry's one attempt-duration histogram, and on both paths
        # one of each response-body histogram).
        reserve = (
            pair
            + self._circuit_series
            + names.ATTEMPT_DURATION.series
            + sum(spec.series for spec in names.BODY_METRICS)
        )
        self._limit = names.MAX_SERIES - reserve
        self._new_until = self._limit - pair
        self.spent = 0
        self._counted: set[Hashable] = set()
        self._lock = ForkSafeLock()

    def place(
        self, policy: str, target: str, entry: int, child: Hashable, series: int
    ) -> tuple[str, str]:
        """The policy and target a record is reported under, its series counted.

        Args:
            policy: the record's policy, capped here by `policy`.
            target: its target, already capped by `target`.
            entry: the series a pair has from its first record (Prometheus' success series; 0
                for OpenTelemetry, which makes none before a record).
            child: the record's other label values, as the instrument keys them; ``None``
                when the pair's entry already has them.
            series: what ``child`` adds.

        Returns:
            ``(policy, target)`` while they fit (``policy`` past the cap is `OVERFLOW`); else
            ``(policy, OVERFLOW)``; else ``(OVERFLOW, OVERFLOW)``, whose series are reserved.
        """
        policy = self.policy(policy)
        counted = self._counted
        if ("pair", policy, target) in counted and (
            child is None or ("child", policy, target, child) in counted
        ):
            return policy, target
        with self._lock:
            if target != names.OVERFLOW and self._take(
                policy, target, entry, child, series, self._new_until
            ):
                return policy, target
            if self._take(policy, names.OVERFLOW, entry, child, series, self._limit):
                return policy, names.OVERFLOW
        return names.OVERFLOW, names.OVERFLOW

    def admit(self, key: tuple[object, ...], series: int) -> bool:
        """Whether the label set ``key`` has (or now gets) series of its own: a new one fits
        below the watermark. ``key`` starts with what it is (``"policy"``, ``"circuit"``, a
        metric's name), never ``"pair"`` or ``"child"``."""
        if key in self._counted:
            return True
        with self._lock:
            if key in self._counted:
                return True
            if self.spent + series > self._new_until:
                return False
            self._counted.add(key)
            self.spent += series
            return True

    def circuit_label(self, name: str) -> str:
        """``retrymw_circuit`` for the breaker ``name``: capped, and `names.OVERFLOW` once a new
        circuit's series would not fit."""
        circuit = self.circuit(name)
        if circuit == names.OVERFLOW or self.admit(("circuit", circuit), self._circuit_series):
            return circuit
        return names.OVERFLOW

    def _take(
        self, policy: str, target: str, entry: int, child: Hashable, series: int, new_until: int
    ) -> bool:
        """Count what the record adds to (policy, target) if it fits; say whether it does. A
        new pair must fit below ``new_until``, a known pair's new child below the limit."""
        # Tagged, so that no pair or child is ever taken for an `admit` key.
        pair = ("pair", policy, target)
        key = ("child", policy, target, child)
        new_pair = pair not in self._counted
        cost = entry if new_pair else 0
        if child is not None and key not in self._counted:
            cost += series
        if cost and self.spent + cost > (new_until if new_pair else self._limit):
            return False
        self._counted.add(pair)
        if child is not None:
            self._counted.add(key)
        self.spent += cost
        return True

    def __repr__(self) -> str:
        return f"<Cardinality spent={self.spent} limit={self._limit}>"


class BoundedValues:
    """A label's set of admitted values: the first ``limit`` pass, later ones become ``overflow``.

    Thread-safe; admitted values are never evicted, so a series never changes meaning.

    Args:
        limit: how many distinct values keep their own series.
        overflow: the value reported for every later one.
    """

    __slots__ = ("_lock", "_seen", "limit", "overflow")

    def __init__(self, limit: int, overflow: str) -> None:
        self.limit = limit
        self.overflow = overflow
        self._seen: set[str] = set()
        self._lock = ForkSafeLock()

    def __call__(self, value: str) -> str:
        """Return ``value`` if it is (or can be) admitted, else the overflow value."""
        if value in self._seen:
            return value
        with self._lock:
            if value in self._seen or len(self._seen) < self.limit:
                self._seen.add(value)
                return value
        return self.overflow

    def __len__(self) -> int:
        return len(self._seen)
