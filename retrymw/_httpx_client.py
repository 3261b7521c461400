"""The client-level helpers `request` and `request_sync`, re-exported by `retrymw.httpx`.

A transport returns as soon as the headers arrive, so it cannot retry an error raised while the
caller reads the body. These helpers retry the whole exchange, body included, through a client
whose transport does not retry, and they mark their requests (`HELPER_EXTENSION`) so that a
retrying transport below refuses them instead of multiplying the attempts. They are apart from
the transports because they share none of their state, only the request plumbing.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Final

import httpx

from ._http import REPLAY_LIMIT, format_target, http_policy, limit_sync_attempt
from ._httpx_body import buffer_async, buffer_sync
from ._httpx_exchange import build_exchange, checked, translate
from ._policy import RetryPolicy
from ._retrier import Retrier

__all__ = ["HELPER_EXTENSION", "request", "request_sync"]

# Set by the client helpers on their requests, so that a retrying transport below refuses them.
HELPER_EXTENSION: Final = "retrymw.client_helper"

_helper_retrier: Retrier | None = None


def _helper_setup(
    client: httpx.AsyncClient | httpx.Client,
    method: str,
    url: httpx.URL | str,
    policy: RetryPolicy | None,
    retrier: Retrier | None,
    kwargs: dict[str, Any],
) -> tuple[httpx.Request, dict[str, Any], Retrier, RetryPolicy]:
    global _helper_retrier
    if retrier is None:
        if _helper_retrier is None:
            _helper_retrier = Retrier(http_policy())
        retrier = _helper_retrier
    send_kwargs: dict[str, Any] = {
        key: kwargs.pop(key) for key in ("auth", "follow_redirects") if key in kwargs
    }
    extensions = {**(kwargs.pop("extensions", None) or {}), HELPER_EXTENSION: True}
    built = client.build_request(method, url, extensions=extensions, **kwargs)
    resolved = http_policy(policy if policy is not None else retrier.policy)
    return built, send_kwargs, retrier, resolved


async def request(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL | str,
    *,
    policy: RetryPolicy | None = None,
    retrier: Retrier | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """Send a request with ``client`` and read its body, retrying the whole exchange.

    Unlike the transport, this also retries errors raised while the body is read (a connection
    dropped mid-body, a read timeout after the headers). The idempotency, replay and
    ``Retry-After`` rules are the transport's.

    Args:
        client: an ``httpx.AsyncClient`` whose transport does not retry already.
        method: the HTTP method.
        url: the URL.
        policy: the policy; the retrier's (or the HTTP default) when omitted.
        retrier: the `Retrier` (budget, breaker, instruments, clock); a process-wide default
            when omitted.
        **kwargs: as for ``client.request`` (``content``, ``json``, ``headers``, ``auth``, ...).

    Returns:
        The final response, its body read.

    Raises:
        ConfigError: the client's transport already retries.

    .. versionadded:: 0.1
    """
    built, send_kwargs, retrier, resolved = _helper_setup(
        client, method, url, policy, retrier, kwargs
    )
    replayable = await buffer_async(built, REPLAY_LIMIT)
    send: Callable[[], Awaitable[httpx.Response]] = functools.partial(
        client.send, built, **send_kwargs
    )
    try:
        response = await retrier.execute_async(
            send,
            operation=built.method,
            target=format_target(built.url.host, built.url.port),
            policy=resolved,
            adapter=build_exchange(retrier.clock, built, replayable),
            request=built,
        )
    except Exception as error:
        translated = translate(error, built, resolved)
        if translated is None:
            raise
        raise translated from translated.__cause__
    return checked(response, resolved)


def request_sync(
    client: httpx.Client,
    method: str,
    url: httpx.URL | str,
    *,
    policy: RetryPolicy | None = None,
    retrier: Retrier | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """Sync twin of `request`, for ``httpx.Client``.

    .. versionadded:: 0.1
    """
    built, send_kwargs, retrier, resolved = _helper_setup(
        client, method, url, policy, retrier, kwargs
    )
    replayable = buffer_sync(built, REPLAY_LIMIT)
    extensions = built.extensions
    send = functools.partial(client.send, built, **send_kwargs)
    try:
        response = retrier.execute_sync(
            limit_sync_attempt(send, built, resolved, retrier.clock),
            operation=built.method,
            target=format_target(built.url.host, built.url.port),
            policy=resolved,
            adapter=build_exchange(retrier.clock, built, replayable),
            request=built,
        )
    except Exception as error:
        translated = translate(error, built, resolved)
        if translated is None:
            raise
        raise translated from translated.__cause__
    finally:
        built.extensions = extensions
    return checked(response, resolved)
