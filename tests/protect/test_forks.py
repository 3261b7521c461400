"""Fork safety: a child forked while other threads hold a protection object's lock still works.

Each test forks real children (``os.fork``), bounded: every child must exit 0 within a timeout,
and the parent reaps them with a bounded wait and kills any straggler by its pid.
"""

from __future__ import annotations

import contextvars
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

import pytest

from retrymw import CircuitBreaker, RetryBudget
from retrymw._protect.targets import PerTarget
from retrymw._protect.throttle import AdaptiveThrottle

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
    # Python 3.12+ warns about fork() in a multi-threaded process: forking there is the point.
    pytest.mark.filterwarnings("ignore:.*use of fork.*may lead to deadlocks:DeprecationWarning"),
]

CHILD_TIMEOUT = 10.0  # seconds for all children together; a healthy child needs milliseconds


def fork_child(body: Callable[[], bool]) -> int:
    """Fork a child that runs ``body`` and exits 0 if it returned True, 1 otherwise."""
    # A tracer (coverage.py) has locks of its own that another thread may hold at the fork; the
    # child is not measured anyway, so it runs untraced and only retrymw's locks are tested.
    tracer = sys.gettrace()
    sys.settrace(None)
    try:
        pid = os.fork()
    except OSError:
        sys.settrace(tracer)
        raise
    if pid:
        sys.settrace(tracer)
    if pid == 0:  # pragma: no cover - runs in the child, whose coverage is not collected
        code = 1
        try:
            code = 0 if body() else 1
        finally:
            os._exit(code)
    return pid


def reap(pids: list[int], timeout: float = CHILD_TIMEOUT) -> dict[int, int | None]:
    """Wait for every child up to ``timeout``; kill the rest. Returns pid → exit code or None."""
    codes: dict[int, int | None] = {}
    deadline = time.monotonic() + timeout
    waiting = set(pids)
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                codes[pid] = os.waitstatus_to_exitcode(status)
                waiting.discard(pid)
        time.sleep(0.005)
    for pid in waiting:  # hung (deadlocked) children: kill by pid, then reap
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        codes[pid] = None
    return codes


def test_children_forked_under_load_never_deadlock() -> None:
    """100 forks while 4 threads hammer every kind of lock owner: every child exits 0."""
    budget = RetryBudget()
    breaker = CircuitBreaker(failure_threshold=None, window=10, minimum_calls=10)
    breakers = PerTarget(CircuitBreaker(), max_targets=4)
    throttle = AdaptiveThrottle()
    per_target = PerTarget(RetryBudget(), max_targets=4)
    stop = threading.Event()

    def hammer(index: int) -> None:
        keys = [f"host-{n}" for n in range(8)]
        while not stop.is_set():
            budget.record_success()
            budget.try_acquire()
            budget.statistics()
            if breaker.allow_request():
                breaker.record_failure()
            breaker.statistics()
            breakers.for_target(keys[index % 8]).statistics()
            if throttle.allow_request():
                throttle.record_success()
            per_target.for_target(keys[index % 8]).try_acquire()
            index += 1

    def child() -> bool:
        budget.record_success()
        budget.try_acquire()
        breaker.allow_request()
        breaker.record_success()
        breakers.for_target("child").record_failure()
        throttle.allow_request()
        throttle.record_failure()
        per_target.for_target("child").try_acquire()
        assert per_target.statistics()["child"].acquired >= 1  # type: ignore[union-attr]
        return budget.statistics().deposits > 0 and breaker.statistics().successes > 0

    threads = [threading.Thread(target=hammer, args=(n,), daemon=True) for n in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so a lock is often held at the fork
    pids: list[int] = []
    try:
        for thread in threads:
            thread.start()
        for _ in range(100):
            pids.append(fork_child(child))
            time.sleep(0.001)
    finally:
        sys.setswitchinterval(interval)
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
        codes = reap(pids)
    hung = [pid for pid, code in codes.items() if code is None]
    failed = [pid for pid, code in codes.items() if code not in (0, None)]
    assert (len(hung), len(failed)) == (0, 0), f"hung: {len(hung)}, failed: {len(failed)}"


def test_a_probe_in_flight_in_another_thread_does_not_block_the_child() -> None:
    """A half-open breaker whose probe belongs to a parent thread admits a probe in the child.

    The thread that holds the probe does not exist in the child, so its verdict can never come:
    the child starts a fresh half-open period instead of waiting for it forever.
    """
    breaker = CircuitBreaker(failure_threshold=1, recovery_timeout=0.001)
    breaker.record_failure()
    time.sleep(0.01)
    # Admitted in a context of its own, as another thread's attempt would be.
    assert contextvars.Context().run(breaker.allow_request)
    assert not breaker.allow_request()  # the parent keeps waiting for that probe's verdict

    def child() -> bool:
        return breaker.allow_request() and breaker.statistics().probes_in_flight == 1

    codes = reap([fork_child(child)])
    assert list(codes.values()) == [0]
    assert breaker.statistics().probes_in_flight == 1  # the parent's probe is untouched


def test_locks_off_the_hot_path_are_released_in_a_child() -> None:
    """Locks held at fork (a config, the default instruments, a label set) are free in the child."""
    from retrymw import instrumentation, load_config
    from retrymw.instrumentation._cardinality import BoundedValues

    config = load_config({"policies": {"p": {"attempts": 2}}})
    labels = BoundedValues(2, "_other")
    held = (config._lock, instrumentation._builtin_lock, labels._lock)
    for lock in held:
        lock.__enter__()
    try:
        pid = os.fork()
        if pid == 0:  # the child: every lock must be free, or this hangs until the parent kills it
            config.retrier("p")
            labels("a")
            instrumentation.default_instruments()
            os._exit(0)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                assert os.waitstatus_to_exitcode(status) == 0
                break
            time.sleep(0.01)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the child deadlocked on a lock held at fork")
    finally:
        for lock in held:
            lock.__exit__(None, None, None)
