"""Flavours: httpx and its fork httpx2, as the one HTTP core sees them.

The OpenAI and Anthropic SDKs moved to httpx2, the maintained fork of httpx, whose API is the
same under another name: ``httpx2.Request``, ``httpx2.AsyncBaseTransport``, the same exception
tree. The HTTP core (`exchange`, `body`, `rules`, `hints`, `transport`) works on either by
duck typing; a `Flavour` holds the little that must be the library's own: its module (for the
stream and exception classes a transport checks), the errors proving a request never left,
and the retrymw errors the transports raise, which must be that library's ``TransportError``
so that ``except httpx2.HTTPError`` catches them. `retrymw.httpx` and `retrymw.httpx2` each
bind one.

Mixing them fails at once: a request or an inner transport of the other flavour is refused
with a `ConfigError` naming both, instead of a bare ``AssertionError`` deep inside httpx.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .._core.errors import (
    CircuitOpenError,
    ConfigError,
    LoadShedError,
    PacedError,
    RetryBudgetExhausted,
)

__all__ = [
    "CircuitOpenMixin",
    "Flavour",
    "LoadShedMixin",
    "PacedMixin",
    "RetryBudgetExhaustedMixin",
    "flavour_name",
    "flavour_named",
    "flavour_of",
    "register",
]

_NAMES = ("httpx", "httpx2")
# Filled by the faces as they are imported: a client of a flavour implies its face was imported.
_REGISTERED: dict[str, Flavour] = {}


def flavour_name(value: object) -> str | None:
    """``"httpx"`` or ``"httpx2"`` when ``value`` is an object of that library, else None."""
    root = type(value).__module__.partition(".")[0]
    return root if root in _NAMES else None


class CircuitOpenMixin(CircuitOpenError):
    """A `CircuitOpenError` that carries its request: each flavour adds its ``TransportError``."""

    def __init__(self, circuit: str, *, retry_in: float | None = None, request: Any) -> None:
        super().__init__(circuit, retry_in=retry_in)
        self.request = request


class LoadShedMixin(LoadShedError):
    """A `LoadShedError` that carries its request: each flavour adds its ``TransportError``."""

    def __init__(self, throttle: str, *, reject_probability: float, request: Any) -> None:
        super().__init__(throttle, reject_probability=reject_probability)
        self.request = request


class PacedMixin(PacedError):
    """A `PacedError` that carries its request: each flavour adds its ``TransportError``."""

    def __init__(
        self, pacer: str, *, wait: float, deadline_left: float, request: Any, room: float = 0.0
    ) -> None:
        super().__init__(pacer, wait=wait, deadline_left=deadline_left, room=room)
        self.request = request


class RetryBudgetExhaustedMixin(RetryBudgetExhausted):
    """A `RetryBudgetExhausted` that carries its request, for each flavour's ``TransportError``."""

    def __init__(self, message: str, *, attempts: int, delay_so_far: float, request: Any) -> None:
        super().__init__(message, attempts=attempts, delay_so_far=delay_so_far)
        self.request = request


@dataclass(frozen=True, eq=False, slots=True)
class Flavour:
    """One httpx-like library, as the HTTP core needs it.

    Attributes:
        module: the library (``httpx`` or ``httpx2``).
        circuit_open: its `CircuitOpenError` twin (``TransportCircuitOpenError``).
        load_shed: its `LoadShedError` twin (``TransportLoadShedError``).
        budget_exhausted: its `RetryBudgetExhausted` twin.
        attempt_timeout: its ``AttemptTimeoutError`` (a ``TimeoutException``).
        paced: its `PacedError` twin (``TransportPacedError``).
    """

    module: ModuleType
    circuit_open: type[CircuitOpenMixin]
    load_shed: type[LoadShedMixin]
    budget_exhausted: type[RetryBudgetExhaustedMixin]
    attempt_timeout: Callable[..., Exception]
    paced: type[PacedMixin]

    @property
    def name(self) -> str:
        """``"httpx"`` or ``"httpx2"``."""
        return self.module.__name__

    @property
    def never_sent(self) -> tuple[type[Exception], ...]:
        """Errors proving that no byte of the request reached the server."""
        module = self.module
        return (module.ConnectError, module.ConnectTimeout, module.PoolTimeout)

    def check_request(self, request: object) -> None:
        """Refuse a request of another library (the other flavour's, say).

        Raises:
            ConfigError: naming both flavours.
        """
        if isinstance(request, self.module.Request):
            return
        other = flavour_name(request)
        kind = f"{type(request).__module__}.{type(request).__qualname__}"
        problem = f"is not an {self.name}.Request; this is retrymw.{self.name}'s transport"
        if other is not None:
            problem = (
                f"is an {other} request, but this is retrymw.{self.name}'s transport: "
                f"use retrymw.{other}'s with an {other} client"
            )
        raise ConfigError("request", kind, problem, f"{self.name}.AsyncClient(transport=...)")

    def check_transport(self, transport: object, asynchronous: bool) -> None:
        """Refuse an inner transport that is not of this flavour and colour.

        Raises:
            ConfigError: naming the right class (and both flavours for the other one's).
        """
        module = self.module
        kind = module.AsyncBaseTransport if asynchronous else module.BaseTransport
        if transport is None or isinstance(transport, kind):
            return
        name = self.name
        problem = f"must be an {name}.{kind.__name__} or None"
        other = flavour_name(transport)
        twin = module.BaseTransport if asynchronous else module.AsyncBaseTransport
        if isinstance(transport, twin):
            use = (
                f"RetryTransport and {name}.Client"
                if asynchronous
                else f"AsyncRetryTransport and {name}.AsyncClient"
            )
            problem += f" (an {name}.{twin.__name__} needs {use})"
        elif other is not None and other != name:
            problem += f" (an {other} transport needs retrymw.{other}'s transports)"
        default = "AsyncHTTPTransport()" if asynchronous else "HTTPTransport()"
        raise ConfigError("transport", transport, problem, f"{name}.{default}")


def register(flavour: Flavour) -> Flavour:
    """Make ``flavour`` known to `flavour_of` (each face registers its own); return it."""
    _REGISTERED[flavour.name] = flavour
    return flavour


def flavour_named(name: str) -> Flavour:
    """The `Flavour` of ``"httpx"`` or ``"httpx2"``, importing its face (which registers it).

    Raises:
        ImportError: that library is not installed.
    """
    if name not in _REGISTERED:
        import importlib

        importlib.import_module(f"retrymw.{name}")  # the face registers its flavour
    return _REGISTERED[name]


def flavour_of(value: object, field: str) -> Flavour:
    """The `Flavour` of an httpx or httpx2 object (a client, say).

    Raises:
        ConfigError: ``value`` belongs to neither, naming ``field``.
    """
    name = flavour_name(value)
    if name is not None:
        return flavour_named(name)
    raise ConfigError(
        field,
        f"{type(value).__module__}.{type(value).__qualname__}",
        "must be an httpx or httpx2 client",
        "httpx2.AsyncClient()",
    )
