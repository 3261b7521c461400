"""Overlapping deliveries of one key: N real processes run the same call at once, run after run.

``python -m tests.stores.overlap worker STORE``: a long-lived worker. It prints ``ready`` once
its retrier is built, then for each line ``go KEY`` on its stdin runs one call under
``retrymw.resume(KEY)`` with a job that holds ``--hold`` seconds and always fails, printing
``attempt N`` for each attempt it runs and ``done KEY`` when the call is over. Starting the
processes once and releasing them together line by line makes every delivery of a key overlap
(each loads the record within milliseconds of the others, long before an attempt ends).

``python -m tests.stores.overlap bench STORE --runs 100``: the full run (docs/resume.md's goal),
printing how many runs ran exactly ``--attempts`` attempts. `overlapping_runs` is what the
suite's smoke test calls with a small count.
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WAIT = 120.0  # the longest any one run may take (generous: a loaded 2-CPU machine)


def worker(spec: str, attempts: int, hold: float) -> None:
    """The worker loop (see the module docstring)."""
    from retrymw import AttemptStarted, CustomBackoff, Retrier, RetryPolicy, resume
    from retrymw.instrumentation import Instrument
    from tests.stores.worker import open_store

    class Printer(Instrument):
        def attempt_started(self, event: AttemptStarted, /) -> None:
            print(f"attempt {event.attempt}", flush=True)

    def job() -> None:
        time.sleep(hold)
        raise ConnectionError("upstream down")

    retrier = Retrier(
        RetryPolicy(attempts=attempts, backoff=CustomBackoff([0.01]), max_delay=1),
        store=open_store(spec),
        instruments=(Printer(),),
        budget=None,
    )
    print("ready", flush=True)
    for line in sys.stdin:
        key = line.split()[1]
        with resume(key):
            try:
                retrier.call_sync(job)
            except Exception as error:  # every call fails; how is the test's business
                print(f"error {type(error).__name__}", flush=True)
        print(f"done {key}", flush=True)


class Worker:
    """One worker process and a thread that queues its lines (so that reads can time out)."""

    def __init__(self, spec: str, attempts: int, hold: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.stores.overlap", "worker", spec,
             "--attempts", str(attempts), "--hold", str(hold)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())
        self.lines.put("<eof>")

    def until(self, last: str, deadline: float) -> list[str]:
        """The lines up to ``last`` (included); fails at ``deadline`` (monotonic) or EOF."""
        seen: list[str] = []
        while not seen or seen[-1] != last:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            if line == "<eof>":
                raise AssertionError(f"worker exited after {seen}")
            seen.append(line)
        return seen

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        """Close its stdin (it exits), then make sure it is gone, by its pid."""
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=WAIT)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=WAIT)
            self.reader.join(timeout=WAIT)  # it has read to the end: the pipe can close
            if self.process.stdout is not None:
                self.process.stdout.close()


def overlapping_runs(
    spec: str, *, runs: int, processes: int = 8, attempts: int = 4, hold: float = 0.5
) -> list[list[int]]:
    """Run ``runs`` keys, each delivered to ``processes`` workers at once; for each run, the
    attempt numbers that ran, in every process, sorted."""
    workers = [Worker(spec, attempts, hold) for _ in range(processes)]
    try:
        deadline = time.monotonic() + WAIT
        for each in workers:
            each.until("ready", deadline)
        results: list[list[int]] = []
        for run in range(runs):
            key = f"overlap-{os.getpid()}-{run}"
            for each in workers:
                each.send(f"go {key}")
            deadline = time.monotonic() + WAIT
            numbers = [
                int(line.split()[1])
                for each in workers
                for line in each.until(f"done {key}", deadline)
                if line.startswith("attempt ")
            ]
            results.append(sorted(numbers))
        return results
    finally:
        for each in workers:
            each.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["worker", "bench"])
    parser.add_argument("store", help="sqlite:/path or a redis:// URL")
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--hold", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--processes", type=int, default=8)
    args = parser.parse_args()
    if args.mode == "worker":
        worker(args.store, args.attempts, args.hold)
        return
    started = time.monotonic()
    results = overlapping_runs(
        args.store, runs=args.runs, processes=args.processes, attempts=args.attempts,
        hold=args.hold,
    )  # fmt: skip
    exact = sum(numbers == list(range(1, args.attempts + 1)) for numbers in results)
    print(
        f"{exact}/{len(results)} runs ran exactly attempts 1..{args.attempts} "
        f"({args.processes} processes, {time.monotonic() - started:.0f}s)"
    )
    for run, numbers in enumerate(results):
        if numbers != list(range(1, args.attempts + 1)):
            print(f"run {run}: {numbers}")


if __name__ == "__main__":
    main()
