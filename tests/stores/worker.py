"""A job worker run as a real process by the resume tests.

``python -m tests.stores.worker STORE KEY [options]``: runs one call under
``retrymw.resume(KEY)`` with a store (``sqlite:/path`` or a ``redis://`` URL) and a job that
always fails. It prints one line per event, flushed, so that a test can follow it and kill it
mid-backoff: ``attempt N`` when attempt N starts, ``backoff N D`` when a D-second backoff follows
attempt N (its record is saved by then), and at the end ``gave-up ERROR ATTEMPTS``.
``--wall-offset`` moves this process's wall clock forward, as if the restart had taken that
long, so that the tests never wait for real.
"""

from __future__ import annotations

import argparse
import time

from retrymw import (
    AttemptStarted,
    CustomBackoff,
    Retrier,
    RetryPolicy,
    RetryScheduled,
    resume,
)
from retrymw._core.clock import SystemClock
from retrymw.instrumentation import Instrument
from retrymw.stores import RedisStore, SQLiteStore, Store


class ShiftedClock(SystemClock):
    """The system clock with its wall time moved ``offset`` seconds forward."""

    __slots__ = ("offset",)

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def wall(self) -> float:
        return time.time() + self.offset


class Printer(Instrument):
    """Prints the attempts and backoffs the engine numbers, one flushed line each."""

    def attempt_started(self, event: AttemptStarted, /) -> None:
        print(f"attempt {event.attempt}", flush=True)

    def retry_scheduled(self, event: RetryScheduled, /) -> None:
        print(f"backoff {event.attempt} {event.delay:g}", flush=True)


def open_store(spec: str) -> Store:
    """``sqlite:/path`` or a Redis URL."""
    if spec.startswith("sqlite:"):
        return SQLiteStore(spec.removeprefix("sqlite:"))
    # A generous timeout: these tests are about claims on a healthy store, and the suite runs
    # under coverage on a loaded machine, where the 250 ms default can expire; a store that
    # fails is taken for gone and the call goes on in memory (see `finish` in the tests).
    return RedisStore(spec, namespace="tests", timeout="5s")


def job(hold: float) -> None:
    """The job: takes ``hold`` seconds, then fails, every time."""
    time.sleep(hold)
    raise ConnectionError("upstream down")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("key")
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--budget", type=float, default=None)
    parser.add_argument("--delays", default="0.01,60", help="backoff delays, comma-separated")
    parser.add_argument("--wall-offset", type=float, default=0.0)
    parser.add_argument("--hold", type=float, default=0.0, help="seconds each attempt takes")
    args = parser.parse_args()
    policy = RetryPolicy(
        attempts=args.attempts,
        backoff=CustomBackoff([float(delay) for delay in args.delays.split(",")]),
        max_delay=60,
        retry_budget=args.budget,
    )
    retrier = Retrier(
        policy,
        store=open_store(args.store),
        clock=ShiftedClock(args.wall_offset),
        instruments=(Printer(),),
        budget=None,
    )
    with resume(args.key):
        try:
            retrier.call_sync(job, args.hold)
        except Exception as error:
            attempts = getattr(error, "attempts", "-")
            print(f"gave-up {type(error).__name__} {attempts}", flush=True)


if __name__ == "__main__":
    main()
