"""Named policies from a YAML file, for a transport and for a coroutine.

Run: python examples/config_policies.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from _upstream import upstream_url

from retrymw import load_config
from retrymw.httpx import ATTEMPTS_EXTENSION, AsyncRetryTransport

config = load_config(Path(__file__).with_name("policies.yaml"))


async def main() -> None:
    url = upstream_url()
    # The defaults for every request; a request picks a named policy by extension.
    transport = AsyncRetryTransport(policy=config.defaults, policies=config.policies)
    async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
        for name in ("search", "reports"):
            response = await client.get(url, extensions={"retrymw": name})
            print(f"{name}: {response.status_code} after {response.extensions[ATTEMPTS_EXTENSION]}")
    # A named policy with its breaker and budget, around any coroutine: a plain client here,
    # so that the transport's retries do not multiply the Retrier's.
    payments = config.retrier("payments")
    async with httpx.AsyncClient(timeout=5.0) as plain:
        response = await payments.call(plain.get, url)
    print(f"payments: {response.status_code} with policy {payments.policy.name!r}")


if __name__ == "__main__":
    asyncio.run(main())
