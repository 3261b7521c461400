"""Calls described as a front door describes them: an operation and a target of their own."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from retrymw import Retrier
from retrymw._engine.call import Call

__all__ = ["call_as"]

T = TypeVar("T")


def call_as(
    retrier: Retrier, fn: Callable[[], T], *, operation: str, target: str | None = None
) -> T:
    """Run ``fn`` through ``retrier`` as the call ``operation`` to ``target`` (the operation
    when not given), the way a transport names an HTTP call: `PerTarget` picks by ``target``."""
    call = Call(operation=operation, policy=retrier.policy, target=target or operation)
    return retrier.run_sync(fn, (), {}, call)
