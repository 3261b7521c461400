"""Failover to other origins: `Origin`, and `FailoverRun`, one request's way along them.

A transport given ``failover=[origin, ...]`` sends each request to its own URL first (the
primary origin); an idempotent request whose primary circuit is open, or whose retries there
ended on a retryable answer (a 503 after the last attempt, a refused connection, a retry the
budget or breaker withheld), goes to the next origin: the same method, path, query and body,
only the scheme, host and port replaced, then the origin's ``rewrite`` applied. Each origin is
a call of its own through the transport's `Retrier`, whose target is the origin's host, so
each origin has its own circuit, budget and throttle, and a request goes back to the primary
as soon as the primary's circuit lets a call through (half-open probes are real calls).
A non-retryable answer (400, 401, 403, 404...) is the answer; a request that is not
idempotent never leaves its primary. The call's deadline bounds every origin together.

`FailoverRun` holds every decision, down to how much of an answer is read before it is
returned (`FailoverRun.read_ahead`: a body that breaks by then goes on to the next origin); the
drivers that loop over it (`drive_origins_async`, `drive_origins_sync`, below) only send,
read and close. It also tells the instruments of the request as a whole (`FailoverStarted`,
`FailoverFinished`), so that its calls on each origin are one trace under one
``retrymw.origin`` span.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

import anyio

from .._core.errors import CircuitOpenError, ConfigError, LoadShedError, RetryBudgetExhausted
from .._core.events import FailoverFinished, FailoverStarted, Outcome
from .._core.instruments import NO_SCOPES, Scopes
from .body import content_length
from .exchange import HttpCall, drive_async, drive_sync
from .hosts import format_target
from .responses import WatchedBody
from .rules import IDEMPOTENCY_KEY_HEADER, is_idempotent

if TYPE_CHECKING:
    from .._core.instruments import Dispatch

__all__ = [
    "ORIGIN_EXTENSION",
    "PREFETCH_LIMIT",
    "FailoverRun",
    "Origin",
    "drive_origins_async",
    "drive_origins_sync",
    "origin_of",
    "origins",
]

#: ``response.extensions`` key naming the origin that answered (``scheme://host[:port]``).
ORIGIN_EXTENSION: Final = "retrymw.origin"

_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_EXAMPLE = 'Origin("https://fallback.example.com")'

#: A successful answer whose ``Content-Length`` is at most this is read before it is returned
#: while an origin is left, so that a body cut or stalled midway goes on to that origin (a
#: longer or streamed one: its first chunk only).
PREFETCH_LIMIT: Final = 1024 * 1024

#: How much of an answer is read before it is returned (`FailoverRun.read_ahead`).
ReadAhead = Literal["whole", "first"]

#: A rewrite: given the request aimed at an origin, the request to send there.
Rewrite = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Origin:
    """Another origin a transport fails over to (``failover=[...]``).

    Args:
        url: the origin, ``scheme://host[:port]`` (``http`` or ``https``; no path, query or
            credentials: the request keeps its own path and query).
        rewrite: called with the request aimed at this origin (a request of the transport's
            library, its body already read); returns the request to send there. It may change
            the body or the headers, say an LLM request's model name or its API key. ``None``:
            the request is sent as it is.

    Raises:
        ConfigError: ``url`` is not an origin, or ``rewrite`` is not callable.

    .. versionadded:: 0.5
    """

    url: str
    rewrite: Rewrite | None = None

    def __post_init__(self) -> None:
        scheme, host, port = _parse_origin(self.url)
        if self.rewrite is not None and not callable(self.rewrite):
            raise ConfigError(
                "failover.rewrite", self.rewrite, "must be a callable or None", "use_model"
            )
        object.__setattr__(self, "url", _label(scheme, host, port))

    def aim(self, request: Any, module: Any) -> Any:
        """A copy of ``request`` (a request of ``module``, its body read) sent to this origin
        instead, rewritten if the origin has a ``rewrite``."""
        scheme, host, port = _parse_origin(self.url)
        url = request.url.copy_with(scheme=scheme, host=host, port=port)
        # The Host header names the primary; the library sets the origin's from the URL.
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() != "host"]
        aimed = module.Request(
            request.method,
            url,
            headers=headers,
            content=request.content,
            extensions=dict(request.extensions),
        )
        if self.rewrite is None:
            return aimed
        rewritten = self.rewrite(aimed)
        if not isinstance(rewritten, module.Request):
            raise TypeError(
                f"failover origin {self.url}: rewrite must return a {module.__name__}.Request, "
                f"got {type(rewritten).__qualname__}"
            )
        return rewritten

    def __repr__(self) -> str:
        rewrite = "" if self.rewrite is None else f", rewrite={self.rewrite!r}"
        return f"Origin({self.url!r}{rewrite})"


def _parse_origin(url: object) -> tuple[str, str, int | None]:
    """``url``'s scheme, host and port (``None``: the scheme's default); refuse the rest."""
    if not isinstance(url, str):
        raise ConfigError("failover", url, "must be an origin URL or an Origin", _EXAMPLE)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError("failover", url, "is not a valid URL", _EXAMPLE) from None
    if parts.username is not None or parts.password is not None:
        # The value itself is not shown: it carries credentials.
        raise ConfigError(
            "failover", "<an URL with credentials>", "must not carry credentials", _EXAMPLE
        )
    if parts.scheme not in _SCHEMES or not parts.hostname:
        raise ConfigError("failover", url, "must be an http or https origin", _EXAMPLE)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(
            "failover",
            f"{parts.scheme}://{parts.netloc}/...",
            "must be an origin without path or query (the request keeps its own)",
            _EXAMPLE,
        )
    if port == _DEFAULT_PORTS[parts.scheme]:
        port = None
    return parts.scheme, parts.hostname, port


def _label(scheme: str, host: str, port: int | None) -> str:
    """``scheme://host[:port]``, the port only when not the scheme's default."""
    return f"{scheme}://{format_target(host, port)}"


