"""Resume holds under every fault its stores exist for (issue 28, the stores half).

Attacks, each against the real component: a SQLite file write-locked by another process, with
sync calls and five concurrent async calls; a hung Redis (its server stopped with SIGSTOP); a
record due far past the deadline (an older policy, a clock that went back), or a wait the
process stalled through; a call that ends at its deadline, its end unwatched; corrupt SQLite rows
and garbage Redis hashes; overlapping deliveries of one key, in one process and in eight real
processes; a store that loses its data under a running call (FLUSHALL, a deleted row); a
resumed HTTP call with an attempt header; a full disk.

Before the fixes: a 300 ms-deadline call took 2 s and more on a locked file, five async calls
froze the event loop for seconds, a 200 ms-deadline call took 0.5 s against a hung Redis, a
resumed call waited `max_delay` past its 1 s deadline, corrupt rows raised `TypeError` without
running the function, a duplicate delivery deleted the record under the running call (4
attempts for ``attempts=2``), FLUSHALL made a call give up after attempt 1 of 3, a resumed
request sent attempt headers 1, 2 for attempts 3, 4, a full disk was logged as "cannot
rollback", a resumed call that stalled through its wait raised `TimeoutError` and deleted the
record, and a call ending at its deadline logged its healthy store as failed. Wall-clock
bounds below are several times the deadline (a loaded machine keeps them) and far below what
the stores' own timeouts made the calls take before.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import httpx
import pytest
import redis as redis_py

import retrymw
from retrymw import Retrier, RetryPolicy, resume
from retrymw.httpx import RetryTransport
from retrymw.stores import RedisStore, SQLiteStore
from retrymw.testing import FakeClock
from tests.redis_server import RedisServer, redis_server
from tests.stores.overlap import overlapping_runs

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")
STORE_TIMEOUT = 2.0  # what a locked file or a hung server cost each operation before
BOUND = 1.5  # several deadlines, below one store timeout


def digest(key: str) -> str:
    """The form a store keeps a resume key in (docs/resume.md: a SHA-256 digest)."""
    return hashlib.sha256(key.encode()).hexdigest()


async def ok() -> str:
    await anyio.lowlevel.checkpoint()
    return "ok"


def record_run(ran: list[int]) -> str:
    ran.append(1)
    return "ok"


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "retrymw"]


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server of this test's own (a test may stop it with SIGSTOP)."""
    directory = tmp_path / "redis"
    directory.mkdir()
    with redis_server(directory) as server:
        yield server


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[SQLiteStore]:
    """A store whose file's write lock another process holds until the test ends."""
    path = tmp_path / "locked.db"
    store = SQLiteStore(path, timeout=STORE_TIMEOUT)  # opened (and its table made) first
    script = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        yield store
    finally:
        holder.kill()
        holder.communicate(timeout=30)  # reaps it and closes its pipes
        store.close()  # after the operations the calls abandoned (they end with the lock)


# -- store I/O never blocks the event loop and is bounded by the deadline ------------------------


def test_a_locked_sqlite_file_costs_a_sync_call_no_more_than_its_deadline(
    locked: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: the claim and the delete each waited out the store's lock timeout (2 x 2 s)."""
    store = locked
    retrier = Retrier(RetryPolicy(deadline="300ms"), store=store, instruments=(), budget=None)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, "retrymw"), resume("job-locked"):
        assert retrier.call_sync(lambda: "ok") == "ok"
    took = time.monotonic() - started
    assert took < BOUND, took
    assert any("resume store" in message for message in messages(caplog))


