"""Resume across restarts: the ``resume(key)`` scope and `ResumableRun`, a call's view of a store.

`ResumableRun` is everything the engine asks of a durable store: load the record when the call
starts, claim each attempt, add each scheduled backoff, and end the call. Its promises:

- Store I/O never blocks an event loop: the async driver runs each operation in a worker thread
  (`load_async`, `claim_async`, `write_async`, `end_async`) and the sync steps adopt the answers.
- Store I/O is bounded by the call's deadline: an operation before an attempt waits at most half
  of what the deadline leaves (the attempt keeps the rest), the final end at most all of it.
  An operation not answered in time is abandoned (its thread finishes on its own, after this
  call's earlier operations, in order) and counts as a store failure.
- A store that fails never changes the call's result: the error is logged once, the call goes
  on with its state in memory, and the end is still sent (without waiting for it).
- A corrupt or foreign record is dropped with one log line and the call runs as fresh; a record
  lost under a running call (a flushed or failed-over store) is rebuilt by its next claim.
- A process that runs no attempt (none left, or its deadline too short for the wait) leaves the
  record as it is for the processes still running the call.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from .._core.errors import ConfigError, RetrymwError
from .._core.redact import safe_repr

if TYPE_CHECKING:
    from .._core.clock import Clock
    from .._core.events import RetryReason
    from .._core.policy import CallState, RetryPolicy
    from ..stores import Claim, ResumeRecord, Store

__all__ = ["ResumableRun", "ResumeExhausted", "current_resume_key", "resume"]

T = TypeVar("T")

_logger = logging.getLogger("retrymw")

_KEY: ContextVar[str | None] = ContextVar("retrymw_resume_key", default=None)

# Keys are hashed before they are stored; the bound only keeps a mistake (a whole request body
# passed as the key) from being hashed on every call.
_MAX_KEY = 1024


def current_resume_key() -> str | None:
    """The resume key of the innermost ``resume()`` block, unless a call has taken it."""
    return _KEY.get()


class resume:
    """Give the next retrymw call in this block a resume key: its progress survives restarts.

    ``with retrymw.resume("job-42"): retrier.call_sync(run_job)``: with a store on the
    `Retrier` (``store=``), the call's attempt count, backoff spent and retry-budget expiry are
    kept under the key, and a call with the same key in a later process goes on from them.

    The key is a `ContextVar`: it stays in the current task or thread and the tasks it starts.
    A call takes the key for its own duration, so the calls made *inside* its attempts (an HTTP
    request of the job) do not share it. Without a store the block changes nothing.

    Args:
        key: the call's identity across restarts (a job id, an idempotency key): a non-empty
            string of at most 1024 characters. It is stored hashed and never logged.

    Raises:
        ConfigError: the key is not such a string.

    .. versionadded:: 0.2
    """

    __slots__ = ("_key", "_tokens")

    def __init__(self, key: str) -> None:
        if not isinstance(key, str) or not key or len(key) > _MAX_KEY:
            raise ConfigError(
                "key",
                key if not isinstance(key, str) else f"<{len(key)} characters>",
                "must be a non-empty string of at most 1024 characters",
                'resume("job-42")',
            )
        self._key = key
        self._tokens: list[Token[str | None]] = []

    def __enter__(self) -> None:
        self._tokens.append(_KEY.set(self._key))

    def __exit__(self, *exc_info: object) -> None:
        _KEY.reset(self._tokens.pop())

    def __repr__(self) -> str:
        return "<resume key=<hidden>>"


class ResumeExhausted(RetrymwError):
    """A resumed call stopped before running any attempt in this process.

    Its earlier attempts ran in another process (their errors are gone with it) and either all
    attempts are used or taken by processes still running the call (``reason``
    ``max_attempts``), the retry budget expired (``budget_exhausted``; the call then raises
    `RetryBudgetExhausted` caused by this error), or the next attempt is due after this call's
    deadline (``deadline_exceeded``).

    .. versionadded:: 0.2
    """

    def __init__(self, message: str, *, attempts: int, reason: RetryReason) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.reason = reason


class Unreadable:
    """A store's answer to a load that found a record it cannot read (`CorruptRecord`)."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class Fetched:
    """A store's answer that the async driver fetched for the next sync step to adopt."""

    __slots__ = ("answer", "what")

    def __init__(self, what: str, answer: object) -> None:
        self.what = what
        self.answer = answer


