"""Which protection the demo's transport gets: one of the simulator's `SETUPS`, adjusted by flags.

`DemoSetup` reads a setup by name from `retrymw.simulate.SETUPS` (the same arguments the
simulator builds its objects from, so a retuned setup is retuned here too), lets
``--breaker``/``--no-breaker``, ``--throttle``/``--no-throttle`` and ``--budget``/``--no-budget``
add or remove one protection, and builds the live objects for `AsyncRetryTransport`: each a
`PerTarget` of the setup's template, one instance per host, as docs/protection.md recommends
for a transport. A protection a flag adds takes its arguments from the setup that has it
(``+ budget + breaker`` for the breaker, ``+ budget + throttle`` for the throttle, ``+ budget``
for the budget).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from random import Random
from typing import Any

from ..._core.clock import Clock
from ..._protect.breaker import CircuitBreaker
from ..._protect.budget import RetryBudget
from ..._protect.targets import PerTarget
from ..._protect.throttle import AdaptiveThrottle
from ...simulate import SETUPS

__all__ = ["DEFAULT_ATTEMPTS", "RECOMMENDED", "DemoSetup", "Protection", "setup_name", "short_name"]

#: The demo's default: what docs/protection.md recommends for one dependency that is either up
#: or down, the demo's upstream: retries, the default budget and a default breaker (opening at
#: 20 failures in a row or 80% of 100 attempts, so a brownout never trips it), one per host.
RECOMMENDED = "+ budget + breaker"
#: Where a protection a flag adds takes its arguments from.
_SOURCE = {"breaker": "+ budget + breaker", "throttle": "+ budget + throttle", "budget": "+ budget"}
#: Attempts per call when the setup does not set them (the demo's policy).
DEFAULT_ATTEMPTS = 4


def short_name(name: str) -> str:
    """A setup's name as typed on a command line: ``+ budget + throttle`` → ``budget+throttle``."""
    return name.strip().lstrip("+").strip().replace(" + ", "+").replace(" ", "-")


def setup_name(text: str) -> str:
    """Parse ``--setup``: a name of `SETUPS` (``"+ budget + throttle"``) or its short form
    (``budget+throttle``), case-insensitive.

    Raises:
        argparse.ArgumentTypeError: no such setup; argparse reports a usage error.
    """
    wanted = text.strip().lower()
    for name in SETUPS:
        if wanted in (name, short_name(name)):
            return name
    known = ", ".join(short_name(name) for name in SETUPS)
    raise argparse.ArgumentTypeError(f"no setup named {text!r}; known: {known} (e.g. budget)")


@dataclass(frozen=True, slots=True)
class Protection:
    """The live objects the transport gets (``None``: that protection is off)."""

    breaker: PerTarget[CircuitBreaker] | None
    budget: PerTarget[RetryBudget] | None
    throttle: PerTarget[AdaptiveThrottle] | None


@dataclass(frozen=True, slots=True)
class DemoSetup:
    """A protection setup: the arguments of each protection (``None``: off) and the attempts.

    Attributes:
        name: the `SETUPS` name it starts from.
        breaker: `CircuitBreaker` arguments, or ``None``.
        budget: `RetryBudget` arguments, or ``None``.
        throttle: `AdaptiveThrottle` arguments, or ``None``.
        attempts: attempts per call the setup sets (``no retries``: 1), else ``None``.
        flags: the flags that changed it, as typed (``("--breaker",)``).
    """

    name: str
    breaker: Mapping[str, Any] | None
    budget: Mapping[str, Any] | None
    throttle: Mapping[str, Any] | None
    attempts: int | None = None
    flags: tuple[str, ...] = ()

    @classmethod
    def named(cls, name: str) -> DemoSetup:
        """The setup ``name`` of `SETUPS`, as the simulator applies it (no breaker or throttle
        unless it names one; the default budget unless it turns it off)."""
        fields = SETUPS[name]
        return cls(
            name=name,
            breaker=fields.get("breaker"),
            budget=fields.get("budget", {}),
            throttle=fields.get("throttle"),
            attempts=fields.get("attempts"),
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DemoSetup:
        """``--setup`` (the recommended one by default) with ``--[no-]breaker``,
        ``--[no-]throttle`` and ``--[no-]budget`` applied."""
        setup = cls.named(getattr(args, "setup", None) or RECOMMENDED)
        changed: dict[str, Any] = {}
        flags = []
        for kind in ("breaker", "throttle", "budget"):
            wanted = getattr(args, kind, None)
            has = getattr(setup, kind) is not None
            if wanted is None or wanted == has:
                continue
            changed[kind] = SETUPS[_SOURCE[kind]][kind] if wanted else None
            flags.append(f"--{kind}" if wanted else f"--no-{kind}")
        if not changed:
            return setup
        return dataclasses.replace(setup, flags=tuple(flags), **changed)

    def build(self, *, seed: int | None = None, clock: Clock | None = None) -> Protection:
        """The live objects, one instance per host; ``seed`` makes the throttle's draws and
        the breaker's recovery jitter repeatable."""

        def rng(kind: str) -> Random | None:
            return None if seed is None else Random(f"{seed}:{kind}")

        breaker = throttle = budget = None
        if self.breaker is not None:
            settings = {"name": "upstream", **self.breaker}
            breaker = PerTarget(CircuitBreaker(clock=clock, rng=rng("breaker"), **settings))
        if self.throttle is not None:
            settings = {"name": "upstream", **self.throttle}
            throttle = PerTarget(AdaptiveThrottle(clock=clock, rng=rng("throttle"), **settings))
        if self.budget is not None:
            budget = PerTarget(RetryBudget(clock=clock, **self.budget))
        return Protection(breaker=breaker, budget=budget, throttle=throttle)

    def describe(self) -> str:
        """What the banner says about the protection: each one on or off, and its source."""
        parts = []
        if self.budget is not None:
            parts.append("retry budget" + (" (default)" if not self.budget else ""))
        if self.throttle is not None:
            parts.append("adaptive throttle" + (" (default)" if not self.throttle else ""))
        if self.breaker is not None:
            parts.append(_breaker_text(self.breaker))
        shown = " + ".join(parts) if parts else "no protection"
        return f"setup {' '.join((short_name(self.name), *self.flags))}: {shown}"


def _breaker_text(arguments: Mapping[str, Any]) -> str:
    """The breaker's trip rules, read from a breaker built with ``arguments``."""
    settings = CircuitBreaker(**arguments).settings
    rules = []
    if settings.failure_threshold is not None:
        rules.append(f"{settings.failure_threshold} failures in a row")
    if settings.failure_rate_threshold is not None:
        window = (
            f"{settings.window_size} attempts"
            if settings.window_size is not None
            else f"{settings.window_duration:g}s"
        )
        rules.append(f"{settings.failure_rate_threshold:.0%} failures over {window}")
    opens = " or ".join(rules) if rules else "never"
    return f"breaker (opens at {opens}; probes after {settings.recovery_timeout:g}s)"