@pytest.mark.anyio
async def test_five_async_calls_on_a_locked_sqlite_file_keep_the_loop_running(
    locked: SQLiteStore,
) -> None:
    """Five concurrent 300 ms-deadline calls: each ends within its bound and the loop keeps
    ticking. Before: every store operation blocked the loop for the lock timeout (10 s and
    more in all)."""
    store = locked
    retrier = Retrier(RetryPolicy(deadline="300ms"), store=store, instruments=(), budget=None)
    took: list[float] = []
    gaps: list[float] = []
    done = anyio.Event()

    async def one(n: int) -> None:
        started = time.monotonic()
        with resume(f"job-{n}"):
            assert await retrier.call(ok) == "ok"
        took.append(time.monotonic() - started)

    async def ticker() -> None:
        last = time.monotonic()
        while not done.is_set():
            await anyio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        async with anyio.create_task_group() as calls:
            for n in range(5):
                calls.start_soon(one, n)
        done.set()
    assert len(took) == 5
    assert max(took) < BOUND, took
    assert max(gaps) < 1.0, max(gaps)


@pytest.mark.anyio
async def test_an_async_call_runs_store_operations_off_the_event_loop(tmp_path: Path) -> None:
    """A store operation in progress never holds the loop: a task of the loop runs while a
    claim waits. Before: the claim ran on the loop's thread, so the task could not run until
    the claim gave up waiting for it."""
    loop_ran = threading.Event()
    entered = threading.Event()
    witnessed: list[bool] = []

    class Witness(SQLiteStore):
        def claim(self, *args: Any, **kwargs: Any) -> Any:
            entered.set()
            witnessed.append(loop_ran.wait(timeout=5.0))
            return super().claim(*args, **kwargs)

    async def watcher() -> None:
        while not entered.is_set():
            await anyio.sleep(0.001)
        loop_ran.set()

    store = Witness(tmp_path / "r.db")
    retrier = Retrier(RetryPolicy(), store=store, instruments=(), budget=None)
    async with anyio.create_task_group() as group:
        group.start_soon(watcher)
        with resume("job"):
            assert await retrier.call(ok) == "ok"
    assert witnessed == [True]


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_a_hung_redis_costs_a_call_no_more_than_its_deadline(
    redis: RedisServer, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis stopped (SIGSTOP) under a 200 ms-deadline call. Before: each operation waited
    out the client's timeout (2 x 2 s here; 0.5 s with the default 250 ms)."""
    store = RedisStore(redis.url, namespace="hung", timeout=STORE_TIMEOUT)
    retrier = Retrier(RetryPolicy(deadline="200ms"), store=store, instruments=(), budget=None)
    assert redis.process is not None
    pid = redis.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, "retrymw"), resume("job-hung"):
            if mode == "sync":
                assert retrier.call_sync(lambda: "ok") == "ok"
            else:
                assert anyio.run(retrier.call, ok) == "ok"
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert took < BOUND, took
    assert any("resume store" in message for message in messages(caplog))


# -- a resumed wait respects the deadline and the policy -----------------------------------------


class StoppedInBackoff(FakeClock):
    """A worker stopped (SIGTERM as KeyboardInterrupt) in its first backoff."""

    def sleep_sync(self, seconds: float) -> None:
        raise KeyboardInterrupt


def leave_record(store: SQLiteStore, key: str, *, delay: float, wall: float) -> None:
    """A first process fails once, schedules ``delay`` of backoff at ``wall`` and is stopped."""
    older = RetryPolicy(attempts=5, initial_delay=delay, max_delay=3600, backoff="fixed")
    clock = StoppedInBackoff(wall_start=wall)

    def fails() -> None:
        raise ConnectionError("down")

    with resume(key), pytest.raises(KeyboardInterrupt):
        Retrier(older, store=store, clock=clock, instruments=(), budget=None).call_sync(fails)


@pytest.mark.parametrize(
    ("due_in", "why"),
    [(20.0, "an older policy's backoff"), (3600.0, "a wall clock that went back an hour")],
)
def test_a_resumed_wait_is_never_longer_than_the_policy_delay_nor_the_deadline(
    tmp_path: Path, due_in: float, why: str
) -> None:
    """The record says the next attempt is due in 20 s (or an hour); the policy now waits
    0.1 s and the call has a 1 s deadline. Before: it waited max_delay (5 s) first."""
    store = SQLiteStore(tmp_path / "r.db")
    now = time.time()
    leave_record(store, "job", delay=due_in, wall=now)
    policy = RetryPolicy(
        attempts=3, initial_delay="100ms", backoff="fixed", max_delay="5s", deadline="1s"
    )
    clock = FakeClock(wall_start=now)
    with resume("job"):
        assert (
            Retrier(policy, store=store, clock=clock, instruments=()).call_sync(lambda: "ok")
            == "ok"
        ), why
    assert clock.sleeps == [pytest.approx(0.1)], why


