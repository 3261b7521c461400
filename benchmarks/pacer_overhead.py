"""The overhead of an idle pacer on the success path: the same calls with and without
``pacer=Pacer()``, best of 7 repeats (``python -m benchmarks.pacer_overhead``, about 20 s).

Not a group of ``python -m benchmarks``: a quick check of the pacing issue's goal (an idle
pacer costs at most 10% of an HTTP call). A pacer makes every call take the engine's full path
(the bare first attempt is for calls nothing needs to time): the coroutine figures show that
path's fixed cost, the HTTP ones what it is worth against a call.
"""

from __future__ import annotations

import asyncio
import timeit
from collections.abc import Callable

import httpx

from retrymw import Pacer, Retrier
from retrymw.httpx import AsyncRetryTransport, RetryTransport


def _ok() -> int:
    return 1


async def _aok() -> int:
    return 1


def _best(fn: Callable[[], object], number: int) -> float:
    """Microseconds per call, best of 7."""
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def _line(label: str, without: float, with_pacer: float) -> None:
    change = with_pacer / without - 1
    print(
        f"{label}: {without:.2f} us without, {with_pacer:.2f} us with an idle pacer ({change:+.1%})"
    )


def main() -> None:
    plain, paced = Retrier(instruments=()), Retrier(instruments=(), pacer=Pacer())
    _line(
        "Retrier.call_sync",
        _best(lambda: plain.call_sync(_ok), 20_000),
        _best(lambda: paced.call_sync(_ok), 20_000),
    )
    loop = asyncio.new_event_loop()

    async def calls(retrier: Retrier, count: int) -> None:
        for _ in range(count):
            await retrier.call(_aok)

    _line(
        "Retrier.call",
        _best(lambda: loop.run_until_complete(calls(plain, 1000)), 10) / 1000,
        _best(lambda: loop.run_until_complete(calls(paced, 1000)), 10) / 1000,
    )
    mock = httpx.MockTransport(lambda request: httpx.Response(200))
    bare = httpx.Client(transport=RetryTransport(mock, instruments=()))
    pacing = httpx.Client(transport=RetryTransport(mock, instruments=(), pacer=Pacer()))
    _line(
        "httpx sync GET (MockTransport)",
        _best(lambda: bare.get("http://a.example/"), 2000),
        _best(lambda: pacing.get("http://a.example/"), 2000),
    )

    async def gets(client: httpx.AsyncClient, count: int) -> None:
        for _ in range(count):
            await client.get("http://a.example/")

    abare = httpx.AsyncClient(transport=AsyncRetryTransport(mock, instruments=()))
    apacing = httpx.AsyncClient(transport=AsyncRetryTransport(mock, instruments=(), pacer=Pacer()))
    _line(
        "httpx async GET (MockTransport)",
        _best(lambda: loop.run_until_complete(gets(abare, 200)), 5) / 200,
        _best(lambda: loop.run_until_complete(gets(apacing, 200)), 5) / 200,
    )
    loop.close()


if __name__ == "__main__":
    main()
