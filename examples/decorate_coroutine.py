"""Retry any coroutine with the retry decorator: here one that raises on 5xx responses.

Run: python examples/decorate_coroutine.py
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from _upstream import upstream_url

import retrymw


# "5xx" matches exceptions carrying a 5xx status, such as httpx.HTTPStatusError.
@retrymw.retry(name="fetch", attempts=4, initial_delay="50ms", retry_on=["5xx", "network"])
async def fetch_json(client: httpx.AsyncClient, url: str) -> Any:
    response = await client.get(url)
    response.raise_for_status()
    return response.json()


async def main() -> None:
    url = upstream_url()
    async with httpx.AsyncClient(timeout=5.0) as client:
        for _ in range(3):
            print(f"fetch_json -> {await fetch_json(client, url)}")


if __name__ == "__main__":
    asyncio.run(main())