def test_a_resumed_wait_past_the_deadline_stops_at_once(tmp_path: Path) -> None:
    """Due in 3 s, the policy's own delay 5 s, the deadline 1 s: no wait, no attempt, and the
    record stays for a process that has the time. Before: it slept 3 s, then ran."""
    store = SQLiteStore(tmp_path / "r.db")
    now = time.time()
    leave_record(store, "job", delay=3.0, wall=now)
    policy = RetryPolicy(attempts=3, initial_delay="5s", backoff="fixed", deadline="1s")
    clock = FakeClock(wall_start=now)
    ran: list[int] = []
    with resume("job"), pytest.raises(retrymw.ResumeExhausted) as stopped:
        Retrier(policy, store=store, clock=clock, instruments=()).call_sync(ran.append, 1)
    assert (ran, clock.sleeps, stopped.value.reason) == ([], [], "deadline_exceeded")
    assert len(store) == 1


class StallsInWaits(FakeClock):
    """A process that stalls a second in every wait (a GC pause, a CPU quota, SIGSTOP)."""

    def sleep_sync(self, seconds: float) -> None:
        super().sleep_sync(seconds + 1.0)


MODES = ["sync", "asyncio", "trio"]


def call_in(mode: str, retrier: Retrier, fn: Callable[[], T]) -> T:
    """``fn`` through ``retrier``: as a function (``sync``), or as a coroutine on the event
    loop ``mode`` names."""
    if mode == "sync":
        return retrier.call_sync(fn)

    async def as_coroutine() -> T:
        return fn()

    return anyio.run(retrier.call, as_coroutine, backend=mode)


@pytest.mark.parametrize("mode", MODES)
def test_a_resumed_wait_that_overran_the_deadline_stops_and_keeps_the_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    """Due in 0.5 s, within the 1 s deadline, but the process stalled through it: as when the
    record's wait would cross the deadline, nothing runs and the record stays for a process
    that has the time. Before: the call raised a `TimeoutError` and deleted the record, and
    the log blamed the store for an end it was given no time for."""
    store = SQLiteStore(tmp_path / "r.db")
    now = time.time()
    leave_record(store, "job", delay=0.5, wall=now)
    policy = RetryPolicy(attempts=3, initial_delay="1s", backoff="fixed", deadline="1s")
    clock = StallsInWaits(wall_start=now)
    retrier = Retrier(policy, store=store, clock=clock, instruments=())
    ran: list[int] = []
    with (
        caplog.at_level(logging.WARNING, "retrymw"),
        resume("job"),
        pytest.raises(retrymw.ResumeExhausted) as stopped,
    ):
        call_in(mode, retrier, lambda: ran.append(1))
    assert (ran, stopped.value.reason, stopped.value.attempts) == ([], "deadline_exceeded", 1)
    assert clock.sleeps == [pytest.approx(1.5)]
    assert len(store) == 1
    assert not [message for message in messages(caplog) if "failed" in message]


# -- a call that ends at its deadline ends its record, unwatched, and blames nothing --------------


class HeldEnds(SQLiteStore):
    """A store whose ends wait until the test lets them go, and fail if it says so."""

    def __init__(self, path: Path, *, fails: bool = False) -> None:
        super().__init__(path)
        self.let_go = threading.Event()
        self.fails = fails

    def end(self, key: str, now: float, *, linger: float) -> None:
        self.let_go.wait(timeout=30)
        if self.fails:
            raise OSError("disk I/O error")
        super().end(key, now, linger=linger)


