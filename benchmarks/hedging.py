"""The hedging goals of issue 33 at their full size: ``python -m benchmarks.hedging``.

1 500 GETs (after 40 of warm-up) at ~120/s through the async httpx transport to a loopback
server answering 24 requests of every 25 in ~5 ms and one in ~800 ms: without hedging, with
``Hedge(after="p95")`` and with ``Hedge(after="50ms", max_extra=1)``. Prints p50, p99 and the
extra requests of each run (about 40 s in all). tests/adversarial/test_hedging.py runs the same
scenario with 480 GETs and asserts the goals.
"""

from __future__ import annotations

import argparse
import math

import anyio
import httpx

from retrymw import Hedge
from retrymw.httpx import AsyncRetryTransport
from tests.adversarial.test_hedging import TAIL, WARM_UP, paced
from tests.http_server import FlakyServer


def quantile(latencies: list[float], q: float) -> float:
    ordered = sorted(latencies)
    return ordered[math.ceil(q * len(ordered)) - 1]


async def run(server: FlakyServer, hedge: Hedge | None, count: int) -> tuple[float, float, int]:
    """p50 and p99 in seconds of ``count`` measured GETs, and the requests the server got."""
    url = server.script(*TAIL, cycle=True, record=False)
    transport = AsyncRetryTransport(hedge=hedge, instruments=())
    async with httpx.AsyncClient(transport=transport) as client:
        await paced(client, url, WARM_UP)
        before = server.served(url)
        latencies = await paced(client, url, count)
        sent = server.served(url) - before
    return quantile(latencies, 0.5), quantile(latencies, 0.99), sent


async def main(count: int) -> None:
    server = FlakyServer()
    try:
        print(f"{count} GETs at ~120/s, 4% answered in ~800 ms")
        print(f"{'run':<28} {'p50 ms':>8} {'p99 ms':>8} {'requests':>9} {'extra':>7}")
        runs = {
            "without hedging": None,
            'Hedge(after="p95")': Hedge("p95"),
            'Hedge(after="50ms")': Hedge("50ms", max_extra=1),
        }
        for name, hedge in runs.items():
            p50, p99, sent = await run(server, hedge, count)
            print(
                f"{name:<28} {p50 * 1000:>8.1f} {p99 * 1000:>8.1f} {sent:>9} "
                f"{sent / count - 1:>7.1%}"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1500, help="measured GETs per run")
    anyio.run(main, parser.parse_args().count)
