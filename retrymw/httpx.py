"""httpx integration: `AsyncRetryTransport`, `RetryTransport`, and the `request` helpers.

::

    client = httpx.AsyncClient(transport=AsyncRetryTransport(policy=RetryPolicy(attempts=4)))

The transports only wrap: every attempt goes to the inner transport, and one `Retrier` decides.
The attempt count of the final response is in ``response.extensions["retrymw.attempts"]``
(`ATTEMPTS_EXTENSION`); a request selects another policy with
``extensions={"retrymw": "name" | RetryPolicy | {"attempts": 1}}`` (`POLICY_EXTENSION`).

A transport returns as soon as the headers arrive, so an error raised while the caller reads
the body cannot be retried there; `request` and `request_sync` retry the whole exchange instead.

This face binds the one HTTP core (`retrymw._http`) to httpx; `retrymw.httpx2` binds it to
httpx2, the fork the OpenAI and Anthropic SDKs use, with the same classes and arguments.
"""

from __future__ import annotations

from typing import final

try:
    import httpx
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("retrymw.httpx needs httpx: pip install 'retrymw[httpx]'") from None

from ._core.exports import publish
from ._http.client import request, request_sync
from ._http.exchange import ATTEMPTS_EXTENSION
from ._http.flavour import (
    CircuitOpenMixin,
    Flavour,
    LoadShedMixin,
    PacedMixin,
    RetryBudgetExhaustedMixin,
    register,
)
from ._http.overrides import POLICY_EXTENSION
from ._http.transport import ASYNC_DOC, SYNC_DOC, AsyncShell, SyncShell, face_doc

__all__ = [
    "ATTEMPTS_EXTENSION",
    "POLICY_EXTENSION",
    "AsyncRetryTransport",
    "AttemptTimeoutError",
    "RetryTransport",
    "TransportCircuitOpenError",
    "TransportLoadShedError",
    "TransportPacedError",
    "TransportRetryBudgetExhausted",
    "request",
    "request_sync",
]


class TransportCircuitOpenError(CircuitOpenMixin, httpx.TransportError):
    """The breaker rejected a request: a `CircuitOpenError` that is also an httpx error."""


class TransportLoadShedError(LoadShedMixin, httpx.TransportError):
    """The throttle shed a request: a `LoadShedError` that is also an httpx error."""


class TransportPacedError(PacedMixin, httpx.TransportError):
    """A request's pacer slot lay past its deadline: a `PacedError` that is also an httpx error.

    .. versionadded:: 0.4
    """


class TransportRetryBudgetExhausted(RetryBudgetExhaustedMixin, httpx.TransportError):
    """The policy's ``retry_budget`` ran out: a `RetryBudgetExhausted` that is an httpx error."""


class AttemptTimeoutError(httpx.TimeoutException, TimeoutError):
    """An async attempt outlived the policy's ``timeout`` (or ``deadline``) and was cancelled."""


_FLAVOUR = register(
    Flavour(
        httpx,
        TransportCircuitOpenError,
        TransportLoadShedError,
        TransportRetryBudgetExhausted,
        AttemptTimeoutError,
        TransportPacedError,
    )
)


@final
class AsyncRetryTransport(AsyncShell[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport):
    __doc__ = face_doc(ASYNC_DOC, _FLAVOUR)
    _flavour = _FLAVOUR


@final
class RetryTransport(SyncShell[httpx.BaseTransport], httpx.BaseTransport):
    __doc__ = face_doc(SYNC_DOC, _FLAVOUR)
    _flavour = _FLAVOUR


publish(globals(), __all__, __name__)