class ResumableRun:
    """One call's durable progress: what the engine reads from and writes to a `Store`.

    Created per call that has a resume key and a store. The sync steps (`load`, `claim`,
    `add_failure`, `finish`) do their store I/O in place, bounded by the deadline; the async
    driver calls the ``*_async`` twins first, which do the I/O in a worker thread, and the
    sync steps then adopt their answers. Nothing here raises a store error (see the module
    docstring).
    """

    __slots__ = (
        "_broken",
        "_clock",
        "_deadline_left",
        "_deferred",
        "_fetched",
        "_finished",
        "_key",
        "_leaves",
        "_pending",
        "_policy",
        "_previous",
        "_recorded",
        "_store",
        "_token",
        "_worker",
        "ended_elsewhere",
        "expires_at",
    )

    def __init__(
        self,
        store: Store,
        key: str,
        policy: RetryPolicy,
        clock: Clock,
        deadline_left: Callable[[], float | None],
    ) -> None:
        from ..stores._base import digest

        self._store = store
        self._key = digest(key)
        self._policy = policy
        self._clock = clock
        self._deadline_left = deadline_left
        self._broken = False  # the store failed during this call: the rest is in memory
        self._recorded = False  # whether this call has seen its record in the store
        self._leaves = False  # this process must not end the call (it ran none of the last)
        self._finished = False
        self._deferred = False  # the async driver writes (`write_async`, `end_async`)
        self._fetched: Fetched | None = None  # an answer `load` or `claim` adopts
        self._pending: Callable[[], ResumeRecord | None] | None = None  # a write to make
        self._previous: threading.Event | None = None  # set when the last async one is done
        self._worker: StoreWorker | None = None  # runs a sync call's bounded operations
        self.ended_elsewhere = False
        self.expires_at: float | None = None
        # The call takes the key: calls made inside its attempts must not share its record.
        self._token: Token[str | None] | None = _KEY.set(None)

    @classmethod
    def open(
        cls,
        store: Store | None,
        policy: RetryPolicy,
        clock: Clock,
        deadline_left: Callable[[], float | None],
    ) -> ResumableRun | None:
        """A `ResumableRun` for a call starting now, or ``None`` without a store or a key.

        ``deadline_left`` tells the time the call's deadline leaves (``None``: no deadline).
        """
        if store is None:
            return None
        key = _KEY.get()
        return None if key is None else cls(store, key, policy, clock, deadline_left)

    # -- the steps ------------------------------------------------------------------------------

    def load(self, state: CallState) -> tuple[float, RetryReason | None]:
        """Adopt the stored progress into ``state``: the wait before the next attempt, and why
        the call must stop without one (``max_attempts``, ``budget_exhausted``,
        ``deadline_exceeded``) or ``None``."""
        answer = self._answer("load", self._load_operation(), 0.5)
        policy = self._policy
        if isinstance(answer, Unreadable):
            _logger.warning(
                "%s: resume record unreadable (%s); dropped: the call runs as fresh",
                policy.name,
                answer.why,
            )
            return 0.0, None
        record = answer
        if record is None:
            return 0.0, None
        self._recorded = True
        state.attempt = record.attempts
        state.delay_so_far = record.delay_so_far
        self.expires_at = record.expires_at
        now = self._clock.wall()
        # The rest of a backoff that a restart interrupted is still waited, so that a crash
        # loop does not hammer; never longer than this policy's own delay before that retry
        # (a record of an older policy, a wall clock that went back).
        wait = 0.0 if record.next_at is None else max(record.next_at - now, 0.0)
        wait = min(wait, policy.delay_for(max(record.attempts, 1)))
        left = self._deadline_left()
        stop: RetryReason | None = None
        if record.attempts >= policy.attempts:
            stop = "max_attempts"
            self._leaves = True  # the last attempts may still be running elsewhere
        elif record.expires_at is not None and now + wait > record.expires_at:
            stop = "budget_exhausted"
        elif left is not None and wait >= left:
            stop = "deadline_exceeded"
            self._leaves = True  # a process with more time may go on
        budget = (
            ""
            if record.expires_at is None
            else f"; budget expires in {record.expires_at - now:.3g}s"
        )
        _logger.warning(
            "%s resumed after %d attempt(s) and %.3gs of backoff in earlier processes%s%s",
            policy.name,
            record.attempts,
            record.delay_so_far,
            budget,
            "" if stop is None else f"; stopping: {stop}",
        )
        return wait, stop

    def claim(self, state: CallState) -> int | None:
        """Claim the next attempt; its number counts every process's attempts for the key.

        ``None`` when no attempt is left (other processes took the last ones) or another
        process ended the call: this process then stops and leaves the record as it is.
        """
        if self._broken:
            return state.attempt + 1
        claim = self._answer("claim", self._claim_operation(state), 0.5)
        if self._broken:  # it failed just now
            return state.attempt + 1
        self._leaves = True  # until this process holds an attempt
        if claim is None:
            self.ended_elsewhere = True
            return None
        self._recorded = True
        record = claim.record
        if record.expires_at is not None:
            self.expires_at = record.expires_at
        # Another process may have added backoff since this one read the record.
        state.delay_so_far = max(state.delay_so_far, record.delay_so_far)
        if claim.number is None:
            return None
        self._leaves = False
        return claim.number

    def leave_record(self) -> None:
        """This process stops the call without an attempt of its own, for want of time: its
        record stays as it is, for a process that has the time (as `load` leaves it when the
        next attempt is due past the deadline)."""
        self._leaves = True

    def allows(self, delay: float) -> bool:
        """Whether a retry ``delay`` from now starts before the budget's wall-clock expiry."""
        budget = self._policy.retry_budget
        if budget is None:
            return True
        now = self._clock.wall()
        if self.expires_at is None:
            self.expires_at = now + budget  # the first failure sets the expiry
        return now + delay <= self.expires_at

    def add_failure(self, delay: float) -> None:
        """Record a scheduled retry: its backoff, the expiry, when the next attempt is due.

        In an async call the write waits for `write_async`, which the driver awaits before
        the backoff sleep.
        """
        now = self._clock.wall()
        if self.expires_at is None and self._policy.retry_budget is not None:
            self.expires_at = now + self._policy.retry_budget
        store, key, expires_at = self._store, self._key, self.expires_at

        def write() -> ResumeRecord | None:
            return store.add_failure(
                key, now, delay=delay, expires_at=expires_at, next_at=now + delay
            )

        if self._deferred:
            self._pending = write
        else:
            self._adopt_failure(self._run("add_failure", write, 0.5))

    def finish(self, ended: bool) -> None:
        """The call is over: end its record if it ``ended`` (success or give-up).

        A call cut short by cancellation, ``KeyboardInterrupt`` or ``SystemExit`` keeps its
        record, so that the next process resumes it; so does a process that ran none of the
        call's last attempts (`claim`). After `end_async`, only the key is given back.
        """
        token, self._token = self._token, None
        if token is not None:
            # A call ending in another context than it began in leaves that context alone.
            with contextlib.suppress(ValueError):
                _KEY.reset(token)
        if not self._finished:
            self._finished = True
            operation = self._end_operation(ended)
            if operation is not None and (self._broken or self._out_of_time()):
                # Worth one more try, not worth waiting for: after this call's other
                # operations, in its worker (or a thread of its own without a deadline).
                self._unwatched("end", self._worker_of().submit(operation))
            elif operation is not None:
                self._run("end", operation, 1.0)
        if self._worker is not None:
            self._worker.close()  # its thread ends after the operations queued

    # -- the async driver's steps: the same operations, in a worker thread ------------------

    async def load_async(self) -> None:
        """Read the record off the event loop, for `load`; the call's writes then wait for
        `write_async` and `end_async`."""
        self._deferred = True
        answer = await self._run_async("load", self._load_operation(), 0.5)
        self._fetched = Fetched("load", answer)

    async def claim_async(self, state: CallState) -> None:
        """Claim the next attempt off the event loop, for `claim`."""
        if not self._broken:
            answer = await self._run_async("claim", self._claim_operation(state), 0.5)
            self._fetched = Fetched("claim", answer)

    async def write_async(self) -> None:
        """Make the write `add_failure` left, off the event loop."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._adopt_failure(await self._run_async("add_failure", pending, 0.5))

    async def end_async(self, ended: bool) -> None:
        """`finish`'s store I/O off the event loop, shielded from cancellation (it is bounded);
        the driver's `finish` then only gives the key back."""
        self._pending = None
        if self._finished:
            return
        self._finished = True
        operation = self._end_operation(ended)
        if operation is None:
            return
        if self._broken or self._out_of_time():
            self._unwatched("end", _start(self._ordered(operation)))
            return
        with anyio.CancelScope(shield=True):
            await self._run_async("end", operation, 1.0)

    def exhausted(self, attempts: int, reason: RetryReason) -> ResumeExhausted:
        """The error of a resumed call that stops before any attempt of its own."""
        why = (
            "another process ended the call"
            if self.ended_elsewhere
            else f"{attempts} of {self._policy.attempts} attempt(s) used or taken by other "
            "processes"
            if reason == "max_attempts"
            else "the next attempt is due after this call's deadline"
            if reason == "deadline_exceeded"
            else "the retry budget expired before the next attempt was due"
        )
        return ResumeExhausted(
            f"resumed call of policy {self._policy.name!r} stopped: {why} [{reason}]",
            attempts=attempts,
            reason=reason,
        )

    # -- the operations -----------------------------------------------------------------------

    # Each is built on the caller's thread (the clock and the state are read there) and may
    # run in a worker thread.

    def _load_operation(self) -> Callable[[], ResumeRecord | Unreadable | None]:
        store, key, now = self._store, self._key, self._clock.wall()

        def load() -> ResumeRecord | Unreadable | None:
            try:
                return store.load(key, now)
            except ValueError as error:  # CorruptRecord: a record no retrymw process wrote
                return Unreadable(safe_repr(str(error), 120))

        return load

    def _claim_operation(self, state: CallState) -> Callable[[], Claim | None]:
        from ..stores._base import ResumeRecord

        # What this process knows rebuilds a record the store lost; None for a call that has
        # not seen its record (a tombstone is then an earlier call with the same key).
        known = (
            ResumeRecord(state.attempt, state.delay_so_far, self.expires_at, None)
            if self._recorded
            else None
        )
        store, key, now, limit = self._store, self._key, self._clock.wall(), self._policy.attempts
        return lambda: store.claim(key, now, limit=limit, known=known)

    def _end_operation(self, ended: bool) -> Callable[[], None] | None:
        """The end of the record, or ``None`` when this process must leave it as it is."""
        if not ended or self._leaves:
            return None
        store, key, now = self._store, self._key, self._clock.wall()
        policy = self._policy
        # The tombstone lasts as long as another process of the call may take to claim again:
        # one backoff and one attempt (bounded by the retention when nothing bounds attempts).
        attempt = policy.timeout or policy.deadline or store.retention
        linger = min(store.retention, policy.max_delay + attempt + 60.0)
        return lambda: store.end(key, now, linger=linger)

    def _adopt_failure(self, record: ResumeRecord | None) -> None:
        if record is not None and record.expires_at is not None:
            self.expires_at = record.expires_at

    # -- bounded I/O ----------------------------------------------------------------------------

    def _answer(self, what: str, operation: Callable[[], T], share: float) -> T | None:
        """The async driver's answer for this step if it fetched one, else the store's now."""
        fetched, self._fetched = self._fetched, None
        if fetched is not None and fetched.what == what:
            return cast("T | None", fetched.answer)
        if self._deferred:  # never block the event loop: an unfetched step runs in memory
            return None
        return self._run(what, operation, share)

    def _out_of_time(self) -> bool:
        """Whether the call's deadline has passed: its last operation is then not waited for
        (nothing failed, so nothing is logged unless it does)."""
        left = self._deadline_left()
        return left is not None and left <= 0.0

    def _unwatched(self, what: str, future: Future[Any]) -> None:
        """Log the failure of an operation the call no longer waits for, once it fails (a
        store that already failed during this call was logged then)."""
        if self._broken:
            return

        def told(done: Future[Any]) -> None:
            error = done.exception()
            if isinstance(error, Exception):
                _logger.warning(
                    "resume store %s failed during %s, after the call ended (%s: %s); "
                    "the record stays until its retention passes",
                    safe_repr(self._store, 120),
                    what,
                    type(error).__name__,
                    safe_repr(str(error), 200),
                )

        future.add_done_callback(told)

    def _bound(self, share: float) -> float | None:
        """How long an operation may take: ``share`` of what the deadline leaves, if any."""
        left = self._deadline_left()
        return None if left is None else max(left, 0.0) * share

    def _worker_of(self) -> StoreWorker:
        worker = self._worker
        if worker is None:
            worker = self._worker = StoreWorker()
        return worker

    def _ordered(self, operation: Callable[[], T]) -> Callable[[], T]:
        """``operation``, made to start only once this call's previous async operation is
        done (one that the call stopped waiting for may still be running in its thread)."""
        previous, done = self._previous, threading.Event()
        self._previous = done

        def ordered() -> T:
            try:
                if previous is not None:
                    previous.wait()
                return operation()
            finally:
                done.set()

        return ordered

    def _run(self, what: str, operation: Callable[[], T], share: float) -> T | None:
        """Run a store operation for a sync step: here without a deadline, else in the call's
        `StoreWorker`, waited for at most its bound. ``None`` when the store failed (logged)."""
        if self._broken:
            return None
        bound = self._bound(share)
        try:
            if bound is None:
                return operation()
            future = self._worker_of().submit(operation)
            if not wait([future], timeout=bound).done:
                self._fail(what, _late(bound))
                return None
            return future.result()
        except Exception as error:
            self._fail(what, error)
        return None

    async def _run_async(self, what: str, operation: Callable[[], T], share: float) -> T | None:
        """Run a store operation in a worker thread, waited for at most its bound.

        The thread is abandoned, never waited for, when the bound passes or the call is
        cancelled. ``None`` when the store failed (logged).
        """
        if self._broken:
            return None
        bound = self._bound(share)
        ordered = self._ordered(operation)
        try:
            if bound is None:
                return await anyio.to_thread.run_sync(ordered, abandon_on_cancel=True)
            if bound > 0.0:
                with anyio.move_on_after(bound):
                    return await anyio.to_thread.run_sync(ordered, abandon_on_cancel=True)
            else:
                _start(ordered)  # nothing left to wait: it runs on, in order, unwatched
            self._fail(what, _late(bound))
        except Exception as error:
            self._fail(what, error)
        return None

    def _fail(self, what: str, error: Exception) -> None:
        self._broken = True
        _logger.warning(
            "resume store %s failed during %s (%s: %s); the call goes on with its state in memory",
            safe_repr(self._store, 120),
            what,
            type(error).__name__,
            safe_repr(str(error), 200),
        )


