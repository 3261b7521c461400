"""`ProbeSlots`: a half-open breaker's probes, each tied to the context that was admitted.

The retrier's interface carries no permit: it calls ``allow_request()`` and later exactly one
of ``record_success()``, ``record_failure()`` or ``release()``, from the same asyncio task,
trio task or thread. So the permit travels in a `ContextVar` instead. Admitting a probe puts
a fresh permit in the current context; a verdict takes back the newest permit of this breaker
found there, and it is a probe's verdict only if that permit belongs to the current half-open
period. A verdict for an attempt admitted while closed, or in an earlier half-open period,
finds no live permit: it frees no slot and moves nothing.

Each context holds an immutable tuple, replaced rather than mutated: a task spawned during an
attempt starts from a copy of its parent's context, and what it takes back never changes its
parent's. A live permit is counted once, by whichever verdict takes it. Calls through the same
breaker nest (an attempt that calls it again) last-in first-out, and the tuple is a stack. A
driver that steps many calls in one context (the simulator's coroutine loop) still frees every
slot, since any verdict there takes a live permit; only a verdict reported from a context that
never saw the admission (another thread, without its context) leaves a probe's slot taken.

A permit whose verdict arrives outside half-open stays in its context until that context's
next probe of the same breaker drops it: it is stale by then and never counted.

Everything here runs under the breaker's lock.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import final

__all__ = ["ProbeSlots"]


@final
class _Permit:
    __slots__ = ("period", "slots")

    def __init__(self, slots: ProbeSlots, period: int) -> None:
        self.slots = slots
        self.period = period  # -1 once a verdict took it: a permit counts once, in any context


# Module level, not one per breaker: contexts keep every ContextVar they ever saw alive.
_HELD: ContextVar[tuple[_Permit, ...]] = ContextVar("retrymw_breaker_probes", default=())


@final
class ProbeSlots:
    """The probes in flight in the current half-open period (the caller holds the lock).

    A permit is live while its ``period`` is the current one; ``clear`` starts a new period.
    Two small ints per breaker: thousands of keyed breakers stay cheap.
    """

    __slots__ = ("_in_flight", "_period")

    def __init__(self) -> None:
        self._period = 0
        self._in_flight = 0

    def __len__(self) -> int:
        return self._in_flight

    def admit(self) -> None:
        """Admit a probe in the current context."""
        period = self._period
        held = _HELD.get()
        if held:
            # Drop this breaker's permits of ended periods: their verdicts are stale anyway.
            held = tuple(p for p in held if p.slots is not self or p.period == period)
        _HELD.set((*held, _Permit(self, period)))
        self._in_flight += 1

    def finish(self) -> bool:
        """Take back this context's newest permit; True if it is a probe of this period."""
        held = _HELD.get()
        index = len(held) - 1
        while index >= 0 and held[index].slots is not self:
            index -= 1
        if index < 0:
            return False  # nothing admitted here in half-open: not a probe
        permit = held[index]
        _HELD.set(held[:index] + held[index + 1 :])
        if permit.period != self._period:
            return False
        permit.period = -1
        self._in_flight -= 1
        return True

    def clear(self) -> None:
        """End the period: every permit given so far is stale from now on."""
        self._period += 1
        self._in_flight = 0
