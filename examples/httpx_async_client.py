"""Retry an httpx.AsyncClient's requests: a transport that wraps the default one.

Run: python examples/httpx_async_client.py
"""

from __future__ import annotations

import asyncio

import httpx
from _upstream import upstream_url

from retrymw import RetryPolicy
from retrymw.httpx import ATTEMPTS_EXTENSION, AsyncRetryTransport


async def main() -> None:
    url = upstream_url()
    # Retries connect errors, timeouts and 429/502/503/504 for idempotent methods, honouring
    # Retry-After; the cross-call retry budget is on by default.
    policy = RetryPolicy(attempts=4, initial_delay="50ms", max_delay="1s", jitter="full")
    transport = AsyncRetryTransport(policy=policy)
    async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
        for _ in range(3):
            response = await client.get(url)
            attempts = response.extensions[ATTEMPTS_EXTENSION]
            print(f"GET {url} -> {response.status_code} after {attempts} attempt(s)")


if __name__ == "__main__":
    asyncio.run(main())
