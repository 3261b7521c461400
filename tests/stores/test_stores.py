"""The stores and the engine's use of them, in one process: records, failures, expiry, forks."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import retrymw
from retrymw import ConfigError, Retrier, RetryBudgetExhausted, RetryPolicy, resume
from retrymw.stores import (
    Claim,
    CorruptRecord,
    RedisStore,
    ResumeRecord,
    SQLiteStore,
    Store,
    StoreError,
)
from retrymw.testing import FakeClock
from tests.redis_server import RedisServer


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"), pytest.param("redis", id="redis")])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty store of each kind."""
    if request.param == "sqlite":
        made: Store = SQLiteStore(tmp_path / "retries.db")
    else:
        server: RedisServer = request.getfixturevalue("redis")
        made = RedisStore(server.url, namespace=f"unit{os.getpid()}{id(request)}")
    yield made
    made.close()


def now_clock(offset: float = 0.0) -> FakeClock:
    """A fake clock whose wall time is now (plus ``offset``): records stay live for len()."""
    return FakeClock(wall_start=time.time() + offset)


def failing(calls: list[int]) -> None:
    calls.append(1)
    raise ConnectionError("down")


def test_a_claim_counts_attempts_up_to_the_limit_and_an_end_stops_the_call(store: Store) -> None:
    """Claims count up to the limit and no further; an ended call stops the processes that
    knew it, while a new call with the same key starts afresh."""
    assert store.claim("k", 100.0, limit=3, known=None) == Claim(
        1, ResumeRecord(1, 0.0, None, None)
    )
    first = ResumeRecord(1, 0.0, None, None)
    assert store.claim("k", 100.0, limit=3, known=first) == Claim(
        2, ResumeRecord(2, 0.0, None, None)
    )
    record = store.add_failure("k", 100.0, delay=1.5, expires_at=105.0, next_at=101.5)
    assert record == ResumeRecord(2, 1.5, 105.0, 101.5)
    # The first failure's expiry stays; backoff adds up.
    record = store.add_failure("k", 102.0, delay=2.0, expires_at=107.0, next_at=104.0)
    assert record == ResumeRecord(2, 3.5, 105.0, 104.0)
    assert store.load("k", 102.0) == record
    third = store.claim("k", 103.0, limit=3, known=record)
    assert third == Claim(3, ResumeRecord(3, 3.5, 105.0, 104.0))
    # None left: the record is returned as it is, nothing is counted.
    assert store.claim("k", 103.0, limit=3, known=record) == Claim(None, third.record)
    assert store.load("k", 103.0) == third.record
    store.end("k", 104.0, linger=60.0)
    assert store.load("k", 104.0) is None
    assert store.claim("k", 104.0, limit=3, known=record) is None  # ended elsewhere
    assert store.claim("k", 104.0, limit=3, known=None) == Claim(
        1, ResumeRecord(1, 0.0, None, None)
    )


def test_a_failure_never_brings_back_an_ended_record(store: Store) -> None:
    """A call ended by another process stays ended: a late failure of a worker that was still
    running finds no record (``None``), and its next claim is told so, instead of a fresh
    record whose count starts again at 1 (then attempt numbers that already ran would run again
    in this worker)."""
    known = store.claim("k", 100.0, limit=3, known=None).record  # type: ignore[union-attr]
    store.end("k", 100.0, linger=60.0)  # another worker gave up and ended the call
    assert store.add_failure("k", 101.0, delay=1.0, expires_at=None, next_at=102.0) is None
    assert store.load("k", 101.0) is None
    assert store.claim("k", 102.0, limit=3, known=known) is None


