"""Resume across restarts: the ``resume(key)`` scope and `ResumableRun`, a call's view of a store.

`ResumableRun` is everything the engine asks of a durable store, in four synchronous steps: load
the record when the call starts, claim each attempt, add each scheduled backoff, and end the
call. A store that fails mid-call never changes the call's result: the error is logged once,
the call goes on with its state in memory, and only the final delete is still tried.
"""

from __future__ import annotations

import contextlib
import logging
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

from .errors import ConfigError, RetrymwError
from .redact import safe_repr

if TYPE_CHECKING:
    from ..stores import ResumeRecord, Store
    from .clock import Clock
    from .events import RetryReason
    from .policy import CallState, RetryPolicy

__all__ = ["ResumableRun", "ResumeExhausted", "current_resume_key", "resume"]

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
    attempts are used (``reason`` ``max_attempts``) or the retry budget expired
    (``budget_exhausted``; the call then raises `RetryBudgetExhausted` caused by this error).

    .. versionadded:: 0.2
    """

    def __init__(self, message: str, *, attempts: int, reason: RetryReason) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.reason = reason


class ResumableRun:
    """One call's durable progress: what the engine reads from and writes to a `Store`.

    Created per call that has a resume key and a store; every method is synchronous and never
    raises a store error (see the module docstring).
    """

    __slots__ = (
        "_broken",
        "_clock",
        "_key",
        "_policy",
        "_recorded",
        "_store",
        "_token",
        "ended_elsewhere",
        "expires_at",
    )

    def __init__(self, store: Store, key: str, policy: RetryPolicy, clock: Clock) -> None:
        from ..stores._base import digest

        self._store = store
        self._key = digest(key)
        self._policy = policy
        self._clock = clock
        self._broken = False
        self._recorded = False  # whether the store holds this call's record
        self.ended_elsewhere = False
        self.expires_at: float | None = None
        # The call takes the key: calls made inside its attempts must not share its record.
        self._token: Token[str | None] | None = _KEY.set(None)

    @classmethod
    def open(cls, store: Store | None, policy: RetryPolicy, clock: Clock) -> ResumableRun | None:
        """A `ResumableRun` for a call starting now, or ``None`` without a store or a key."""
        if store is None:
            return None
        key = _KEY.get()
        return None if key is None else cls(store, key, policy, clock)

    def load(self, state: CallState) -> tuple[float, RetryReason | None]:
        """Adopt the stored progress into ``state``: the wait before the next attempt, and why
        the call must stop without one (``max_attempts``, ``budget_exhausted``) or ``None``."""
        now = self._clock.wall()
        record = self._call("load", self._store.load, self._key, now)
        if record is None:
            return 0.0, None
        self._recorded = True
        state.attempt = record.attempts
        state.delay_so_far = record.delay_so_far
        self.expires_at = record.expires_at
        # The rest of a backoff that a restart interrupted is still waited (never more than
        # max_delay, in case the wall clock jumped back): a crash loop does not hammer.
        wait = (
            0.0
            if record.next_at is None
            else min(max(record.next_at - now, 0.0), self._policy.max_delay)
        )
        stop: RetryReason | None = None
        if record.attempts >= self._policy.attempts:
            stop = "max_attempts"
        elif record.expires_at is not None and now + wait > record.expires_at:
            stop = "budget_exhausted"
        left = (
            ""
            if record.expires_at is None
            else f"; budget expires in {record.expires_at - now:.3g}s"
        )
        _logger.warning(
            "%s resumed after %d attempt(s) and %.3gs of backoff in earlier processes%s%s",
            self._policy.name,
            record.attempts,
            record.delay_so_far,
            left,
            "" if stop is None else f"; stopping: {stop}",
        )
        return wait, stop

    def claim(self, state: CallState) -> int | None:
        """Claim the next attempt; its number counts every process's attempts for the key.

        ``None`` when another process ended the call meanwhile (its record is gone).
        """
        if self._broken:
            return state.attempt + 1
        create = not self._recorded
        record = self._call(
            "claim",
            lambda: self._store.claim(self._key, self._clock.wall(), create=create),
        )
        if record is None:
            if self._broken or create:
                return state.attempt + 1
            self.ended_elsewhere = True
            return None
        self._recorded = True
        if record.expires_at is not None:
            self.expires_at = record.expires_at
        # Another process may have added backoff since this one read the record.
        state.delay_so_far = max(state.delay_so_far, record.delay_so_far)
        return max(record.attempts, state.attempt + 1)

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
        """Record a scheduled retry: its backoff, the expiry, when the next attempt is due."""
        now = self._clock.wall()
        if self.expires_at is None and self._policy.retry_budget is not None:
            self.expires_at = now + self._policy.retry_budget
        record = self._call(
            "add_failure",
            lambda: self._store.add_failure(
                self._key, now, delay=delay, expires_at=self.expires_at, next_at=now + delay
            ),
        )
        if record is not None and record.expires_at is not None:
            self.expires_at = record.expires_at

    def finish(self, ended: bool) -> None:
        """The call is over: delete its record if it ``ended`` (success or give-up).

        A call cut short by cancellation, ``KeyboardInterrupt`` or ``SystemExit`` keeps its
        record, so that the next process resumes it.
        """
        token, self._token = self._token, None
        if token is not None:
            # A call ending in another context than it began in leaves that context alone.
            with contextlib.suppress(ValueError):
                _KEY.reset(token)
        if ended:
            self._broken = False  # the delete is worth one more try: a stale record misleads
            self._call("delete", self._store.delete, self._key)

    def exhausted(self, attempts: int, reason: RetryReason) -> ResumeExhausted:
        """The error of a resumed call that stops before any attempt of its own."""
        why = (
            "another process ended the call"
            if self.ended_elsewhere
            else f"{attempts} of {self._policy.attempts} attempt(s) used, some in other processes"
            if reason == "max_attempts"
            else "the retry budget expired before the next attempt was due"
        )
        return ResumeExhausted(
            f"resumed call of policy {self._policy.name!r} stopped: {why} [{reason}]",
            attempts=attempts,
            reason=reason,
        )

    def _call(self, what: str, method: object, *args: object) -> ResumeRecord | None:
        if self._broken:
            return None
        try:
            return method(*args)  # type: ignore[operator, no-any-return]
        except Exception as error:
            self._broken = True
            _logger.warning(
                "resume store %s failed during %s (%s: %s); "
                "the call goes on with its state in memory",
                safe_repr(self._store, 120),
                what,
                type(error).__name__,
                safe_repr(str(error), 200),
            )
            return None
