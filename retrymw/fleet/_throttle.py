"""`SharedThrottle`: an adaptive throttle whose counts are pooled across the fleet.

A step whose process saw traffic on the throttle (or whose fleet did, at the last step)
publishes the process's own trailing-window requests, accepts and overload refusals (a gauge
per member, `_scripts`) and hands the *other* members' sums, each member clamped to what one
member can plausibly claim, to the throttle (``AdaptiveThrottle.pool``), so a low-rate process
sheds as soon as the fleet sees the failures, not after its own window fills. Degraded, the
pooled counts are dropped: the throttle judges on its own counts again, as it would without a
fleet.
"""

from __future__ import annotations

import weakref
from typing import final

from ._hooks import ThrottleHost
from ._replies import ThrottleReply

__all__ = ["SharedThrottle"]


@final
class SharedThrottle:
    """The fleet side of one `AdaptiveThrottle`.

    Args:
        throttle: the throttle (with the fleet hook).
        suffix: the pooled counts' key suffix (``<name>:<target>``, encoded).
        serial: this link's number in its process.
    """

    __slots__ = (
        "__weakref__",
        "_own",
        "_pooled",
        "_sent",
        "_throttle",
        "members",
        "serial",
        "suffix",
    )

    kind = "t"

    def __init__(self, throttle: ThrottleHost, suffix: str, serial: int) -> None:
        self._throttle = weakref.ref(throttle)  # weakly, as `SharedBreaker` holds its breaker
        self.suffix = suffix
        self.serial = serial
        self.members = 0
        self._own = (0, 0, 0)
        self._sent: tuple[int, int, int] | None = None  # what the store holds for this link
        self._pooled = False  # the others' sums were not all zero at the last step

    def _counts(self) -> tuple[int, int, int]:
        throttle = self._throttle()
        if throttle is None:
            return (0, 0, 0)
        stats = throttle.statistics()
        return (int(stats.requests), int(stats.accepts), int(stats.overloaded))

    def due(self) -> bool:
        """Whether this step should carry a record: new counts here, or counts elsewhere."""
        self._own = self._counts()
        return self._pooled or self._own != self._sent

    def record(self) -> tuple[str, int]:
        """The step's record (`_scripts`): this process's window counts."""
        requests, accepts, overloaded = self._own
        self._sent = self._own
        return f"t {self.serial} {self.suffix} {requests} {accepts} {overloaded}", 0

    def apply(self, reply: ThrottleReply) -> None:
        """Pool the other members' counts."""
        self.members = reply.members
        self._pooled = bool(reply.requests or reply.accepts or reply.overloaded)
        throttle = self._throttle()
        if throttle is not None:
            throttle.pool(reply.requests, reply.accepts, reply.overloaded)

    def fall_back(self) -> None:
        """Degraded: the local counts alone."""
        self._sent = None
        self._pooled = False
        throttle = self._throttle()
        if throttle is not None:
            throttle.pool(0, 0, 0)

    def resend(self) -> None:
        """The store forgot this member: record again at the next step."""
        self._sent = None

    def detach(self) -> None:
        """Leave the fleet: the local counts alone."""
        self.fall_back()