def test_a_lost_record_is_rebuilt_from_what_the_claimer_knows(store: Store) -> None:
    """No record and no tombstone (a flushed store): the claim rebuilds it from ``known``."""
    known = ResumeRecord(2, 3.0, 1050.0, None)
    assert store.add_failure("k", 1000.0, delay=1.0, expires_at=None, next_at=1001.0) is None
    claim = store.claim("k", 1000.0, limit=3, known=known)
    assert claim == Claim(3, ResumeRecord(3, 3.0, 1050.0, None))
    assert claim is not None
    assert store.load("k", 1000.0) == claim.record
    assert store.claim("k", 1000.0, limit=3, known=claim.record) == Claim(None, claim.record)


def test_sqlite_records_expire_after_their_retention(tmp_path: Path) -> None:
    """A record past its budget's expiry plus the retention is gone, and purged from the file."""
    store = SQLiteStore(tmp_path / "r.db", retention="1h")
    store.claim("k", 1000.0, limit=3, known=None)
    store.add_failure("k", 1000.0, delay=1.0, expires_at=1010.0, next_at=1001.0)
    assert store.load("k", 1010.0 + 3600.0) is not None
    assert store.load("k", 1010.0 + 3601.0) is None
    store.end("k", 1010.0 + 3601.0, linger=1.0)
    assert store.load("k", 1010.0 + 3603.0) is None
    store.close()
    with sqlite3.connect(tmp_path / "r.db") as connection:
        assert connection.execute("SELECT count(*) FROM retrymw_resume").fetchone() == (1,)
    connection.close()
    SQLiteStore(tmp_path / "r.db").close()  # purges at construction: the tombstone is past
    with sqlite3.connect(tmp_path / "r.db") as connection:
        assert connection.execute("SELECT count(*) FROM retrymw_resume").fetchone() == (0,)
    connection.close()


def test_redis_records_carry_a_ttl_past_the_expiry(redis: RedisServer) -> None:
    """Redis expires a record on its own, retention after its budget's expiry."""
    import redis as redis_py

    store = RedisStore(redis.url, namespace="ttl", retention="1h")
    store.claim("k", 1000.0, limit=3, known=None)
    store.add_failure("k", 1000.0, delay=1.0, expires_at=1300.0, next_at=1001.0)
    with redis_py.Redis.from_url(redis.url) as client:
        (key,) = client.keys("ttl:resume:*")
        assert 3600 + 290 <= client.ttl(key) <= 3600 + 301
        store.end("k", 1001.0, linger=90.0)  # a tombstone lingers for a while only
        assert 80 <= client.ttl(key) <= 90
    store.close()


def test_construction_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    """A missing directory, a file that is not a database and a dead Redis are clear errors."""
    with pytest.raises(StoreError, match=r"retries\.db"):
        SQLiteStore(tmp_path / "missing" / "retries.db")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match=r"garbage\.db"):
        SQLiteStore(garbage)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE retrymw_resume (key TEXT PRIMARY KEY, x INTEGER)")
    connection.close()
    with pytest.raises(StoreError, match=r"other\.db"):
        SQLiteStore(other)
    with pytest.raises(StoreError, match="cannot reach redis://REDACTED:REDACTED@127"):
        RedisStore("redis://user:secret@127.0.0.1:9/0", timeout="100ms")
    with pytest.raises(ConfigError, match="url"):
        RedisStore("http://127.0.0.1:6379")
    with pytest.raises(ConfigError, match="retention"):
        SQLiteStore(tmp_path / "r.db", retention="10ms")
    with pytest.raises(ConfigError, match="store"):
        Retrier(store="retries.db")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="key"):
        resume("")


def test_the_record_is_deleted_on_success_and_on_give_up(tmp_path: Path) -> None:
    """A call that ends, either way, leaves no record behind."""
    store = SQLiteStore(tmp_path / "r.db")
    retrier = Retrier(RetryPolicy(attempts=2), store=store, clock=now_clock(), instruments=())
    calls: list[int] = []
    with resume("job"), pytest.raises(ConnectionError):
        retrier.call_sync(failing, calls)
    assert (len(calls), len(store)) == (2, 0)
    with resume("job"):
        assert retrier.call_sync(lambda: "done") == "done"
    assert len(store) == 0


