"""Per-request policies: `PolicyResolver` picks a request's policy from its extensions.

A request names a policy (``request.extensions["retrymw"]``: a name or a `RetryPolicy`); the
names a transport was configured with resolve to their policies, and the policy names requests
bring into telemetry are capped (`MAX_POLICY_NAMES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._core.errors import ConfigError
from .._core.policy import RetryPolicy
from .._core.suggestions import did_you_mean, listed
from ..instrumentation._cardinality import BoundedValues
from ..instrumentation._names import OVERFLOW
from .rules import HTTP_PROFILE, HttpProfile, honours_server, http_policy

__all__ = [
    "HELPER_EXTENSION",
    "MAX_POLICY_NAMES",
    "POLICY_EXTENSION",
    "PolicyResolver",
]

#: ``request.extensions`` key selecting a policy for one request.
POLICY_EXTENSION = "retrymw"


#: Set by the client helpers on their requests, so that a retrying transport below refuses them.
HELPER_EXTENSION = "retrymw.client_helper"


#: Distinct policy names that per-request overrides may bring into telemetry, process-wide;
#: later ones are reported as ``_other``, as targets past their cap are. Configured names
#: (a transport's policy and its ``policies``) are never capped.
MAX_POLICY_NAMES = 32


# Shared by every resolver: the client helpers build one per call.
_OVERRIDE_NAMES = BoundedValues(MAX_POLICY_NAMES, OVERFLOW)


_POLICIES_EXAMPLE = '{"fast": RetryPolicy(attempts=2)}'


class PolicyResolver:
    """Turns ``request.extensions["retrymw"]`` into a `RetryPolicy`, caching what it builds.

    Args:
        default: the transport's policy (already passed through ``profile.policy``).
        policies: named policies a request may select by name.
        profile: the transport's `HttpProfile` (the ``retry_on`` of a policy without one).

    Raises:
        ConfigError: ``policies`` is not a mapping of names to `RetryPolicy`.

    The cache keeps the hot path free of validation: a dict of fields such as
    ``{"attempts": 1}`` is applied with `RetryPolicy.replace` once, then looked up.

    A policy's name is a telemetry label, so the names overrides bring in are bounded: past
    `MAX_POLICY_NAMES` new ones (process-wide), an override runs under the name ``_other``.
    """

    __slots__ = ("_cache", "_known", "default", "policies", "profile")

    #: At most this many distinct overrides are cached; more are rebuilt on every request.
    MAX_CACHED = 256

    def __init__(
        self,
        default: RetryPolicy,
        policies: Mapping[str, RetryPolicy] | None = None,
        profile: HttpProfile = HTTP_PROFILE,
    ) -> None:
        self.default = default
        self.profile = profile
        resolved: dict[str, RetryPolicy] = {}
        if policies is None:
            policies = {}
        elif not isinstance(policies, Mapping):
            raise ConfigError(
                "policies", policies, "must be a mapping of names to RetryPolicy", _POLICIES_EXAMPLE
            )
        for name, policy in policies.items():
            if not isinstance(name, str):
                raise ConfigError("policies", name, "names must be strings", _POLICIES_EXAMPLE)
            if not isinstance(policy, RetryPolicy):
                raise ConfigError(
                    f"policies.{name}", policy, "must be a RetryPolicy", "RetryPolicy(attempts=5)"
                )
            resolved[name] = profile.policy(policy)
        self.policies = resolved
        self._known = {default.name, *(policy.name for policy in resolved.values())}
        self._cache: dict[Any, tuple[object, RetryPolicy]] = {}

    def resolve(self, override: object) -> RetryPolicy:
        """Return the policy for one request's ``extensions["retrymw"]`` value (or ``None``).

        Raises:
            ConfigError: an unknown policy name, a bad field, or a value of another type.
        """
        if override is None:
            return self.default
        if isinstance(override, str):
            try:
                return self.policies[override]
            except KeyError:
                known = listed(self.policies, none="none configured")
                hint = did_you_mean(override, self.policies)
                raise ConfigError(
                    'extensions["retrymw"]',
                    override,
                    f"unknown policy (known: {known}){hint}",
                    '"fast"',
                ) from None
        if isinstance(override, RetryPolicy):
            if (
                override.retry_on is not None
                and honours_server(override.retry_on)
                and override.on_failure != "continue"
                and override.with_default_jitter("full") is override
                and self._admits(override.name)
            ):
                return override
            key: Any = ("policy", id(override))
        elif isinstance(override, dict):
            try:
                # The type is part of the key: {"attempts": True} must not hit {"attempts": 1}.
                key = ("fields", frozenset((k, type(v), v) for k, v in override.items()))
            except TypeError:  # an unhashable value, e.g. a retry_on list: build every time
                return self._build(override)
        else:
            raise ConfigError(
                'extensions["retrymw"]',
                override,
                "must be a policy name, a RetryPolicy or a dict of policy fields",
                '{"attempts": 1}',
            )
        cached = self._cache.get(key)
        # The original object is kept with its result so that an id() is never reused.
        if cached is not None and (key[0] == "fields" or cached[0] is override):
            return cached[1]
        policy = self._build(override)
        if len(self._cache) < self.MAX_CACHED:
            self._cache[key] = (override, policy)
        return policy

    def once(self, policy: RetryPolicy) -> RetryPolicy:
        """``policy`` with a single attempt, for a request that is retried above the transport."""
        key = ("once", id(policy))
        cached = self._cache.get(key)
        if cached is not None and cached[0] is policy:
            return cached[1]
        single = policy.replace(attempts=1)
        if len(self._cache) < self.MAX_CACHED:
            self._cache[key] = (policy, single)
        return single

    def _admits(self, name: str) -> bool:
        return name in self._known or _OVERRIDE_NAMES(name) == name

    def _build(self, override: RetryPolicy | dict[str, Any]) -> RetryPolicy:
        if isinstance(override, RetryPolicy):
            policy = self.profile.policy(override)
        else:
            try:
                policy = http_policy(self.default.replace(**override))
            except ConfigError as error:
                raise error.at('extensions["retrymw"]') from None
        return policy if self._admits(policy.name) else policy.replace(name=OVERFLOW)
