"""`RetryConfig`: what `load_config` returns, and the objects it builds from it.

Breakers, budgets, throttles, pacers, hedges and retriers are stateful, so a config builds one
of each per name
and shares it: ``config.breaker(name)`` is the very circuit ``config.retrier(name)`` uses, and
the template of the per-host circuits every ``config.transport(name)`` shares. The sections
hold keyword arguments, checked here against each class's signature so that a bad option is an
error naming its path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from .._core.errors import ConfigError
from .._core.forks import ForkSafeLock
from .._core.policy import RetryPolicy
from .._core.redact import safe_repr
from .._core.suggestions import did_you_mean, listed

if TYPE_CHECKING:
    import httpx

    from .._engine.retrier import Retrier
    from .._protect.breaker import CircuitBreaker
    from .._protect.budget import RetryBudget
    from .._protect.hedge import Hedge
    from .._protect.pacer import Pacer
    from .._protect.throttle import AdaptiveThrottle
    from ..httpx import AsyncRetryTransport, RetryTransport

__all__ = ["COMPONENTS", "RetryConfig", "components", "lookup", "unbound"]

_T = TypeVar("_T")

#: The protection sections of a config file, each name → keyword arguments of its class.
COMPONENTS = ("breakers", "budgets", "throttles", "pacers", "hedges")
# Options that are durations, so that files give them units there too (a breaker's window may
# be a count).
_COMPONENT_DURATIONS = {
    "breakers": ("recovery_timeout", "max_recovery_timeout"),
    "budgets": ("window", "blip"),
    "throttles": ("window",),
    "pacers": (),
    "hedges": (),  # ``after`` is a duration or a quantile such as ``p95``: `Hedge` reads it
}
_COMPONENT_EXAMPLES = {
    "breakers": "{failure_threshold: 5}",
    "budgets": "{ratio: 0.3}",
    "throttles": "{k: 2.0}",
    "pacers": '{rate: "50/s", burst: 10}',
    "hedges": "{after: p95, max_extra: 1}",
}
# One option of each section, the example an unknown option's error gives.
_OPTION_EXAMPLES = {
    "breakers": "failure_threshold: 5",
    "budgets": "ratio: 0.3",
    "throttles": "k: 2.0",
    "pacers": 'rate: "50/s"',
    "hedges": "after: p95",
}
# Options whose text carries a unit (a rate per second or minute; a duration or a quantile):
# in a file a bare number is refused, as it is for the durations, and not read as per second.
_COMPONENT_UNITS = {
    "pacers": {"rate": '"50/s"', "tokens": '"10000/min"'},
    "hedges": {"after": '"p95" or "50ms"'},
}
# Options that are code, not data: a program passes them to the object it builds itself.
_CODE_ONLY = ("clock", "rng", "cost")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryConfig:
    """Policies and the protection bound to them by name, as loaded by `load_config`.

    Args:
        defaults: the policy built from ``retry_defaults``.
        policies: name → policy, each merged over the defaults.
        breakers: name → `CircuitBreaker` keyword arguments (``name`` defaults to the key).
        budgets: name → `RetryBudget` keyword arguments.
        throttles: name → `AdaptiveThrottle` keyword arguments (``name`` defaults to the key).
        pacers: name → `Pacer` keyword arguments (``name`` defaults to the key; ``cost`` is
            code: build that pacer in code).
        hedges: name → `Hedge` keyword arguments.

    .. versionadded:: 0.1
    """

    defaults: RetryPolicy = field(default_factory=RetryPolicy)
    policies: Mapping[str, RetryPolicy] = field(default_factory=dict)
    breakers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    budgets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    throttles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    pacers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hedges: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The protection and the retriers are stateful: one of each per name, shared.
    _shared: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _lock: ForkSafeLock = field(default_factory=ForkSafeLock, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("policies", *COMPONENTS):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def policy(self, name: str) -> RetryPolicy:
        """Return the policy called ``name``; a `KeyError` lists the known ones."""
        return lookup(self.policies, "policies", name)

    def breaker(self, name: str) -> CircuitBreaker:
        """Return the `CircuitBreaker` ``breakers.<name>``, built once per config and shared."""
        from .._protect.breaker import CircuitBreaker

        return self._shared_instance("breakers", name, CircuitBreaker)

    def budget(self, name: str) -> RetryBudget:
        """Return the `RetryBudget` ``budgets.<name>``, built once per config and shared."""
        from .._protect.budget import RetryBudget

        return self._shared_instance("budgets", name, RetryBudget)

    def throttle(self, name: str) -> AdaptiveThrottle:
        """Return the `AdaptiveThrottle` ``throttles.<name>``, built once per config and shared.

        .. versionadded:: 0.2
        """
        from .._protect.throttle import AdaptiveThrottle

        return self._shared_instance("throttles", name, AdaptiveThrottle)

    def pacer(self, name: str) -> Pacer:
        """Return the `Pacer` ``pacers.<name>``, built once per config and shared (the template
        of the transports' per-host pacers).

        .. versionadded:: 0.5
        """
        from .._protect.pacer import Pacer

        return self._shared_instance("pacers", name, Pacer)

    def hedge(self, name: str) -> Hedge:
        """Return the `Hedge` ``hedges.<name>``, built once per config and shared.

        .. versionadded:: 0.5
        """
        from .._protect.hedge import Hedge

        return self._shared_instance("hedges", name, Hedge)

    def retrier(self, name: str | None = None) -> Retrier:
        """Return the `Retrier` for policy ``name`` (the defaults when ``None``).

        It is built once per config and name and then shared, so every caller sees the same
        circuit state and spends the same cross-call budget. The breaker, budget, throttle,
        pacer and hedge named like the policy are used when configured; otherwise the `Retrier`
        defaults apply (no breaker, a default budget, no throttle, pacer or hedge).

        Raises:
            KeyError: no such policy.
        """
        from .._engine.retrier import Retrier

        policy, protection = self._parts(name)
        path = f"retriers.{'' if name is None else name}"
        with self._lock:
            if path not in self._shared:
                self._shared[path] = Retrier(policy, **protection)
            retrier: Retrier = self._shared[path]
        return retrier

    def transport(
        self, name: str | None = None, transport: httpx.BaseTransport | None = None
    ) -> RetryTransport:
        """Return a new `retrymw.httpx.RetryTransport` for policy ``name``.

        The transport gets the policy; the breaker, budget, throttle and pacer configured under
        its name (the same objects as `breaker`, `budget`, `throttle`, `pacer` and `retrier`
        use: one cross-call budget serves both, and the breaker and pacer are the templates of
        the transport's one circuit and pacer per host, shared by every transport built for
        the name; a sync transport does not hedge, so a hedge is left out); and every named
        policy of the config, which a request selects with ``extensions={"retrymw": "other"}``.
        Each call builds a new transport (it owns a connection pool); build it once per client.

        Args:
            name: the policy; ``None`` for the defaults.
            transport: the inner transport; ``httpx.HTTPTransport()`` by default.

        Raises:
            KeyError: no such policy.
            ImportError: httpx is not installed (``pip install 'retrymw[httpx]'``).

        .. versionadded:: 0.2
        """
        from ..httpx import RetryTransport

        policy, protection = self._parts(name)
        protection.pop("hedge", None)  # a blocking attempt cannot be raced
        return RetryTransport(transport, policy=policy, policies=self.policies, **protection)

    def async_transport(
        self, name: str | None = None, transport: httpx.AsyncBaseTransport | None = None
    ) -> AsyncRetryTransport:
        """Return a new `retrymw.httpx.AsyncRetryTransport`; see `transport` (this one also
        gets the hedge configured under the name).

        .. versionadded:: 0.2
        """
        from ..httpx import AsyncRetryTransport

        policy, protection = self._parts(name)
        return AsyncRetryTransport(transport, policy=policy, policies=self.policies, **protection)

    def _parts(self, name: str | None) -> tuple[RetryPolicy, dict[str, Any]]:
        """The policy ``name`` and the protection configured under its name, if any."""
        policy = self.defaults if name is None else self.policy(name)
        key = policy.name if name is None else name
        protection: dict[str, Any] = {}
        if key in self.breakers:
            protection["breaker"] = self.breaker(key)
        if key in self.budgets:
            protection["budget"] = self.budget(key)
        if key in self.throttles:
            protection["throttle"] = self.throttle(key)
        if key in self.pacers:
            protection["pacer"] = self.pacer(key)
        if key in self.hedges:
            protection["hedge"] = self.hedge(key)
        return policy, protection

    def _shared_instance(self, section: str, name: str, factory: Callable[..., _T]) -> _T:
        kwargs = lookup(getattr(self, section), section, name)
        path = f"{section}.{name}"
        with self._lock:
            if path not in self._shared:
                self._shared[path] = construct(factory, kwargs, section, name)
            instance: _T = self._shared[path]
        return instance


def lookup(section: Mapping[str, _T], label: str, name: str) -> _T:
    """``section[name]``; a `KeyError` naming the close match, if any, and the known names."""
    try:
        return section[name]
    except KeyError:
        hint = did_you_mean(name, section)
        message = f"unknown name {safe_repr(name, 100)}{hint}; known {label}: {listed(section)}"
        raise KeyError(message) from None


def unbound(section: str, name: str, known: Collection[str]) -> ConfigError | None:
    """The error for protection ``<section>.<name>`` when ``name`` is none of the ``known``
    policy names (which include the defaults' own), else ``None``.

    Protection binds to the policy of its name; under any other name it would protect nothing,
    silently: almost always a misspelt policy name.
    """
    if name in known:
        return None
    problem = f"names no policy, so it would protect nothing{did_you_mean(name, known)}"
    return ConfigError(f"{section}.{name}", name, problem, f"a policy name: {listed(known)}")


def components(
    value: Any,
    section: str,
    mapping: Callable[[Any, str, str], dict[str, Any]],
    duration: Callable[[Any, str], float],
) -> dict[str, Mapping[str, Any]]:
    """Read one of the `COMPONENTS` sections: name → keyword arguments, durations checked."""
    result: dict[str, Mapping[str, Any]] = {}
    for name, raw in mapping(value, section, "{payments: {...}}").items():
        kwargs = mapping(raw, f"{section}.{name}", _COMPONENT_EXAMPLES[section])
        for key in _COMPONENT_DURATIONS[section]:
            if kwargs.get(key) is not None:
                duration(kwargs[key], f"{section}.{name}.{key}")
        for key, example in _COMPONENT_UNITS.get(section, {}).items():
            value = kwargs.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                problem = "a bare number has no unit"
                raise ConfigError(f"{section}.{name}.{key}", value, problem, example)
        if section in ("breakers", "throttles", "pacers"):  # named after the key unless given
            kwargs.setdefault("name", name)
        result[name] = MappingProxyType(kwargs)
    return result


def construct(factory: Callable[..., _T], kwargs: Mapping[str, Any], section: str, name: str) -> _T:
    """Build ``factory(**kwargs)`` for ``<section>.<name>``, naming that path and the option in
    any error, with an example from the section (a code-only option: how to pass it in code)."""
    path = f"{section}.{name}"
    example = _OPTION_EXAMPLES[section]
    keyword = section.removesuffix("s")  # the Retrier's and transports' keyword: pacer=, ...
    named = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    parameters = inspect.signature(factory).parameters.values()
    # Clocks, random sources and callables are objects that code injects; config holds data.
    known = [p.name for p in parameters if p.kind in named and p.name not in _CODE_ONLY]
    for key, value in kwargs.items():
        if key in _CODE_ONLY:
            problem = (
                f"is code, not data: build the {factory.__name__} in code and pass it as"
                f" {keyword}= to the Retrier or transport"
            )
            instead = f"{keyword}={factory.__name__}(..., {key}=...)"
            raise ConfigError(f"{path}.{key}", value, problem, instead)
        if key not in known:
            problem = f"unknown {factory.__name__} option, known: {', '.join(known)}"
            raise ConfigError(f"{path}.{key}", value, problem, example)
    try:
        return factory(**kwargs)
    except ConfigError as error:
        raise error.at(path) from None
    except TypeError as error:  # a value of the wrong type, e.g. a string compared to a number
        bad = next((key for key in kwargs if repr(key) in str(error)), None)
        where, value = (path, kwargs) if bad is None else (f"{path}.{bad}", kwargs[bad])
        raise ConfigError(where, value, f"rejected: {error}", example) from None