def test_a_cancelled_call_keeps_its_record_and_resumes(tmp_path: Path) -> None:
    """KeyboardInterrupt during the backoff keeps the record; the next call goes on from it."""

    class Stopped(FakeClock):
        def sleep_sync(self, seconds: float) -> None:
            raise KeyboardInterrupt

    store = SQLiteStore(tmp_path / "r.db")
    policy = RetryPolicy(attempts=3, initial_delay="10s")
    calls: list[int] = []
    with resume("job"), pytest.raises(KeyboardInterrupt):
        Retrier(
            policy, store=store, clock=Stopped(wall_start=time.time()), instruments=()
        ).call_sync(failing, calls)
    assert len(store) == 1
    clock = now_clock(60)
    with resume("job"), pytest.raises(ConnectionError, match="down") as raised:
        Retrier(policy, store=store, clock=clock, instruments=()).call_sync(failing, calls)
    assert len(calls) == 3  # 1 before the interrupt, 2 after: 3 of 3
    assert "attempt 3 of 3" in str(getattr(raised.value, "__notes__", None))
    assert len(store) == 0


def test_a_resumed_call_with_no_attempt_left_raises_resume_exhausted(tmp_path: Path) -> None:
    """All attempts used by a process that died: the next one runs nothing and says why."""
    store = SQLiteStore(tmp_path / "r.db")
    for _ in range(3):
        store.claim(retrymw_key("job"), 1_700_000_000.0, limit=3, known=None)
    calls: list[int] = []
    retrier = Retrier(RetryPolicy(attempts=3), store=store, clock=FakeClock(), instruments=())
    with resume("job"), pytest.raises(retrymw.ResumeExhausted, match="3 of 3") as raised:
        retrier.call_sync(failing, calls)
    assert (calls, raised.value.reason, raised.value.attempts) == ([], "max_attempts", 3)


def test_a_call_ended_elsewhere_mid_attempt_runs_no_attempt_number_twice(
    tmp_path: Path,
) -> None:
    """Another worker ends the call (deletes its record) while this one's attempt 1 runs:
    this one's failure does not bring the record back, and it stops with its own last error
    rather than numbering a new record from 1 (before the fix: 3 attempts here)."""
    store = SQLiteStore(tmp_path / "r.db")
    calls: list[int] = []

    def ended_elsewhere_then_fails() -> None:
        calls.append(1)
        store.end(retrymw_key("job"), time.time(), linger=60)  # the other worker gave up
        raise ConnectionError("down")

    retrier = Retrier(RetryPolicy(attempts=3), store=store, clock=now_clock(), instruments=())
    with resume("job"), pytest.raises(ConnectionError, match="down"):
        retrier.call_sync(ended_elsewhere_then_fails)
    assert calls == [1]
    assert len(store) == 0


def test_the_budget_expiry_is_wall_clock_time(tmp_path: Path) -> None:
    """A budget expired on the wall clock ends a resumed call with RetryBudgetExhausted."""
    store = SQLiteStore(tmp_path / "r.db")
    key = retrymw_key("job")
    store.claim(key, 1_700_000_000.0, limit=3, known=None)
    store.add_failure(key, 1_700_000_000.0, delay=1.0, expires_at=1_700_000_005.0,
                      next_at=1_700_000_001.0)  # fmt: skip
    clock = FakeClock(wall_start=1_700_000_006.0)
    retrier = Retrier(RetryPolicy(retry_budget="5s"), store=store, clock=clock, instruments=())
    calls: list[int] = []
    with resume("job"), pytest.raises(RetryBudgetExhausted) as raised:
        retrier.call_sync(failing, calls)
    assert calls == []
    assert isinstance(raised.value.__cause__, retrymw.ResumeExhausted)


