"""Open-loop load for the pacing tests: requests offered at a fixed rate whatever the answers,
as independent clients would, each classified by how it ended.

Used in-process (tests/adversarial/test_pacing.py) and by the fleet's worker processes
(tests/adversarial/fleet_pacing_worker.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import httpx

from retrymw import PacedError

__all__ = ["new_tally", "offer_open_loop", "post_and_tally"]


def new_tally() -> dict[str, int]:
    """How calls ended: ``ok`` (200), ``throttled`` (any other status), ``paced`` (refused by the
    pacer), ``error`` (an httpx error, also counted under its class name)."""
    return {"ok": 0, "throttled": 0, "paced": 0, "error": 0}


async def post_and_tally(
    client: httpx.AsyncClient, url: str, tally: dict[str, int], headers: dict[str, str]
) -> None:
    """POST ``{}`` to ``url`` and count how it ended in ``tally``."""
    try:
        response = await client.post(url, headers=headers, content=b"{}")
    except PacedError:
        tally["paced"] += 1
    except httpx.HTTPError as error:
        tally["error"] += 1
        kind = type(error).__name__
        tally[kind] = tally.get(kind, 0) + 1
    else:
        tally["ok" if response.status_code == 200 else "throttled"] += 1


async def offer_open_loop(
    send: Callable[[], Coroutine[Any, Any, None]], *, started: float, rate: float, seconds: float
) -> None:
    """Start ``send()`` at ``rate`` per second from ``started`` (the monotonic clock) for
    ``seconds``, each as its own task, never waiting for an answer before the next; then wait
    (at most 30 s) for the sends still under way."""
    tasks: set[asyncio.Task[None]] = set()
    sent = 0
    while sent / rate < seconds:
        due = started + sent / rate
        now = time.monotonic()
        if due > now:
            await asyncio.sleep(due - now)
        task = asyncio.create_task(send())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        sent += 1
    if tasks:
        await asyncio.wait(tasks, timeout=30.0)
