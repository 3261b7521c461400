"""One client process of the multi-process fleet test: ``python worker.py URL|- START ...``.

It calls a dependency at ``rate`` calls/s with up to three attempts, retries funded by a
`RetryBudget` (fleet-wide when a URL is given), and prints its counts during the outage as JSON.
The dependency fails every attempt between ``start + warmup`` and ``start + warmup + outage``
(wall-clock, the same for every process) and never otherwise.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from retrymw import RetryBudget
from retrymw.fleet import RedisFleet


def main() -> None:
    url, start, warmup, outage, rate = sys.argv[1], *map(float, sys.argv[2:6])
    budget = RetryBudget()
    fleet = None
    if url != "-":
        fleet = RedisFleet(url, namespace="amplification", sync_interval="250ms")
        fleet.attach(budget, target="dependency")
    outage_start, outage_end = start + warmup, start + warmup + outage
    calls = attempts = 0
    next_call = start
    while next_call < outage_end + 0.5:  # bounded by the schedule
        time.sleep(max(0.0, next_call - time.time()))
        now = time.time()
        in_outage = outage_start <= now < outage_end
        for attempt in range(3):
            if attempt and not budget.try_acquire():
                break
            attempts += in_outage
            if not in_outage:
                budget.record_success()
                break
        calls += in_outage
        next_call += 1.0 / rate
    if fleet is not None:
        fleet.close()
    print(json.dumps({"calls": calls, "attempts": attempts}))


if __name__ == "__main__":
    main()
