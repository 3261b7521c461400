"""Change the policy of one request: a named policy, a RetryPolicy, or a dict of fields.

Run: python examples/per_request_overrides.py
"""

from __future__ import annotations

import asyncio

import httpx
from _upstream import upstream_url

from retrymw import RetryPolicy
from retrymw.httpx import ATTEMPTS_EXTENSION, POLICY_EXTENSION, AsyncRetryTransport

transport = AsyncRetryTransport(
    policy=RetryPolicy(attempts=3, initial_delay="50ms"),
    policies={"patient": RetryPolicy(name="patient", attempts=6, initial_delay="20ms")},
)
overrides = {
    "transport default": None,
    "named policy": "patient",
    "a RetryPolicy": RetryPolicy(name="quick", attempts=2, initial_delay="10ms"),
    "no retries": {"attempts": 1},
}


async def main() -> None:
    url = upstream_url()
    async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
        for label, override in overrides.items():
            extensions = {} if override is None else {POLICY_EXTENSION: override}
            response = await client.get(url, extensions=extensions)
            print(
                f"{label}: {response.status_code} after {response.extensions[ATTEMPTS_EXTENSION]}"
            )


if __name__ == "__main__":
    asyncio.run(main())
