"""The client-level helpers `request` and `request_sync`, re-exported by both faces.

They take an httpx or an httpx2 client alike: the client's flavour is read from it.

A transport returns as soon as the headers arrive, so it cannot retry an error raised while the
caller reads the body. These helpers retry the whole exchange, body included, through a client
whose transport does not retry, and they mark their requests (`HELPER_EXTENSION`) so that a
retrying transport below refuses them instead of multiplying the attempts. They are apart from
the transports because they share none of their state, only the request plumbing.
"""

from __future__ import annotations

import functools
from typing import Any

from .._core.errors import ConfigError
from .._core.instruments import Instrument
from .._core.policy import RetryPolicy
from .._engine.retrier import Retrier
from ..instrumentation import default_instruments
from .body import REPLAY_LIMIT, buffer_async, buffer_sync
from .exchange import HttpCall, drive_async, drive_sync
from .flavour import Flavour, flavour_of
from .limits import bound_transport
from .overrides import HELPER_EXTENSION, POLICY_EXTENSION, PolicyResolver
from .rules import http_policy
from .sdk import helper_count

__all__ = ["HELPER_EXTENSION", "request", "request_sync"]


class _DefaultRetrier:
    """The `Retrier` of the helpers called without ``retrier=``, one per process.

    It is built again when the default instruments change (`set_default_instruments`), so
    that they hear the helpers' calls as they hear every object built afterwards; its budget
    is a default one, which the pytest plugin refills between tests.
    """

    __slots__ = ("_instruments", "_retrier")

    def __init__(self) -> None:
        self._instruments: tuple[Instrument, ...] | None = None
        self._retrier: Retrier | None = None

    def get(self) -> Retrier:
        instruments = default_instruments()
        if self._retrier is None or instruments is not self._instruments:
            self._retrier = Retrier(http_policy(), instruments=instruments)
            self._instruments = instruments
        return self._retrier


_default_retrier = _DefaultRetrier()


def _helper_setup(
    client: Any,
    method: str,
    url: Any,
    policy: RetryPolicy | None,
    retrier: Retrier | None,
    kwargs: dict[str, Any],
) -> tuple[Any, dict[str, Any], Retrier, RetryPolicy, Flavour]:
    """Build the request; return it, ``client.send``'s arguments, retrier, policy, flavour."""
    flavour = flavour_of(client, "client")
    if retrier is None:
        retrier = _default_retrier.get()
    elif not isinstance(retrier, Retrier):
        raise ConfigError(
            "retrier", retrier, "must be a Retrier or None", "Retrier(RetryPolicy(attempts=3))"
        )
    resolved = http_policy(policy if policy is not None else retrier.policy)
    send_kwargs: dict[str, Any] = {
        key: kwargs.pop(key) for key in ("auth", "follow_redirects") if key in kwargs
    }
    extensions = {**(kwargs.pop("extensions", None) or {}), HELPER_EXTENSION: True}
    # A request's own policy override, as a transport honours it: fields or a RetryPolicy
    # (there are no named policies here, so a name is refused, naming the field).
    resolved = PolicyResolver(resolved).resolve(extensions.get(POLICY_EXTENSION))
    built = client.build_request(method, url, extensions=extensions, **kwargs)
    return built, send_kwargs, retrier, resolved, flavour


async def request(
    client: Any,
    method: str,
    url: Any,
    *,
    policy: RetryPolicy | None = None,
    retrier: Retrier | None = None,
    **kwargs: Any,
) -> Any:
    """Send a request with ``client`` and read its body, retrying the whole exchange.

    Unlike the transport, this also retries errors raised while the body is read (a connection
    dropped mid-body, a read timeout after the headers). The idempotency, replay and
    ``Retry-After`` rules are the transport's, and so is ``extensions={"retrymw": ...}``: a
    dict of policy fields or a `RetryPolicy` overrides ``policy`` for this request.

    Args:
        client: an ``httpx.AsyncClient`` (or ``httpx2.AsyncClient``) whose transport does not
            retry already.
        method: the HTTP method.
        url: the URL.
        policy: the policy; the retrier's (or the HTTP default) when omitted.
        retrier: the `Retrier` (budget, breaker, instruments, clock); a process-wide default
            when omitted.
        **kwargs: as for ``client.request`` (``content``, ``json``, ``headers``, ``auth``, ...).

    Returns:
        The final response, its body read.

    Raises:
        ConfigError: the client's transport already retries, or ``policy`` or ``retrier`` is of
            the wrong type.

    .. versionadded:: 0.1
    """
    built, send_kwargs, retrier, resolved, flavour = _helper_setup(
        client, method, url, policy, retrier, kwargs
    )
    replayable = await buffer_async(built, REPLAY_LIMIT, flavour.module)
    count = helper_count(built.headers)
    call = HttpCall(retrier, built, resolved, replayable, flavour, sdk_count=count)
    return await drive_async(call, functools.partial(client.send, **send_kwargs))


def request_sync(
    client: Any,
    method: str,
    url: Any,
    *,
    policy: RetryPolicy | None = None,
    retrier: Retrier | None = None,
    **kwargs: Any,
) -> Any:
    """Sync twin of `request`, for ``httpx.Client`` (or ``httpx2.Client``).

    With a ``timeout`` or ``deadline``, every socket operation of an attempt (the body's
    reading included) ends by the attempt's limit when the client's transport for the URL is
    an ``httpx.HTTPTransport`` (the default): its pool is given a bounded network backend for
    the connections it opens from then on.

    .. versionadded:: 0.1
    """
    built, send_kwargs, retrier, resolved, flavour = _helper_setup(
        client, method, url, policy, retrier, kwargs
    )
    if resolved.timeout is not None or resolved.deadline is not None:
        # The client's sockets must honour each attempt's time limit, body included.
        find = getattr(client, "_transport_for_url", None)
        bound_transport(find(built.url) if find is not None else None)
    replayable = buffer_sync(built, REPLAY_LIMIT, flavour.module)
    count = helper_count(built.headers)
    call = HttpCall(retrier, built, resolved, replayable, flavour, sdk_count=count)
    return drive_sync(call, functools.partial(client.send, **send_kwargs))
