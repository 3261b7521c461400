"""`SharedThrottle`: an adaptive throttle whose counts are pooled across the fleet.

Each synchroniser step publishes the process's own trailing-window requests, accepts and
overload refusals (a gauge per member, `_scripts.THROTTLE`) and hands the *other* members' sums
to the throttle
(``AdaptiveThrottle.pool``), so a low-rate process sheds as soon as the fleet sees the failures,
not after its own window fills. Degraded, the pooled counts are dropped: the throttle judges on
its own counts again, as it would without a fleet.
"""

from __future__ import annotations

from typing import Any, final

from ._hooks import ThrottleHost

__all__ = ["SharedThrottle"]


@final
class SharedThrottle:
    """The fleet side of one `AdaptiveThrottle`.

    Args:
        throttle: the throttle (with the fleet hook).
        target: the key's hash tag.
    """

    __slots__ = ("__weakref__", "_own", "members", "target", "throttle")

    kind = "throttle"

    def __init__(self, throttle: ThrottleHost, target: str) -> None:
        self.throttle = throttle
        self.target = target
        self.members = 0
        self._own = (0, 0, 0)

    def prepare(self) -> list[Any]:
        """The script's arguments after ``member``: this process's window counts."""
        stats = self.throttle.statistics()
        self._own = (int(stats.requests), int(stats.accepts), int(stats.overloaded))
        return list(self._own)

    def apply(self, reply: list[Any]) -> None:
        """Pool the other members' counts (the sums less this process's own)."""
        requests, accepts, self.members, overloaded = (int(reply[i]) for i in (0, 1, 2, 4))
        own_requests, own_accepts, own_overloaded = self._own
        self.throttle.pool(
            max(0, requests - own_requests),
            max(0, accepts - own_accepts),
            max(0, overloaded - own_overloaded),
        )

    def fall_back(self) -> None:
        """Degraded: the local counts alone."""
        self.throttle.pool(0, 0, 0)
