"""Which HTTP requests retrymw retries and resends: methods, statuses, profiles, policies.

Pure and synchronous, without httpx: idempotent methods and the ``Idempotency-Key`` header, the
statuses the default policy retries, the server's own say (``x-should-retry``), the profiles
(``http`` and the LLM SDKs' ``sdk``) and which answers show a request was not processed, and
`http_policy`, which makes any policy ready for HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._core.errors import ConfigError
from .._core.events import Outcome
from .._core.matchers import Matcher, compile_matcher, on_status
from .._core.policy import RetryPolicy
from .hints import says_when, should_retry

__all__ = [
    "honours_server",
    "HTTP_PROFILE",
    "HTTP_RETRY_ON",
    "HttpProfile",
    "IDEMPOTENCY_KEY_HEADER",
    "IDEMPOTENT_METHODS",
    "PROFILES",
    "RETRYABLE_STATUSES",
    "SDK_PROFILE",
    "SDK_RETRY_ON",
    "SERVER_SAYS_RETRY",
    "http_policy",
    "http_profile",
    "is_idempotent",
]

#: Methods RFC 9110 §9.2.2 defines as idempotent; POST and PATCH are not among them.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})


#: A request carrying this header may be retried whatever its method.
IDEMPOTENCY_KEY_HEADER = "idempotency-key"


#: Statuses the default HTTP policy retries.
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


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


#: What the OpenAI and Anthropic SDKs retry (their ``_should_retry``): 408, 409, 429 and every
#: status from 500, connection errors and timeouts; plus ``x-should-retry: true``.
def _sdk_retry_on() -> Matcher:
    matcher = compile_matcher([on_status(408, 409, 429, *range(500, 600)), "timeout", "network"])
    if matcher is None:  # pragma: no cover - a non-empty list always compiles to a matcher
        raise AssertionError("SDK_RETRY_ON")
    return matcher | SERVER_SAYS_RETRY


SDK_RETRY_ON = _sdk_retry_on()


@dataclass(frozen=True, slots=True)
class HttpProfile:
    """The HTTP rules a transport applies: what it retries when its policy does not say, and
    which answers let it resend a request whatever its method.

    A request that may have been processed is resent only when it is idempotent (its method,
    or an ``Idempotency-Key``); an answer saying it was *not* processed lets any method be
    resent (RFC 9110 §9.2.2, §10.2.3, §15.6.4; RFC 6585 §4). See docs/http.md.

    Attributes:
        name: ``"http"`` or ``"sdk"``, as the transports' ``profile=`` takes it.
        retry_on: the ``retry_on`` of a policy that has none.
        unprocessed: statuses after which any method may be resent.
        unprocessed_with_retry_after: statuses after which any method may be resent when they
            carry a readable ``Retry-After`` (or the providers' ``retry-after-ms``).
    """

    name: str
    retry_on: Matcher
    unprocessed: frozenset[int]
    unprocessed_with_retry_after: frozenset[int]

    def policy(self, policy: RetryPolicy | None = None) -> RetryPolicy:
        """`http_policy`, with this profile's ``retry_on`` for a policy that has none."""
        ready = http_policy(policy)
        if self.retry_on is HTTP_RETRY_ON or (policy is not None and policy.retry_on is not None):
            return ready
        return ready.replace(retry_on=self.retry_on)

    def says_unprocessed(self, status: int, headers: Any, now_wall: float) -> bool:
        """Whether a response of ``status`` with ``headers`` says the request was not processed:
        for a status that needs ``Retry-After``, one whose value can be read (`says_when`)."""
        if status in self.unprocessed:
            return True
        return status in self.unprocessed_with_retry_after and says_when(headers, now_wall)


#: The transports' default: a 429 (Too Many Requests: refused before processing, RFC 6585 §4),
#: a 503 with ``Retry-After`` (the server asks for the request again later, RFC 9110 §15.6.4)
#: and connect errors are resent whatever the method.
HTTP_PROFILE = HttpProfile("http", HTTP_RETRY_ON, frozenset({429}), frozenset({503}))


#: For the OpenAI and Anthropic SDKs with ``max_retries=0`` (docs/sdks.md): what the SDKs retry
#: (`SDK_RETRY_ON`), resent whatever the method, as the SDKs do and as both providers' retry
#: guidance says. A read timeout or a reset after sending is still not resent.
SDK_PROFILE = HttpProfile(
    "sdk", SDK_RETRY_ON, frozenset({408, 409, 429, *range(500, 600)}), frozenset()
)


PROFILES = {profile.name: profile for profile in (HTTP_PROFILE, SDK_PROFILE)}


def http_profile(value: object) -> HttpProfile:
    """The profile named ``value`` (``"http"``, ``"sdk"``).

    Raises:
        ConfigError: another value.
    """
    profile = PROFILES.get(value) if isinstance(value, str) else None
    if profile is None:
        raise ConfigError("profile", value, 'must be "http" or "sdk"', 'profile="sdk"')
    return profile


def honours_server(matcher: Matcher) -> bool:
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
    # An explicit policy keeps the transport's full jitter unless it set its own: otherwise
    # every client retries in lockstep, exactly 1 s and 2 s after a shared failure.
    policy = policy.with_default_jitter("full")
    if policy.retry_on is None:
        return policy.replace(retry_on=HTTP_RETRY_ON)
    if not honours_server(policy.retry_on):
        return policy.replace(retry_on=policy.retry_on | SERVER_SAYS_RETRY)
    return policy