def origins(value: object) -> tuple[Origin, ...]:
    """The ``failover`` argument as origins: ``None`` or a list of URLs and `Origin`s."""
    if value is None:
        return ()
    if isinstance(value, (str, Origin)) or not isinstance(value, Iterable):
        raise ConfigError("failover", value, "must be a list of origins or None", f"[{_EXAMPLE}]")
    return tuple(item if isinstance(item, Origin) else Origin(item) for item in value)


def origin_of(request: Any) -> str:
    """The origin ``request`` is sent to, ``scheme://host[:port]``: no credentials, no query."""
    url = request.url
    port = url.port
    if port == _DEFAULT_PORTS.get(url.scheme):
        port = None
    return _label(url.scheme, url.host, port)


class FailoverRun:
    """One request on its way along the origins: which origin is next, and whether to go on.

    Args:
        calls: builds the `HttpCall` of a request aimed at an origin, under a deadline
            (``None``: none) that is what the request's deadline leaves.
        request: the request, to its primary origin (its body read).
        origins: the origins after the primary, in order.
        module: the request's library (httpx or httpx2).
        deadline: the request's deadline in seconds, or ``None``.
        now: reads the transport's clock.
    """

    __slots__ = (
        "_announced",
        "_calls",
        "_dispatch",
        "_module",
        "_next",
        "_now",
        "_origins",
        "_request",
        "_scopes",
        "_started",
        "_tried",
        "_until",
    )

    def __init__(
        self,
        calls: Callable[[Any, float | None], HttpCall],
        request: Any,
        origins: tuple[Origin, ...],
        module: Any,
        deadline: float | None,
        now: Callable[[], float],
    ) -> None:
        self._calls = calls
        self._request = request
        self._module = module
        self._now = now
        self._started = now()
        self._until = None if deadline is None else self._started + deadline
        # A request that may not be resent elsewhere (a POST without Idempotency-Key) has none.
        movable = is_idempotent(request.method) or IDEMPOTENCY_KEY_HEADER in request.headers
        self._origins = origins if movable else ()
        self._next = 0
        # The origins sent to so far, and what the instruments were told of the request.
        self._tried: list[str] = []
        self._dispatch: Dispatch | None = None
        self._announced: FailoverStarted | None = None
        self._scopes: Scopes = NO_SCOPES

    def first(self) -> HttpCall:
        """The call to the primary origin; a request that may go on to another origin is
        announced to the instruments first (`FailoverStarted`), and `ended` must follow."""
        call = self._call(self._request, None)
        if self._origins:
            dispatch = call.retrier.dispatch_now()
            if dispatch.failover_started:
                self._dispatch = dispatch
                started = FailoverStarted(call.policy.name, call.target, self._request.method)
                self._announced = started
                self._scopes = dispatch.enter(dispatch.failover_started, started)
        return call

    def ended(self, error: BaseException | None) -> None:
        """The request ends, with the answer of the origin tried last or with ``error``: tell
        the instruments which origins were tried and which answered (`FailoverFinished`)."""
        dispatch, started = self._dispatch, self._announced
        if dispatch is None or started is None:
            return
        self._dispatch = self._announced = None
        finished = FailoverFinished(
            started.policy,
            started.target,
            started.operation,
            tuple(self._tried),
            answered=self._tried[-1] if error is None else None,
            exception=error if isinstance(error, Exception) else None,
        )
        dispatch.emit(dispatch.failover_finished, finished)
        # The error was told in the event: the scopes end as they would on success.
        self._scopes.exit(None)

    def after_response(self, call: HttpCall, response: Any) -> HttpCall | None:
        """The next origin's call if ``response``, the answer ``call`` ended with, sends the
        request on (`goes_on`); ``None``: ``response`` is the answer, named by its origin."""
        if self.goes_on(call, response, None):
            return self._following()
        response.extensions[ORIGIN_EXTENSION] = origin_of(call.request)
        return None

    def after_error(self, call: HttpCall, error: Exception) -> HttpCall | None:
        """The next origin's call if ``error``, what ``call`` raised, sends the request on
        (`goes_on`); ``None``: ``error`` is raised."""
        return self._following() if self.goes_on(call, None, error) else None

    def read_ahead(self, response: Any) -> ReadAhead | None:
        """How much of ``response``, the answer, is read before it is returned, while an
        origin is left for a body that breaks: all of a success whose length is known and at
        most `PREFETCH_LIMIT` (``"whole"``), the first chunk of a streamed one (``"first"``:
        a stream cut or stalled before its first byte); ``None``: nothing, it is returned
        as it is (no origin left, an error status, a body already read)."""
        if self._next >= len(self._origins) or response.status_code >= 400:
            return None
        length = content_length(response.headers.get("content-length"))
        if length is not None and length <= PREFETCH_LIMIT:
            return "whole"
        return "first" if isinstance(response.stream, WatchedBody) else None

    def after_body_error(self) -> HttpCall | None:
        """The next origin's call when reading the answer's body ahead (`read_ahead`) failed: cut,
        stalled past the transport's ``stall_timeout``, out of time; ``None``: the error is
        raised."""
        return self._following()

    def goes_on(self, call: HttpCall, response: Any, error: Exception | None) -> bool:
        """Whether ``call``'s ending sends the request to the next origin: one is left, time
        is left, and the ending says the origin failed: a retryable answer, or an error that
        is retryable or a refusal (its circuit open, its throttle shedding, its retries
        refused).

        Asked by the engine as the call ends (its outcome is then ``failover``) and by the
        drivers right after, with the same answer.
        """
        if self._next >= len(self._origins) or self._left() == 0.0:
            return False
        if error is None:
            outcome = Outcome(attempt=1, result=response, status=response.status_code)
        elif isinstance(error, (CircuitOpenError, LoadShedError, RetryBudgetExhausted)):
            return True
        else:
            outcome = Outcome(attempt=1, exception=error)
        return call.policy.matches(outcome)

    def _left(self) -> float | None:
        """What the request's deadline leaves (at least 0), or ``None`` without one."""
        if self._until is None:
            return None
        return max(0.0, self._until - self._now())

    def _following(self) -> HttpCall | None:
        """The call to the next origin, within what the deadline leaves; ``None`` if none."""
        left = self._left()
        if self._next >= len(self._origins) or left == 0.0:
            return None
        origin = self._origins[self._next]
        self._next += 1
        return self._call(origin.aim(self._request, self._module), left)

    def _call(self, aimed: Any, left: float | None) -> HttpCall:
        """The call of ``aimed`` under what the deadline leaves, asking `goes_on` as it ends."""
        call = self._calls(aimed, left)
        call.failover = functools.partial(self.goes_on, call)
        self._tried.append(origin_of(aimed))
        return call