def test_a_store_failing_mid_call_is_logged_and_the_call_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store that raises on every operation never changes the call's result."""

    class Broken(SQLiteStore):
        def claim(
            self, key: str, now: float, *, limit: int, known: ResumeRecord | None
        ) -> Claim | None:
            raise sqlite3.OperationalError("disk I/O error")

    store = Broken(tmp_path / "r.db")
    outcomes = iter([ConnectionError("down"), None])

    def flaky() -> str:
        error = next(outcomes)
        if error is not None:
            raise error
        return "ok"

    retrier = Retrier(RetryPolicy(), store=store, clock=FakeClock(), instruments=())
    with caplog.at_level(logging.WARNING, "retrymw"), resume("secret-key-123"):
        assert retrier.call_sync(flaky) == "ok"
    messages = [record.getMessage() for record in caplog.records]
    assert sum("failed during claim" in message for message in messages) == 1
    assert not any("secret-key-123" in message for message in messages)


def test_the_key_belongs_to_one_call_not_to_the_calls_inside_it(tmp_path: Path) -> None:
    """A call made inside an attempt of a keyed call runs without the key."""
    store = SQLiteStore(tmp_path / "r.db")
    inner = Retrier(RetryPolicy(attempts=2), store=store, clock=FakeClock(), instruments=())
    seen: list[str | None] = []

    def outer_job() -> str:
        seen.append(retrymw._engine.resume.current_resume_key())
        return inner.call_sync(lambda: "inner")

    outer = Retrier(RetryPolicy(), store=store, clock=FakeClock(), instruments=())
    with resume("job"):
        assert outer.call_sync(outer_job) == "inner"
        assert retrymw._engine.resume.current_resume_key() == "job"
    assert seen == [None]
    assert retrymw._engine.resume.current_resume_key() is None


@pytest.mark.anyio
async def test_async_calls_resume_too(tmp_path: Path) -> None:
    """The async driver claims, records and deletes the same way."""
    store = SQLiteStore(tmp_path / "r.db")
    clock = now_clock()
    calls: list[int] = []

    async def job() -> None:
        await anyio.lowlevel.checkpoint()
        failing(calls)

    retrier = Retrier(RetryPolicy(attempts=4), store=store, clock=clock, instruments=())
    key = retrymw_key("job")
    store.claim(key, clock.wall(), limit=4, known=None)
    store.claim(key, clock.wall(), limit=4, known=None)
    with resume("job"), pytest.raises(ConnectionError):
        await retrier.call(job)
    assert (len(calls), len(store)) == (2, 0)  # attempts 3 and 4 of 4


