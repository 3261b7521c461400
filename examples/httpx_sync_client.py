"""Retry a synchronous httpx.Client: the same policies, through RetryTransport.

Run: python examples/httpx_sync_client.py
"""

from __future__ import annotations

import httpx
from _upstream import upstream_url

from retrymw import CircuitBreaker, RetryPolicy
from retrymw.httpx import ATTEMPTS_EXTENSION, RetryTransport


def main() -> None:
    url = upstream_url()
    transport = RetryTransport(
        policy=RetryPolicy(attempts=3, initial_delay="50ms", deadline="3s"),
        # One circuit per host, copied from this template (named "upstream:<host>"): a dead
        # host fails fast, and never makes the calls to another host fail.
        breaker=CircuitBreaker(name="upstream", failure_threshold=10, recovery_timeout="5s"),
    )
    with httpx.Client(transport=transport, timeout=5.0) as client:
        for _ in range(3):
            response = client.get(url)
            attempts = response.extensions[ATTEMPTS_EXTENSION]
            print(f"GET {url} -> {response.status_code} after {attempts} attempt(s)")


if __name__ == "__main__":
    main()
