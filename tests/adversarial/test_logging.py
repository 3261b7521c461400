"""Log lines read ``retrymw: …`` once, however logging is configured.

The rule: retrymw's messages never carry a prefix of their own; the logger's name is the
prefix. A ``%(name)s: %(message)s`` format (or ``basicConfig``'s default,
``%(levelname)s:%(name)s:%(message)s``) names it once, and with no logging configured at all
retrymw's records go to stderr as Python's last resort would write them, with ``retrymw: ``
in front.
"""

from __future__ import annotations

import ast
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import retrymw
from retrymw import CircuitBreaker, Retrier, RetryPolicy
from retrymw._core.events import BreakerStateChanged, RetryDenied, RetryScheduled
from retrymw.instrumentation import Instrument, LoggingInstrument
from retrymw.testing import FakeClock

NAMED = logging.Formatter("%(name)s: %(message)s")
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}


class Exploding(Instrument):
    """An instrument whose every call start raises: retrymw disables it and logs why."""

    def call_started(self, event: object, /) -> None:
        raise RuntimeError("instrument bug")


def test_every_record_reads_retrymw_once_when_the_name_is_formatted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Retries, give-ups, breaker transitions, a disabled instrument and a failing breaker
    listener: formatted as ``%(name)s: %(message)s``, each line names retrymw once."""
    clock = FakeClock()
    instrument = LoggingInstrument()
    breaker = CircuitBreaker(name="db", failure_threshold=1, clock=clock)

    def listener(event: object) -> None:
        raise RuntimeError("listener bug")

    breaker.add_listener(listener)
    retrier = Retrier(
        RetryPolicy(attempts=2), clock=clock, instruments=(instrument, Exploding()), budget=None
    )

    def pay() -> None:
        raise ConnectionError("connection reset")

    with caplog.at_level(logging.DEBUG, logger="retrymw"):
        with pytest.raises(ConnectionError):
            retrier.call_sync(pay)
        instrument.retry_scheduled(RetryScheduled("p", "t", "op", 1, 3, 0.5, "503"))
        instrument.retry_denied(RetryDenied("p", "t", "op", 2, 3, "max_attempts", "503"))
        instrument.breaker_state_changed(BreakerStateChanged("db", "closed", "open", 1.0))
        breaker.record_failure()
    records = [record for record in caplog.records if record.name == "retrymw"]
    messages = [record.getMessage() for record in records]
    assert any("has been disabled" in message for message in messages)
    assert any("breaker listener" in message for message in messages)
    assert any(message.startswith("pay attempt 1/2 failed") for message in messages)
    for record in records:
        line = NAMED.format(record).splitlines()[0]
        assert line.startswith("retrymw: ")
        assert line.count("retrymw:") == 1, line


def test_no_log_call_in_the_package_repeats_the_logger_name() -> None:
    """No logging call anywhere in retrymw starts its message with ``retrymw:``: the logger's
    name is the prefix (errors and exception notes may still say it; they have no name)."""
    package = Path(retrymw.__file__).parent
    offenders = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in LOG_METHODS
                and node.args
            ):
                continue
            message = (
                node.args[1] if node.func.attr == "log" and len(node.args) > 1 else node.args[0]
            )
            text = _leading_text(message)
            if text is not None and text.lstrip().lower().startswith("retrymw:"):
                offenders.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    assert offenders == []


def _leading_text(node: ast.expr) -> str | None:
    """The literal text a message expression starts with, if it starts with one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _leading_text(node.values[0])
    if isinstance(node, ast.BinOp):  # "..." % args, "..." + ...
        return _leading_text(node.left)
    return None


SCRIPT = textwrap.dedent(
    """
    import logging
    import sys

    if sys.argv[1] == "basic":
        logging.basicConfig(format="%(name)s: %(message)s")
    elif sys.argv[1] == "default":
        logging.basicConfig()

    from retrymw import Retrier, RetryPolicy
    from retrymw.instrumentation import LoggingInstrument
    from retrymw.testing import FakeClock

    retrier = Retrier(
        RetryPolicy(attempts=2), clock=FakeClock(), instruments=(LoggingInstrument(),), budget=None
    )

    def pay():
        raise ConnectionError("connection reset")

    try:
        retrier.call_sync(pay)
    except ConnectionError:
        pass
    logging.getLogger("retrymw").debug("below the last resort's level: never shown")
    """
)

LINES = [
    "pay attempt 1/2 failed with ConnectionError: connection reset; retrying in 1s",
    "pay giving up after attempt 2/2 with ConnectionError: max_attempts",
]


@pytest.mark.parametrize(
    ("setup", "prefix"),
    [
        pytest.param("basic", "retrymw: ", id="basicConfig-name-message"),
        pytest.param("default", "WARNING:retrymw:", id="basicConfig-default-format"),
        pytest.param("none", "retrymw: ", id="no-configuration"),
    ],
)
def test_a_process_logs_each_line_with_one_prefix(setup: str, prefix: str, tmp_path: Path) -> None:
    """In a fresh process, under ``basicConfig(format="%(name)s: %(message)s")``,
    ``basicConfig()`` and no configuration at all, stderr holds exactly the retry and give-up
    lines, each naming retrymw once."""
    script = tmp_path / "log_once.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), setup],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(retrymw.__file__).parent.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [prefix + line for line in LINES]