def wait_for(condition: Callable[[], object], what: str) -> None:
    """Wait (up to 30 s) until ``condition()`` holds."""
    until = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < until, what
        time.sleep(0.005)


def ended_past_its_deadline(mode: str, store: HeldEnds) -> None:
    """A call (0.2 s deadline) whose attempt outlasts its deadline and fails: it gives up."""
    clock = FakeClock(wall_start=time.time())
    policy = RetryPolicy(attempts=3, initial_delay="10ms", backoff="fixed", deadline="200ms")
    retrier = Retrier(policy, store=store, clock=clock, instruments=(), budget=None)

    def fails() -> None:
        clock.advance(0.3)
        raise ConnectionError("down")

    with resume("job"), pytest.raises(ConnectionError):
        call_in(mode, retrier, fails)


@pytest.mark.parametrize("mode", MODES)
def test_a_call_ended_past_its_deadline_ends_its_record_without_blaming_the_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    """The call has no time left to wait for the store: its end goes on unwatched. Before: it
    waited 0 s for it and logged the healthy store as failed."""
    store = HeldEnds(tmp_path / "r.db")
    with caplog.at_level(logging.WARNING, "retrymw"):
        ended_past_its_deadline(mode, store)
        assert len(store) == 1  # its end waits, unwatched
        store.let_go.set()
        wait_for(lambda: len(store) == 0, "the end never ran")
    assert not [message for message in messages(caplog) if "failed" in message]


@pytest.mark.parametrize("mode", MODES)
def test_an_unwatched_end_that_fails_is_logged_when_it_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    """Nobody waits for it, so its failure is told when it happens, and what it leaves."""
    store = HeldEnds(tmp_path / "r.db", fails=True)
    with caplog.at_level(logging.WARNING, "retrymw"):
        ended_past_its_deadline(mode, store)
        assert not messages(caplog)
        store.let_go.set()
        wait_for(lambda: messages(caplog), "the failure was never told")
    (told,) = messages(caplog)
    assert "failed during end, after the call ended (OSError: 'disk I/O error')" in told, told
    assert "the record stays until its retention passes" in told, told
    assert len(store) == 1


# -- a corrupt record never changes the result ---------------------------------------------------

