"""An SDK's retry-count header, and when it counts: only when the SDK above set it, here.

The OpenAI and Anthropic SDKs (Stainless-generated clients) build a new request for each of
their attempts, numbered in ``x-stainless-retry-count`` (`RETRY_COUNT_HEADER`): 0, then 1,
2... A transport that sees 1 or more may take it for the SDK retrying on top of it and send
that request once, so that the attempts do not multiply. But a header proves nothing about
who set it: a service that forwards its caller's headers hands its transport the *caller's*
count, and sending that request once would strip the service of its retries.

So a count counts only when it is the SDK in this process retrying (docs/sdks.md). The
SDK retries in the same task or thread, through the same client, the request it just sent,
and only after that request failed. The transport remembers, per task or thread
(a ``ContextVar``), the last counted request that failed: a count ``n >= 1`` is the SDK
retrying only when it follows that request at once, through the same transport, with the
same method and URL, the count one more, and while serving the same inbound request
(`retrymw.server`'s companion opens one context per request served; a pooled worker thread
thus starts every request afresh). Any other count came from elsewhere (forwarded from an
inbound request, set by hand): the transport ignores it, retries as usual, and numbers its
own attempts from 0.

Nothing here depends on the companion being installed; with it, a count left over from an
earlier request served by the same thread can never match.

An SDK's retries never run past the first call's deadline: the SDK call's time starts when its
first request (count 0, or a count from elsewhere) arrives, under that request's policy
``deadline``; each SDK retry keeps that expiry (`SdkAttempt.expires`). The transport runs a
retry with what is left of it and refuses one that arrives out of time (docs/sdks.md).
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .._engine.layers import Inbound, current

__all__ = [
    "RETRY_COUNT_HEADER",
    "SdkAttempt",
    "SdkAttempts",
    "helper_count",
    "parse_count",
    "sdk_retry_count",
]

logger = logging.getLogger("retrymw")


def parse_count(value: str | None) -> int | None:
    """A retry-count header's value as a number (1 to 5 ASCII digits), or ``None``.

    Anything else is not a count: the transport then leaves the header as it is.
    """
    if value is None or not (0 < len(value) < 6 and value.isascii() and value.isdigit()):
        return None
    return int(value)


def helper_count(headers: Any) -> int | None:
    """Where a client helper numbers a request's attempts from: 0 when it carries a count.

    No SDK is above a helper (`retrymw.httpx.request`): a count its request carries came
    from elsewhere, so the attempts are numbered 0, 1, 2...; ``None`` leaves the header alone.
    """
    return None if parse_count(sdk_retry_count(headers)) is None else 0


@dataclass(frozen=True, slots=True)
class SdkAttempt:
    """One request carrying a retry count, as a transport received it.

    Attributes:
        count: the count it arrived with.
        sdk_retry: the SDK above the transport is retrying this request (run it once).
        start: the number the transport's attempts count from (sent as the header).
        expires: when the SDK call it belongs to is out of time (clock seconds): the deadline
            of the call's first request, as the transport received it; ``None`` for no deadline.
    """

    count: int
    sdk_retry: bool
    start: int
    expires: float | None = None

    def time_left(self, now: float) -> float | None:
        """Seconds left to the SDK call's deadline at ``now`` (0 or less: out of time), or
        ``None`` when the call has none."""
        return None if self.expires is None else self.expires - now


@dataclass(frozen=True, slots=True)
class _Failed:
    """The last counted request that failed in a context: the one the SDK may retry next."""

    owner: SdkAttempts
    inbound: Inbound | None
    method: str
    url: Any
    count: int
    expires: float | None


# Per task or thread, like the request served (`retrymw.server`): module-level, as ContextVar
# objects must be (a context holds its variables for ever).
_LAST_FAILED: ContextVar[_Failed | None] = ContextVar("retrymw_sdk_last_failed", default=None)


class SdkAttempts:
    """One transport's view of the SDK above it: which retry counts are the SDK's own.

    `arrived` classifies a request's count; `ended` records how the request ended, so that
    the SDK's next attempt of it is recognised (see the module documentation). The first
    SDK retry recognised is logged as a warning: the SDK should not retry at all.
    """

    __slots__ = ("_warned",)

    def __init__(self) -> None:
        self._warned = False

    def arrived(
        self, request: Any, value: str | None, now: float, deadline: float | None
    ) -> SdkAttempt | None:
        """Classify the count ``value`` (the header as it arrived); ``None`` if not a count.

        ``now`` and the request's policy ``deadline`` start the time of an SDK call at its
        first request; the SDK's retries of it keep that call's expiry.
        """
        count = parse_count(value)
        if count is None:
            return None
        last = _LAST_FAILED.get()
        if last is not None:
            _LAST_FAILED.set(None)  # one predecessor, one successor
        sdk_retry = (
            count >= 1
            and last is not None
            and last.owner is self
            and last.count == count - 1
            and last.inbound is current()
            and last.method == request.method
            and last.url == request.url
        )
        if not sdk_retry or last is None:  # not the SDK's: numbered from 0, ours alone
            expires = None if deadline is None else now + deadline
            return SdkAttempt(count=count, sdk_retry=False, start=0, expires=expires)
        if not self._warned:
            self._warned = True
            logger.warning(
                "the SDK above this transport retries too (%s: %d arrived); its "
                "retries are sent once, not retried again, but each SDK retry repeats a whole "
                "retrymw call: create the SDK client with max_retries=0",
                RETRY_COUNT_HEADER,
                count,
            )
        # The SDK's earlier attempts happened: its count goes on from there, within the time
        # of the call they belong to.
        return SdkAttempt(count=count, sdk_retry=True, start=count, expires=last.expires)

    def ended(self, request: Any, attempt: SdkAttempt, response: Any) -> None:
        """Record how a counted request ended: ``response``, or ``None`` if it raised.

        Only a failed one (an error, a status >= 400) may be retried by the SDK.
        """
        if response is not None and response.status_code < 400:
            return
        _LAST_FAILED.set(
            _Failed(
                owner=self,
                inbound=current(),
                method=request.method,
                url=request.url,
                count=attempt.count,
                expires=attempt.expires,
            )
        )


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