def test_a_forked_child_reopens_the_sqlite_file(tmp_path: Path) -> None:
    """A child forked after the store was used works on its own connection."""
    store = SQLiteStore(tmp_path / "r.db")
    store.claim("k", 1000.0, limit=3, known=None)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        try:
            claim = store.claim("k", 1000.0, limit=3, known=None)
            os._exit(0 if claim is not None and claim.number == 2 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.load("k", 1000.0) == ResumeRecord(2, 0.0, None, None)


def retrymw_key(key: str) -> str:
    """The digest a store keeps ``key`` under."""
    from retrymw.stores._base import digest

    return digest(key)


def test_reprs_and_argument_errors_name_what_is_wrong(tmp_path: Path, redis: RedisServer) -> None:
    """Reprs show no key or credential; bad arguments are ConfigErrors naming the field."""
    assert repr(resume("secret-job")) == "<resume key=<hidden>>"
    store = RedisStore(redis.url, namespace="n")
    assert repr(store) == f"<RedisStore url={redis.url!r} namespace='n'>"
    store.close()
    with pytest.raises(StoreError) as refused:  # the server wants no password: refused, redacted
        RedisStore(redis.url.replace("//", "//user:pw@"))
    assert "pw" not in str(refused.value)
    assert "r.db" in repr(SQLiteStore(tmp_path / "r.db"))
    for make, field in (
        (lambda: RedisStore(redis.url, namespace=""), "namespace"),
        (lambda: RedisStore(redis.url, timeout=0), "timeout"),
        (lambda: SQLiteStore(""), "path"),
    ):
        with pytest.raises(ConfigError, match=f"^{field}:"):
            make()


def test_sqlite_purges_expired_rows_as_claims_go_by(tmp_path: Path) -> None:
    """Every 256th claim sweeps the records past their retention, whatever their key."""
    store = SQLiteStore(tmp_path / "r.db", retention="1s")
    store.claim("old", 1000.0, limit=3, known=None)
    for _ in range(256):
        store.claim("new", 2000.0, limit=1000, known=None)
    store.close()  # reopened on the next operation
    store.close()
    with sqlite3.connect(tmp_path / "r.db") as connection:
        keys = connection.execute("SELECT key FROM retrymw_resume").fetchall()
    connection.close()
    assert keys == [("new",)]


def test_a_failed_write_is_rolled_back_and_the_store_stays_usable(tmp_path: Path) -> None:
    """A claim or failure that fails mid-transaction leaves no transaction open."""
    store = SQLiteStore(tmp_path / "r.db")
    store.claim("k", 1000.0, limit=3, known=None)
    with sqlite3.connect(tmp_path / "r.db") as other:
        for event in ("INSERT", "UPDATE"):
            other.execute(f"CREATE TRIGGER no_{event} BEFORE {event} ON retrymw_resume "
                          "BEGIN SELECT RAISE(ABORT, 'read-only'); END")  # fmt: skip
    other.close()
    with pytest.raises(sqlite3.DatabaseError, match="read-only"):
        store.claim("k", 1000.0, limit=3, known=None)
    with pytest.raises(sqlite3.DatabaseError, match="read-only"):
        store.add_failure("k", 1000.0, delay=1.0, expires_at=None, next_at=1001.0)
    with sqlite3.connect(tmp_path / "r.db") as other:
        other.execute("DROP TRIGGER no_INSERT")
        other.execute("DROP TRIGGER no_UPDATE")
    other.close()
    store.end("k", 1000.0, linger=60)  # no transaction was left open
    assert store.load("k", 1000.0) is None


def test_a_resumed_call_refused_by_an_open_breaker_raises_circuit_open(tmp_path: Path) -> None:
    """A resumed call whose first attempt here meets an open circuit fails fast, never None."""
    store = SQLiteStore(tmp_path / "r.db")
    clock = now_clock()
    store.claim(retrymw_key("job"), clock.wall(), limit=3, known=None)
    breaker = retrymw.CircuitBreaker(name="db", failure_threshold=1, clock=clock)
    breaker.record_failure()
    retrier = Retrier(RetryPolicy(), breaker=breaker, store=store, clock=clock, instruments=())
    with resume("job"), pytest.raises(retrymw.CircuitOpenError):
        retrier.call_sync(lambda: "never runs")
    assert len(store) == 0


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ((-1, 0.0, None, None), "attempts"),
        ((True, 0.0, None, None), "attempts"),
        ((10**7, 0.0, None, None), "attempts"),
        ((1, float("nan"), None, None), "delay_so_far"),
        ((1, -2.0, None, None), "delay_so_far"),
        ((1, "1.0", None, None), "delay_so_far"),
        ((1, 0.0, float("inf"), None), "expires_at"),
        ((1, 0.0, None, b"\x00"), "next_at"),
    ],
)
def test_a_record_refuses_values_no_process_writes(values: tuple[Any, ...], field: str) -> None:
    """`ResumeRecord` checks every value: a store can hand the engine no corrupt record."""
    with pytest.raises(CorruptRecord, match=f"^{field}: ") as refused:
        ResumeRecord(*values)
    assert isinstance(refused.value, ValueError)
    assert refused.value.field == field
    assert ResumeRecord(3, 2, 1e9, None).delay_so_far == 2.0  # an integer is a number too