ROW = {"attempts": 3, "delay_so_far": 1.0, "expires_at": None, "next_at": None}


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param({"attempts": "many"}, id="attempts-text"),
        pytest.param({"attempts": 2.5}, id="attempts-fraction"),
        pytest.param({"attempts": -3}, id="attempts-negative"),
        pytest.param({"delay_so_far": "lots"}, id="delay-text"),
        pytest.param({"expires_at": "soon"}, id="expiry-text"),
        pytest.param({"next_at": b"\x00\xff"}, id="due-blob"),
        pytest.param({"keep_until": "forever"}, id="keep-until-text"),
    ],
)
def test_a_corrupt_sqlite_row_is_dropped_and_the_call_runs_as_fresh(
    tmp_path: Path, corrupt: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    """A row another program wrote wrong (3 attempts of 3 with one field corrupt): one log
    line, then the call runs as fresh. Before: TypeError without running the function (and a
    row whose keep_until is text ended the call at once, as if 3 attempts were used)."""
    path = tmp_path / "r.db"
    store = SQLiteStore(path)
    row = {**ROW, "keep_until": time.time() + 3600, **corrupt}
    with sqlite3.connect(path) as raw:
        raw.execute(
            "INSERT INTO retrymw_resume (key, attempts, delay_so_far, expires_at, next_at, "
            "keep_until) VALUES (?, ?, ?, ?, ?, ?)",
            (digest("job"), row["attempts"], row["delay_so_far"], row["expires_at"],
             row["next_at"], row["keep_until"]),
        )  # fmt: skip
    raw.close()
    ran: list[int] = []
    retrier = Retrier(RetryPolicy(attempts=3), store=store, clock=FakeClock(), instruments=())
    with caplog.at_level(logging.WARNING, "retrymw"), resume("job"):
        assert retrier.call_sync(lambda: record_run(ran)) == "ok"
    assert ran == [1]
    logged = messages(caplog)
    assert sum("unreadable" in message for message in logged) == 1, logged
    assert not any("failed during" in message for message in logged), logged


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param({"a": "garbage"}, id="attempts-garbage"),
        pytest.param({"a": "-3"}, id="attempts-negative"),
        pytest.param({"a": "1e400"}, id="attempts-overflow"),
        pytest.param({"a": "1", "d": "nan"}, id="delay-nan"),
        pytest.param({"a": "1", "d": "0", "n": "inf"}, id="due-infinite"),
        pytest.param({"a": "1", "d": "0", "e": "soon"}, id="expiry-text"),
        pytest.param({"d": "0"}, id="attempts-missing"),
        pytest.param("a string", id="foreign-type"),
    ],
)
def test_a_garbage_redis_record_is_dropped_and_the_call_runs_as_fresh(
    redis: RedisServer, garbage: object, caplog: pytest.LogCaptureFixture
) -> None:
    """A record another program wrote wrong: one log line, the call runs as fresh on the
    store (which stays in use). Before: the store was abandoned for the call ("failed during
    load"), or the call ended with ResumeExhausted before any attempt."""
    key = f"garbage:resume:{digest('job')}"
    with redis_py.Redis.from_url(redis.url) as client:
        if isinstance(garbage, dict):
            client.hset(key, mapping=garbage)
        else:
            client.set(key, str(garbage))
    store = RedisStore(redis.url, namespace="garbage", timeout="5s")
    ran: list[int] = []
    retrier = Retrier(RetryPolicy(attempts=3), store=store, clock=FakeClock(), instruments=())
    with caplog.at_level(logging.WARNING, "retrymw"), resume("job"):
        assert retrier.call_sync(lambda: record_run(ran)) == "ok"
    assert ran == [1]
    logged = messages(caplog)
    assert sum("unreadable" in message for message in logged) == 1, logged
    assert not any("failed during" in message for message in logged), logged
    store.close()


# -- never more than `attempts` attempts per key -------------------------------------------------