# -- the drivers: a request along its origins ------------------------------------------------


async def _read_ahead_async(response: Any, ahead: ReadAhead | None) -> Exception | None:
    """Read ``ahead`` of ``response``'s body (`FailoverRun.read_ahead`); return the error that
    broke it, or ``None``. Cancelled, the response is closed: nobody will read it."""
    try:
        if ahead == "whole":
            await response.aread()
        elif ahead == "first":
            await response.stream.read_first_async()
    except Exception as error:
        return error
    except BaseException:
        with anyio.CancelScope(shield=True):
            await response.aclose()
        raise
    return None


def _read_ahead_sync(response: Any, ahead: ReadAhead | None) -> Exception | None:
    """Sync twin of `_read_ahead_async`."""
    try:
        if ahead == "whole":
            response.read()
        elif ahead == "first":
            response.stream.read_first_sync()
    except Exception as error:
        return error
    except BaseException:
        response.close()
        raise
    return None


async def drive_origins_async(run: FailoverRun, send: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run a request along its origins (`FailoverRun`): each origin's call through
    `drive_async`, until one answers or the run says the answer or the error is final.

    A retryable answer that the request leaves for the next origin is closed first (a small
    body read, as between retries, so that its connection is reused). While an origin is
    left, a successful answer is read ahead before it is returned (`FailoverRun.read_ahead`:
    all of a bounded one, the first chunk of a stream): a body that breaks by then goes on
    to that origin, before the caller has read any of it. The run is told how the request
    ended (`FailoverRun.ended`), for its telemetry.
    """
    call = run.first()
    try:
        response = await _along_origins_async(run, call, send)
    except BaseException as error:
        run.ended(error)
        raise
    run.ended(None)
    return response


async def _along_origins_async(
    run: FailoverRun, call: HttpCall, send: Callable[[Any], Awaitable[Any]]
) -> Any:
    """The loop of `drive_origins_async`, from ``call``, the primary's."""
    while True:
        try:
            response = await drive_async(call, send)
        except Exception as error:
            following = run.after_error(call, error)
            if following is None:
                raise
        else:
            following = run.after_response(call, response)
            if following is not None:
                # Read a small body first, so that its connection goes back to the pool.
                await call.discard(response, 0.0, None)
            elif (broke := await _read_ahead_async(response, run.read_ahead(response))) is None:
                return response
            else:
                following = run.after_body_error()
                if following is None:
                    raise broke
                await response.aclose()
        call = following


def drive_origins_sync(run: FailoverRun, send: Callable[[Any], Any]) -> Any:
    """Sync twin of `drive_origins_async`."""
    call = run.first()
    try:
        response = _along_origins_sync(run, call, send)
    except BaseException as error:
        run.ended(error)
        raise
    run.ended(None)
    return response


def _along_origins_sync(run: FailoverRun, call: HttpCall, send: Callable[[Any], Any]) -> Any:
    """Sync twin of `_along_origins_async`."""
    while True:
        try:
            response = drive_sync(call, send)
        except Exception as error:
            following = run.after_error(call, error)
            if following is None:
                raise
        else:
            following = run.after_response(call, response)
            if following is not None:
                call.discard_sync(response, 0.0, None)
            elif (broke := _read_ahead_sync(response, run.read_ahead(response))) is None:
                return response
            else:
                following = run.after_body_error()
                if following is None:
                    raise broke
                response.close()
        call = following
