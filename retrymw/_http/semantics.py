"""HTTP semantics without importing httpx: methods, statuses, server hints, URLs, policies.

Everything here is pure and synchronous so that the transports of both flavours (`retrymw.httpx`,
`retrymw.httpx2`) stay thin wrappers and the rules are tested without a client, a server or an
event loop. Server hints (``Retry-After``, ``retry-after-ms``, ``x-should-retry``, the
rate-limit resets...) are read by `hints`, whose `parse_retry_after` is re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._core.clock import Clock
from .._core.errors import ConfigError
from .._core.events import Outcome, RetryReason
from .._core.matchers import Matcher, compile_matcher, on_status
from .._core.policy import RetryPolicy
from .._core.suggestions import did_you_mean, listed
from ..instrumentation._names import OVERFLOW, BoundedValues
from .hints import NO_HINTS, WHITESPACE, parse_retry_after, read_hints, should_retry

__all__ = [
    "HELPER_EXTENSION",
    "HTTP_RETRY_ON",
    "IDEMPOTENCY_KEY_HEADER",
    "IDEMPOTENT_METHODS",
    "MAX_POLICY_NAMES",
    "POLICY_EXTENSION",
    "REPLAY_LIMIT",
    "RETRYABLE_STATUSES",
    "RETRY_COUNT_HEADER",
    "sdk_retry_count",
    "SERVER_SAYS_RETRY",
    "HttpExchange",
    "PolicyResolver",
    "attempt_limit",
    "content_length",
    "cut_timeouts",
    "format_target",
    "http_policy",
    "is_idempotent",
    "parse_retry_after",
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

#: Methods RFC 9110 §9.2.2 defines as idempotent; POST and PATCH are not among them.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
#: A request carrying this header may be retried whatever its method.
IDEMPOTENCY_KEY_HEADER = "idempotency-key"
#: Statuses the default HTTP policy retries.
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
#: The retry-count header the OpenAI and Anthropic SDKs send (Stainless-generated clients): the
#: transport keeps it true to the real attempt. A value of 1 or more means the SDK is retrying
#: on top of the transport only when that SDK, in this process, set it (`sdk.SdkAttempts`).
RETRY_COUNT_HEADER = "x-stainless-retry-count"


def sdk_retry_count(headers: Any) -> str | None:
    """The request's `RETRY_COUNT_HEADER` value, or ``None`` when it has none.

    Read once per request: when the header is absent, httpx's ``Headers.get`` raises and catches
    a ``KeyError`` (about 1 µs), where a membership test only scans the headers.
    """
    return headers[RETRY_COUNT_HEADER] if RETRY_COUNT_HEADER in headers else None  # noqa: SIM401


#: A streaming request body is buffered up to this size to make it replayable; a larger one is
#: sent once and never retried (reason ``body_not_replayable``).
REPLAY_LIMIT = 16 * 1024 * 1024


def _server_says_retry(outcome: Outcome) -> bool:
    status = outcome.status
    if status is None or status < 400 or outcome.exception is not None:
        return False
    return should_retry(getattr(outcome.result, "headers", None) or {}) is True


#: Matches an error response whose ``x-should-retry`` header says ``true``: the server allows a
#: retry of a status ``retry_on`` does not list. Every HTTP policy has it (`http_policy`); the
#: idempotency rules still apply, and ``x-should-retry: false`` forbids a retry (a veto).
SERVER_SAYS_RETRY = Matcher(_server_says_retry, ("x_should_retry",), uses_results=True)


def _http_retry_on() -> Matcher:
    # Statuses first, as one set lookup: most outcomes a transport sees are responses.
    matcher = compile_matcher([on_status(*sorted(RETRYABLE_STATUSES)), "timeout", "network"])
    if matcher is None:  # pragma: no cover - a non-empty list always compiles to a matcher
        raise AssertionError("HTTP_RETRY_ON")
    return matcher | SERVER_SAYS_RETRY


#: The default ``retry_on`` for HTTP. ``"network"`` covers the ``ConnectError`` and every other
#: ``NetworkError`` plus ``RemoteProtocolError`` of httpx and httpx2; ``"timeout"`` covers their
#: ``ConnectTimeout`` and every other timeout, and the per-attempt timeout. An error response
#: with ``x-should-retry: true`` matches too (`SERVER_SAYS_RETRY`).
HTTP_RETRY_ON = _http_retry_on()


def _honours_server(matcher: Matcher) -> bool:
    # Matchers compare by how they were built; an "any" keeps its parts (see `any_of`).
    return matcher == SERVER_SAYS_RETRY or SERVER_SAYS_RETRY in getattr(matcher, "_parts", ())


def is_idempotent(method: str) -> bool:
    """Return whether ``method`` is idempotent (case-insensitive)."""
    return method.upper() in IDEMPOTENT_METHODS


def http_policy(policy: RetryPolicy | None = None) -> RetryPolicy:
    """Return ``policy`` ready for HTTP: without ``retry_on`` it gets `HTTP_RETRY_ON`.

    Without a policy, the default one makes 4 attempts, waits up to 2 s, 4 s and 8 s between
    them, and jitters (full jitter): its retries span up to 14 s (7 s on average), so a call
    outlives a 3 s blip (0.99 of a blip's calls rescued with the default budget; two retries
    from 1 s spanned at most 3 s and rescued 0.49 even without a budget). Full jitter keeps
    clients that call in step apart: unjittered, 1 000 of them put three rounds of attempts
    into one 100 ms slot after an outage (30x the mean per 100 ms; simulator's "1000 clients
    in step", docs/protection.md).

    A policy's own ``retry_on`` gets `SERVER_SAYS_RETRY` added, so that a server's
    ``x-should-retry: true`` is honoured whatever statuses the policy lists.

    For a coroutine an empty ``retry_on`` means "any exception"; for a transport that would
    retry ``UnsupportedProtocol`` and never a 503, so HTTP fills in its own default instead.
    Pass ``retry_on=on_exception(Exception)`` to really retry every exception.

    Raises:
        ConfigError: ``policy`` is not a `RetryPolicy`, or its ``on_failure`` is
            ``"continue"``.
    """
    if policy is None:
        return RetryPolicy(retry_on=HTTP_RETRY_ON, attempts=4, initial_delay=2.0, jitter="full")
    if not isinstance(policy, RetryPolicy):
        raise ConfigError(
            "policy", policy, "must be a RetryPolicy or None", "RetryPolicy(attempts=3)"
        )
    if policy.on_failure == "continue":
        raise ConfigError(
            "on_failure",
            policy.on_failure,
            "a transport must return a response or raise; use raise or fallback",
            '"raise"',
        )
    if policy.retry_on is None:
        return policy.replace(retry_on=HTTP_RETRY_ON)
    if not _honours_server(policy.retry_on):
        return policy.replace(retry_on=policy.retry_on | SERVER_SAYS_RETRY)
    return policy


_POLICIES_EXAMPLE = '{"fast": RetryPolicy(attempts=2)}'


class PolicyResolver:
    """Turns ``request.extensions["retrymw"]`` into a `RetryPolicy`, caching what it builds.

    Args:
        default: the transport's policy (already passed through `http_policy`).
        policies: named policies a request may select by name.

    Raises:
        ConfigError: ``policies`` is not a mapping of names to `RetryPolicy`.

    The cache keeps the hot path free of validation: a dict of fields such as
    ``{"attempts": 1}`` is applied with `RetryPolicy.replace` once, then looked up.

    A policy's name is a telemetry label, so the names overrides bring in are bounded: past
    `MAX_POLICY_NAMES` new ones (process-wide), an override runs under the name ``_other``.
    """

    __slots__ = ("_cache", "_known", "default", "policies")

    #: At most this many distinct overrides are cached; more are rebuilt on every request.
    MAX_CACHED = 256

    def __init__(
        self, default: RetryPolicy, policies: Mapping[str, RetryPolicy] | None = None
    ) -> None:
        self.default = default
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
            resolved[name] = http_policy(policy)
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
                and _honours_server(override.retry_on)
                and override.on_failure != "continue"
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
            policy = http_policy(override)
        else:
            try:
                policy = http_policy(self.default.replace(**override))
            except ConfigError as error:
                raise error.at('extensions["retrymw"]') from None
        return policy if self._admits(policy.name) else policy.replace(name=OVERFLOW)


def attempt_limit(policy: RetryPolicy, elapsed: float) -> float | None:
    """The time one attempt may take: `RetryPolicy.attempt_limit`, as the async engine uses it."""
    return policy.attempt_limit(elapsed)


_TIMEOUT_KEYS = ("connect", "read", "write", "pool")
# httpx treats a zero timeout as "fail at once" on some operations; keep a sliver instead.
_MIN_TIMEOUT = 0.001


def cut_timeouts(current: object, limit: float) -> dict[str, float]:
    """Return httpx's ``timeout`` request extension with every phase capped at ``limit``.

    ``current`` is the existing extension (a dict of ``connect``, ``read``, ``write`` and
    ``pool`` seconds, ``None`` meaning no limit), or anything else for "none set".
    """
    limit = max(limit, _MIN_TIMEOUT)
    phases: Mapping[str, Any] = current if isinstance(current, Mapping) else {}
    cut: dict[str, float] = {}
    for key in _TIMEOUT_KEYS:
        value = phases.get(key)
        cut[key] = limit if not isinstance(value, (int, float)) else min(float(value), limit)
    return cut


def content_length(value: str | None) -> int | None:
    """Return a ``Content-Length`` header's value, or ``None`` when absent or not plain digits."""
    if value is None:
        return None
    value = value.strip(WHITESPACE)
    return int(value) if value and value.isascii() and value.isdigit() and len(value) < 20 else None


def format_target(host: str, port: int | None) -> str:
    """The telemetry target and breaker key for a host: ``host``, or ``host:port`` if not default.

    ``port`` is ``None`` when the URL uses its scheme's default port (as httpx reports it).
    """
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    return host if port is None else f"{host}:{port}"


class HttpExchange:
    """The engine's view of one HTTP request (its `AttemptAdapter`).

    It vetoes retries that would resend a non-idempotent request or a body that cannot be
    replayed, or that the server forbids (``x-should-retry: false``), reads the server's delay
    hints on error responses (`read_hints`: the longest wins), stamps ``response.extensions``
    with the attempt number, and keeps the latest response (a call that ends in an error closes it).
    It works on httpx's request and response objects by duck typing, so this module never
    imports httpx.

    Args:
        clock: the clock whose ``wall()`` dates are compared with.
        request: the ``httpx.Request``.
        replayable: whether the body can be sent again.
        never_sent: error types proving that no byte reached the server (connect errors): they
            are retried for every method.
        attempts_key: the ``response.extensions`` key for the attempt number.
    """

    __slots__ = (
        "_attempts_key",
        "_clock",
        "_latest",
        "_never_sent",
        "_veto_sent",
        "_veto_unsent",
    )

    def __init__(
        self,
        clock: Clock,
        request: Any,
        *,
        replayable: bool,
        never_sent: tuple[type[Exception], ...],
        attempts_key: str,
    ) -> None:
        self._clock = clock
        self._never_sent = never_sent
        self._attempts_key = attempts_key
        self._latest: Any = None
        idempotent = is_idempotent(request.method) or IDEMPOTENCY_KEY_HEADER in request.headers
        self._veto_unsent: RetryReason | None = None if replayable else "body_not_replayable"
        self._veto_sent: RetryReason | None = self._veto_unsent if idempotent else "not_idempotent"

    def outcome(
        self, attempt: int, elapsed: float, result: Any, error: Exception | None
    ) -> Outcome:
        """Describe one attempt: status, the server's hints and the veto that applies."""
        if error is not None:
            veto = self._veto_unsent if isinstance(error, self._never_sent) else self._veto_sent
            return Outcome(attempt=attempt, elapsed=elapsed, exception=error, veto=veto)
        # Kept so that a call ending in an error (a raising retry_on predicate) can close it.
        self._latest = result
        result.extensions[self._attempts_key] = attempt
        status: int = result.status_code
        if status < 400:  # the success path reads no header
            return Outcome(
                attempt=attempt, elapsed=elapsed, result=result, status=status, veto=self._veto_sent
            )
        hints = read_hints(result.headers, status, self._clock.wall())
        if hints is NO_HINTS:
            return Outcome(
                attempt=attempt, elapsed=elapsed, result=result, status=status, veto=self._veto_sent
            )
        said_no: RetryReason | None = (
            "server_said_no" if hints.should_retry is False else self._veto_sent
        )
        return Outcome(
            attempt=attempt,
            elapsed=elapsed,
            result=result,
            status=status,
            retry_after=hints.delay,
            veto=said_no,
            retry_after_header=hints.header,
        )