def test_a_duplicate_with_no_attempt_left_leaves_the_running_call_alone(tmp_path: Path) -> None:
    """Worker A runs attempt 2 of 2; meanwhile duplicate B finds none left, then D arrives.
    Before: B deleted the record under A, and D started over: 4 attempts for attempts=2."""
    store = SQLiteStore(tmp_path / "r.db")
    policy = RetryPolicy(attempts=2, initial_delay="1s")
    ran: list[str] = []
    stopped: list[str] = []

    def duplicate(name: str) -> None:
        def job() -> None:
            ran.append(name)
            raise ConnectionError("down")

        with resume("job"):
            try:
                Retrier(policy, store=store, clock=FakeClock(), instruments=()).call_sync(job)
            except retrymw.ResumeExhausted:
                stopped.append(name)
            except ConnectionError:
                pass

    def job_a() -> None:
        ran.append("A")
        if ran.count("A") == 2:  # A's last attempt is running
            duplicate("B")
            duplicate("D")
        raise ConnectionError("down")

    clock = FakeClock(wall_start=time.time())
    with resume("job"), pytest.raises(ConnectionError):
        Retrier(policy, store=store, clock=clock, instruments=()).call_sync(job_a)
    assert (ran, stopped) == (["A", "A"], ["B", "D"])
    assert len(store) == 0  # A ran the last attempt: it ended the call


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_eight_processes_delivered_one_key_run_exactly_its_attempts(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """8 real processes, one key, attempts=4, all delivered at once, run after run (a smoke
    count here; `python -m tests.stores.overlap bench` runs 100). Before: 5 and 7 attempts."""
    if kind == "sqlite":
        spec = f"sqlite:{tmp_path / 'r.db'}"
        SQLiteStore(spec.removeprefix("sqlite:")).close()
    else:
        server: RedisServer = request.getfixturevalue("redis")
        spec = server.url
    results = overlapping_runs(spec, runs=5, processes=8, attempts=4)
    assert results == [[1, 2, 3, 4]] * 5


# -- a store that loses its data does not end calls ---------------------------------------------


def flaky_after(lose: Any) -> Any:
    """A job whose first attempt makes the store lose everything, then fails; then succeeds."""
    calls: list[int] = []

    def job() -> str:
        calls.append(1)
        if len(calls) == 1:
            lose()
            raise ConnectionError("down")
        return f"ok after {len(calls)}"

    return job


def test_a_redis_flushed_under_a_running_call_does_not_end_it(redis: RedisServer) -> None:
    """FLUSHALL during attempt 1 of 3. Before: the call gave up after attempt 1."""
    store = RedisStore(redis.url, namespace="lost", timeout="5s")

    def flush() -> None:
        with redis_py.Redis.from_url(redis.url) as client:
            client.flushall()

    retrier = Retrier(RetryPolicy(attempts=3), store=store, clock=FakeClock(), instruments=())
    with resume("job"):
        assert retrier.call_sync(flaky_after(flush)) == "ok after 2"
    store.close()


def test_a_sqlite_row_lost_under_a_running_call_does_not_end_it(tmp_path: Path) -> None:
    """The row vanishes during attempt 1 of 3 (a restored backup, a cleanup script)."""
    path = tmp_path / "r.db"
    store = SQLiteStore(path)

    def lose() -> None:
        with sqlite3.connect(path) as raw:
            raw.execute("DELETE FROM retrymw_resume")
        raw.close()

    retrier = Retrier(RetryPolicy(attempts=3), store=store, clock=FakeClock(), instruments=())
    with resume("job"):
        assert retrier.call_sync(flaky_after(lose)) == "ok after 2"


# -- the attempt header stays true after a resume ------------------------------------------------


def test_a_resumed_request_sends_its_real_attempt_numbers(tmp_path: Path) -> None:
    """Attempts 1 and 2, a restart, then 3 and 4: the header says so. Before: 1, 2, 1, 2."""
    store = SQLiteStore(tmp_path / "r.db")
    policy = RetryPolicy(attempts=4, initial_delay="10s")
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers["x-retrymw-attempt"])
        return httpx.Response(503)

    class StoppedInSecondBackoff(FakeClock):
        def sleep_sync(self, seconds: float) -> None:
            if self.sleeps:
                raise KeyboardInterrupt
            super().sleep_sync(seconds)

    def client(clock: FakeClock) -> httpx.Client:
        transport = RetryTransport(
            httpx.MockTransport(handler), policy=policy, store=store, clock=clock,
            instruments=(), attempt_header="x-retrymw-attempt",
        )  # fmt: skip
        return httpx.Client(transport=transport, base_url="http://127.0.0.1")

    headers = {"Idempotency-Key": "pay-7"}
    with (
        client(StoppedInSecondBackoff(wall_start=time.time())) as first,
        pytest.raises(KeyboardInterrupt),
    ):
        first.post("/pay", headers=headers, content=b"{}")
    with client(FakeClock(wall_start=time.time() + 60)) as second:
        assert second.post("/pay", headers=headers, content=b"{}").status_code == 503
    assert sent == ["1", "2", "3", "4"]


# -- a failure says what failed ------------------------------------------------------------------


def test_a_full_disk_is_logged_as_what_failed(tmp_path: Path) -> None:
    """A real process whose files may not grow (``RLIMIT_FSIZE``, as on a full disk): the
    write-ahead log write fails, SQLite rolls the transaction back by itself, and the log
    names that failure. Before: the ROLLBACK that followed failed too and hid it ("cannot
    rollback - no transaction is active"). The call succeeds either way."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.stores.full_disk", str(tmp_path / "r.db")],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "result ok", lines
    (failed,) = [line for line in lines if "failed during claim" in line]
    assert "cannot rollback" not in failed, failed
    assert "disk I/O error" in failed or "disk is full" in failed, failed