def _late(bound: float) -> TimeoutError:
    return TimeoutError(
        f"no answer within {bound:.3g}s, the share of the call's deadline it may take"
    )


class StoreWorker:
    """The thread that runs a sync call's store operations, one at a time, in order.

    Started by the first operation; its thread ends once the call is over (`close`) and the
    operations queued are done, or after a minute without any. An operation the call stopped
    waiting for goes on here, and the call's next ones wait their turn behind it.
    """

    __slots__ = ("_closed", "_jobs", "_lock", "_running")

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running = False
        self._closed = False

    def submit(self, operation: Callable[[], T]) -> Future[T]:
        """Queue ``operation``; its outcome lands in the returned future."""
        future: Future[T] = Future()

        def job() -> None:
            try:
                future.set_result(operation())
            except BaseException as error:  # kept in the future; nobody may be waiting for it
                future.set_exception(error)

        with self._lock:
            self._jobs.put(job)
            if not self._running:
                self._running = True
                threading.Thread(target=self._serve, name="retrymw-store", daemon=True).start()
        return future

    def close(self) -> None:
        """No more operations: the thread ends when the queued ones are done."""
        with self._lock:
            self._closed = True
            if self._running:
                self._jobs.put(_NOTHING)

    def _serve(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=_IDLE)
            except queue.Empty:
                job = _NOTHING
            with self._lock:
                if job is _NOTHING and (self._closed or self._jobs.empty()):
                    self._running = False
                    return
            job()


def _nothing() -> None:
    return None


_NOTHING = _nothing  # what ends a `StoreWorker`'s thread
_IDLE = 60.0  # seconds a `StoreWorker`'s thread waits for an operation before it ends


def _start(operation: Callable[[], T]) -> Future[T]:
    """Run ``operation`` in a new daemon thread; its outcome lands in the returned future."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(operation())
        except BaseException as error:  # kept in the future; nobody may be waiting for it
            future.set_exception(error)

    threading.Thread(target=run, name="retrymw-store", daemon=True).start()
    return future
