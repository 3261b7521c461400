"""Resume across real process restarts: workers killed with SIGKILL mid-backoff, then resumed.

Each test runs `tests.stores.worker` as a subprocess against SQLite and a real redis-server.
A restart gap is simulated by moving the new process's wall clock (``--wall-offset``), so no
test waits for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import redis as redis_py

from retrymw.stores import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
WAIT = 60.0  # the longest any worker may take


def start(spec: str, key: str, *options: str) -> subprocess.Popen[str]:
    """Start a worker process; its stdout is read line by line."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.stores.worker", spec, key, *options],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def kill_at(process: subprocess.Popen[str], line: str) -> list[str]:
    """Read ``process``'s lines until ``line``, then SIGKILL it; return what it printed."""
    assert process.stdout is not None
    seen: list[str] = []
    for _ in range(100):  # bounded: the worker prints a handful of lines
        text = process.stdout.readline()
        if not text:
            break
        seen.append(text.strip())
        if seen[-1] == line:
            break
    process.send_signal(signal.SIGKILL)
    _, err = process.communicate(timeout=WAIT)  # reaps it and closes the pipes
    assert seen[-1:] == [line], (seen, err)
    return seen


def finish(process: subprocess.Popen[str]) -> list[str]:
    """Wait for ``process`` to exit by itself; return its lines."""
    out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 0, err
    # A store that failed is given up for the call (its state goes on in memory): then the
    # attempt numbers are no longer shared, and the test would not be about the store.
    assert "resume store" not in err, err
    return out.split("\n")[:-1]


def records_left(spec: str) -> int:
    """How many resume records the store still holds."""
    if spec.startswith("sqlite:"):
        store = SQLiteStore(spec.removeprefix("sqlite:"))
        try:
            return len(store)
        finally:
            store.close()
    with redis_py.Redis.from_url(spec) as client:  # an ended call's tombstone is no record
        return sum(not client.hexists(key, "x") for key in client.keys("tests:resume:*"))


def test_a_killed_worker_is_resumed_at_attempt_3_of_3_and_no_further(store_spec: str) -> None:
    """Two failures, SIGKILL mid-backoff; the next process makes attempt 3 of 3 and gives up."""
    first = start(store_spec, "job-42", "--attempts", "3", "--delays", "0.01,30")
    assert kill_at(first, "backoff 2 30") == ["attempt 1", "backoff 1 0.01", "attempt 2",
                                              "backoff 2 30"]  # fmt: skip
    assert records_left(store_spec) == 1
    # 31 s later on the wall clock: the interrupted backoff is over, nothing is waited.
    second = start(store_spec, "job-42", "--attempts", "3", "--delays", "0.01,30",
                   "--wall-offset", "31")  # fmt: skip
    assert finish(second) == ["attempt 3", "gave-up ConnectionError -"]
    assert records_left(store_spec) == 0


def test_a_resumed_call_past_its_budget_expiry_does_not_retry(store_spec: str) -> None:
    """5 s budget, 6 s between the processes: the resumed call makes no attempt at all."""
    options = ("--attempts", "10", "--budget", "5", "--delays", "4")
    first = start(store_spec, "job-7", *options)
    kill_at(first, "backoff 1 4")
    second = start(store_spec, "job-7", *options, "--wall-offset", "6")
    assert finish(second) == ["gave-up RetryBudgetExhausted 1"]
    assert records_left(store_spec) == 0


def test_a_resumed_call_within_its_budget_retries_until_the_expiry(store_spec: str) -> None:
    """The same worker back after 3 s (budget 5 s): one more attempt, then no retry past it."""
    options = ("--attempts", "10", "--budget", "5", "--delays", "4")
    first = start(store_spec, "job-8", *options)
    kill_at(first, "backoff 1 4")
    second = start(store_spec, "job-8", *options, "--wall-offset", "3")
    assert finish(second) == ["attempt 2", "gave-up RetryBudgetExhausted 2"]


def test_a_new_key_starts_afresh_beside_a_resumed_one(store_spec: str) -> None:
    """Records are per key: another job in the same store gets all its attempts."""
    first = start(store_spec, "job-1", "--attempts", "2", "--delays", "30")
    kill_at(first, "backoff 1 30")
    other = start(store_spec, "job-2", "--attempts", "2", "--delays", "0.01")
    assert finish(other) == ["attempt 1", "backoff 1 0.01", "attempt 2",
                             "gave-up ConnectionError -"]  # fmt: skip
    assert records_left(store_spec) == 1  # job-1's, until it resumes or expires


def test_two_processes_resuming_one_key_share_its_attempts(store_spec: str) -> None:
    """Two workers resume one key at once: each attempt number runs once, 3 attempts in all."""
    first = start(store_spec, "job-9", "--attempts", "3", "--delays", "30")
    kill_at(first, "backoff 1 30")
    options = ("--attempts", "3", "--delays", "0.01,0.01", "--wall-offset", "31", "--hold", "0.5")
    workers = [start(store_spec, "job-9", *options) for _ in range(2)]
    lines = [finish(worker) for worker in workers]
    numbers = sorted(
        int(line.split()[1]) for output in lines for line in output if line.startswith("attempt")
    )
    # Attempt 1 ran in the killed process; none runs twice, whichever worker ends the call
    # first (a late failure in the other must not bring its deleted record back).
    assert numbers == [2, 3], lines
    assert all(output[-1].startswith("gave-up") for output in lines)
    assert records_left(store_spec) == 0
