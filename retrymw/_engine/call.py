"""`Call`: one call as its front door describes it to the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .._core.policy import RetryPolicy
from .callables import operation_name

if TYPE_CHECKING:
    from .runtime import AttemptAdapter

__all__ = ["Call"]


class Call(NamedTuple):
    """What the engine is told about a call: a frozen description, built by the front door.

    Attributes:
        operation: the call's name in telemetry (a coroutine's qualified name, an HTTP
            method).
        policy: the policy the call runs under.
        target: the telemetry target and the `PerTarget` key (the operation for coroutines,
            the host for HTTP).
        adapter: how a front door refines outcomes and disposes of results (HTTP), or
            ``None``.
        request: what instruments are told the call sends (the HTTP request), or ``None``.
    """

    operation: str
    policy: RetryPolicy
    target: str
    adapter: AttemptAdapter | None = None
    request: object = None

    @classmethod
    def of(cls, fn: Callable[..., Any], policy: RetryPolicy, operation: str | None = None) -> Call:
        """The call of ``fn`` under ``policy``: named after ``fn`` unless ``operation`` is
        given, its target its name."""
        name = operation_name(fn) if operation is None else operation
        return cls(operation=name, policy=policy, target=name)
