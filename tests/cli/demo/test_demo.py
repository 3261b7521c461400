"""``retrymw demo`` and its parts: the upstream, the console, the progress line, the traces."""

from __future__ import annotations

import asyncio
import io
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider

from retrymw import CallFinished, CircuitBreaker, Retrier, RetryBudget, RetryPolicy
from retrymw._core.events import CallOutcome
from retrymw.cli import build_parser, main
from retrymw.cli._common import human_duration, percent, silence
from retrymw.cli.demo._command import _script
from retrymw.cli.demo._console import Console
from retrymw.cli.demo._report import DemoStats, percentile, progress_line, summary
from retrymw.cli.demo._run import DemoRun
from retrymw.cli.demo._trace import CallTrace, SummaryProcessor, otlp_protocol, setup_tracing
from retrymw.cli.demo._upstream import FlakyUpstream, Outage, UpstreamScript
from retrymw.httpx import AsyncRetryTransport
from retrymw.instrumentation import OpenTelemetryInstrument
from retrymw.testing import FakeClock

REPO = Path(__file__).resolve().parents[3]
WAIT = 60.0  # the longest any subprocess may take; the demo ones take ~5-10 s


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RETRYMW_"))}
    return {**env, "PYTHONIOENCODING": "utf-8", **extra}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``main(args)`` in this process; return the exit code, stdout and stderr."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# -- demo ------------------------------------------------------------------------------------------


class _Lines:
    """Reads a subprocess's stdout on a thread, so waits for a line are bounded."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(target=self._pump, args=(stdout,), daemon=True).start()

    def _pump(self, stream: io.TextIOBase) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        """The first line matching ``pattern``; fails after ``timeout`` seconds."""
        while True:
            for line in self.seen:
                found = re.search(pattern, line)
                if found:
                    return found
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"no line matching {pattern!r} in {timeout}s: {self.seen}")
            if item is None:
                pytest.fail(f"stdout closed without {pattern!r}: {self.seen}")
            self.seen.append(item)

    def rest(self, timeout: float = WAIT) -> str:
        """Everything until stdout closes."""
        while (rest := self._queue.get(timeout=timeout)) is not None:
            self.seen.append(rest)
        return "".join(self.seen)


@pytest.fixture
def demo_process(request: pytest.FixtureRequest) -> Iterator[tuple[subprocess.Popen[str], _Lines]]:
    """``retrymw demo`` started with the test's arguments; killed if the test leaves it running."""
    process = subprocess.Popen(
        [sys.executable, "-m", "retrymw", "demo", *request.param],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        yield process, _Lines(process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=WAIT)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _scrape(url: str, tries: int = 40) -> str:
    """GET /metrics until the call counts show up (bounded)."""
    text = ""
    for _ in range(tries):
        with urllib.request.urlopen(url, timeout=5) as response:
            text = str(response.read().decode())
        if "retrymw_call_duration_seconds_count{" in text:
            return text
        threading.Event().wait(0.25)
    return text


@pytest.mark.parametrize(
    "demo_process",
    [pytest.param(["--duration", "5s", "--metrics-port", "0"], id="5s")],
    indirect=True,
)
def test_demo_serves_metrics_while_it_runs_and_ends_with_a_summary(
    demo_process: tuple[subprocess.Popen[str], _Lines],
) -> None:
    """The demo prints its /metrics URL, serves the call and attempt counts (the duration
    histograms' ``_count``; the retired counters are gone), and ends with the summary."""
    process, lines = demo_process
    url = lines.wait_for(r"^metrics: (http://127\.0\.0\.1:\d+/metrics)$").group(1)
    metrics = _scrape(url)
    calls = r'^retrymw_call_duration_seconds_count\{.*retrymw_policy="demo"'
    assert re.search(calls, metrics, re.MULTILINE)
    assert "retrymw_attempt_duration_seconds_count{" in metrics
    assert "retrymw_calls_total" not in metrics
    assert "retrymw_attempts_total" not in metrics
    output = lines.rest()
    assert process.wait(timeout=WAIT) == 0
    for row in ("calls", "attempts", "amplification", "outcomes", "breaker", "latency"):
        assert re.search(rf"^{row}\s", output, re.MULTILINE), output
    assert re.search(r"p50 \S+ · p95 \S+ · p99 \S+", output)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child needs POSIX signals")
@pytest.mark.parametrize(
    "demo_process",
    [pytest.param(["--forever", "--metrics-port", "0", "--outage", "none"], id="forever")],
    indirect=True,
)
def test_demo_forever_stops_cleanly_on_ctrl_c(
    demo_process: tuple[subprocess.Popen[str], _Lines],
) -> None:
    """SIGINT ends a --forever demo with the summary table and exit code 0."""
    process, lines = demo_process
    lines.wait_for(r"^metrics: http://")
    lines.wait_for(r"^load: ")  # printed once the demo handles SIGINT itself
    process.send_signal(signal.SIGINT)
    output = lines.rest()
    assert process.wait(timeout=WAIT) == 0
    assert "stopping: finishing the calls in flight" in output
    assert re.search(r"^calls\s+[\d,]+ \(", output, re.MULTILINE)
    assert process.stderr is not None
    assert "Traceback" not in process.stderr.read()


def test_demo_in_process_prints_progress_traces_and_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A short demo with an early outage prints its events, traces and the summary."""
    code, out, err = cli(
        capsys,
        "demo",
        *("--duration", "2s", "--metrics-port", "0", "--rate", "40", "--seed", "1"),
        *("--outage", "500ms:1s", "--traces", "all", "--latency", "5ms"),
    )
    assert code == 0, err
    assert "upstream outage begins" in out
    assert re.search(r"trace [0-9a-f]{8}  GET ", out)
    assert "retrymw demo: " in out
    assert re.search(r"^upstream\s+[\d,]+ responses; by status 200: ", out, re.MULTILINE)


def test_demo_reports_a_busy_metrics_port(capsys: pytest.CaptureFixture[str]) -> None:
    """A metrics port in use is one line naming it and the way out, exit 1."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = cli(capsys, "demo", "--duration", "1s", "--metrics-port", str(port))
    assert code == 1
    assert err.startswith(f"retrymw demo: error: cannot serve /metrics on 127.0.0.1:{port}: ")
    assert err.strip().endswith("(pass --metrics-port 0 for a free port)")


def test_demo_reports_a_metrics_host_that_is_not_this_machine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An address of another machine is one line naming it and --metrics-host, not the port."""
    args = ("--duration", "1s", "--metrics-host", "192.0.2.1", "--metrics-port", "9464")
    code, _, err = cli(capsys, "demo", *args)  # 192.0.2.1: TEST-NET-1, never a local address
    assert code == 1
    assert err.startswith("retrymw demo: error: cannot serve /metrics on 192.0.2.1:9464: ")
    assert err.strip().endswith("(--metrics-host wants an address of this machine, e.g. 127.0.0.1)")


# -- the demo's parts ----------------------------------------------------------------------------


def test_otlp_endpoint_without_the_exporter_falls_back_to_the_console(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With OTEL_EXPORTER_OTLP_ENDPOINT set and no exporter, one notice says what to install."""
    monkeypatch.setattr("retrymw.cli.demo._trace._otlp_exporter", lambda protocol: None)
    tracing = setup_tracing(lambda trace: None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4317"})
    assert tracing.console
    assert tracing.notice is not None
    assert "pip install opentelemetry-exporter-otlp" in tracing.notice
    tracing.shutdown()


def test_otlp_endpoint_with_an_exporter_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    """With an exporter available, spans go to it and nothing is printed."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    monkeypatch.setattr("retrymw.cli.demo._trace._otlp_exporter", lambda protocol: exporter)
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}
    tracing = setup_tracing(lambda trace: None, env)
    assert not tracing.console
    assert tracing.description == "exported by OTLP (grpc) to http://127.0.0.1:4317"
    tracing.provider.get_tracer("test").start_span("x").end()
    tracing.shutdown()
    assert [span.name for span in exporter.get_finished_spans()] == ["x"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, "grpc", id="port-4317"),
        pytest.param({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "http/protobuf", id="env"),
    ],
)
def test_otlp_protocol_comes_from_the_environment_or_the_port(
    env: dict[str, str], expected: str
) -> None:
    """The OTLP protocol is OTEL_EXPORTER_OTLP_PROTOCOL, else gRPC on port 4317."""
    assert otlp_protocol(env, "http://collector:4317") == expected
    assert otlp_protocol({}, "http://collector:4318") == "http/protobuf"


def test_outage_windows_start_end_and_repeat() -> None:
    """An outage covers [start, start + duration), repeating every EVERY seconds."""
    once, every = Outage(6.0, 5.0), Outage(6.0, 5.0, every=60.0)
    assert [once.active(t) for t in (5.9, 6.0, 10.9, 11.0, 66.0)] == [
        False,
        True,
        True,
        False,
        False,
    ]
    assert [every.active(t) for t in (66.0, 70.9, 71.0)] == [True, True, False]
    assert str(every) == "6s-11s, every 1m"


def test_upstream_answers_follow_its_script() -> None:
    """The upstream answers 429 with Retry-After, 5xx, or 200 in the scripted shares."""
    always_429 = FlakyUpstream(UpstreamScript(rate_limited=1.0, retry_after=2))
    assert always_429.respond() == (429, {"Retry-After": "2"})
    always_5xx = FlakyUpstream(UpstreamScript(failure_rate=1.0, rate_limited=0.0))
    assert always_5xx.respond()[0] in (502, 503, 504)
    down = FlakyUpstream(UpstreamScript(failure_rate=0.0, outage=Outage(0.0, 60.0)))
    assert down.respond() == (503, {})


def test_console_rate_limits_interesting_traces() -> None:
    """Only retried or failed calls print, at most two a second; the rest are counted."""
    stream = io.StringIO()
    console = Console(stream, tty=False)
    retried = CallTrace("ab" * 16, "GET", "success", 2, 0.1, ("503 1ms", "wait 50ms", "200 1ms"))
    console.trace(CallTrace("cd" * 16, "GET", "success", 1, 0.01, ("200 1ms",)), 0.1)
    for _ in range(3):
        console.trace(retried, 0.5)
    assert console.printed == 2
    assert console.suppressed == 1
    assert stream.getvalue().splitlines()[0] == (
        "[   0.5s] trace abababab  GET ✓ · 2 attempts · 100ms  503 1ms → wait 50ms → 200 1ms"
    )


def _summarised() -> tuple[OpenTelemetryInstrument, list[CallTrace]]:
    """An instrument whose spans the demo's `SummaryProcessor` summarises into the list."""
    traces: list[CallTrace] = []
    provider = TracerProvider()
    provider.add_span_processor(SummaryProcessor(traces.append))
    return OpenTelemetryInstrument(tracer_provider=provider), traces


def _steps(trace: CallTrace) -> list[str]:
    """The trace's steps without the attempts' measured durations (a wait keeps its delay)."""
    return [step if step.startswith("wait") else step.rsplit(" ", 1)[0] for step in trace.steps]


def _failing(failures: int) -> Callable[[], Awaitable[str]]:
    calls = 0

    async def fetch() -> str:
        nonlocal calls
        calls += 1
        if calls <= failures:
            raise ConnectionError(f"reset #{calls}")
        return "ok"

    return fetch


class _GivesUp(FakeClock):
    """A virtual clock whose caller gives up (cancels ``scope``) during its wait number ``at``."""

    def __init__(self, scope: anyio.CancelScope, at: int) -> None:
        super().__init__()
        self._scope = scope
        self._at = at

    async def sleep(self, seconds: float) -> None:
        if len(self.sleeps) + 1 == self._at:
            self._scope.cancel()
        await super().sleep(seconds)


@pytest.mark.anyio
async def test_trace_summary_puts_each_wait_before_the_attempt_that_followed_it(
    clock: FakeClock,
) -> None:
    """A retried call's waits are read from ``retrymw.backoff.delay`` on the attempt span that
    followed each one (no ``retrymw.backoff`` event is left on the call span)."""
    instrument, traces = _summarised()
    retrier = Retrier(
        RetryPolicy(name="demo", attempts=3),
        clock=clock,
        instruments=[instrument],
        budget=RetryBudget(clock=clock),
    )
    assert await retrier.call(_failing(2)) == "ok"
    (trace,) = traces
    assert (trace.operation, trace.outcome, trace.attempts) == ("fetch", "success", 3)
    assert _steps(trace) == ["ConnectionError", "wait 1s", "ConnectionError", "wait 2s", "ok"]


@pytest.mark.anyio
async def test_trace_summary_shows_a_wait_that_no_attempt_followed() -> None:
    """Cancelled during its second wait: that wait is the call span's ``retrymw.backoff`` event,
    last; the first one still comes from the second attempt's span."""
    instrument, traces = _summarised()
    scope = anyio.CancelScope()
    clock = _GivesUp(scope, at=2)
    retrier = Retrier(
        RetryPolicy(name="demo", attempts=5),
        clock=clock,
        instruments=[instrument],
        budget=RetryBudget(clock=clock),
    )
    with scope:
        await retrier.call(_failing(5))
    assert scope.cancelled_caught
    (trace,) = traces
    assert (trace.outcome, trace.attempts) == ("cancelled", 2)
    assert _steps(trace) == ["ConnectionError", "wait 1s", "ConnectionError", "wait 2s"]


@pytest.mark.anyio
async def test_trace_summary_marks_a_wait_the_server_asked_for(clock: FakeClock) -> None:
    """An HTTP retry after ``Retry-After: 3``: the next CLIENT span's wait says so."""
    instrument, traces = _summarised()
    responses = [httpx.Response(503, headers={"Retry-After": "3"}), httpx.Response(200)]
    transport = AsyncRetryTransport(
        httpx.MockTransport(lambda request: responses.pop(0)),
        policy=RetryPolicy(name="demo", attempts=3),
        instruments=[instrument],
        clock=clock,
    )
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get("http://api.test/a")).status_code == 200
    (trace,) = traces
    assert (trace.operation, trace.outcome, trace.attempts) == ("GET", "success", 2)
    # The first attempt is linked from the call span (made once it was retried), not its child.
    assert _steps(trace) == ["503", "wait 3s (Retry-After)", "200"]


def test_console_redraws_the_progress_line_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal other lines print above the progress line, which fits the width."""
    monkeypatch.setenv("COLUMNS", "12")
    stream = io.StringIO()
    console = Console(stream, tty=True)
    console.status("progress 1")
    console.line("event")
    console.status("progress 100")
    console.finish()
    assert stream.getvalue() == (
        "\r\x1b[2Kprogress 1\r\x1b[2Kevent\nprogress 1\r\x1b[2Kprogress 1…\n"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0.0, "0s", id="zero"),
        pytest.param(0.0005, "0.5ms", id="sub-millisecond"),
        pytest.param(0.25, "250ms", id="milliseconds"),
        pytest.param(1.5, "1.5s", id="seconds"),
        pytest.param(150.0, "2m30s", id="minutes"),
        pytest.param(3900.0, "1h5m", id="hours"),
        pytest.param(float("inf"), "∞", id="infinite"),
    ],
)
def test_durations_are_printed_for_people(seconds: float, text: str) -> None:
    """Durations print in the unit a person would pick."""
    assert human_duration(seconds) == text


def test_percentages_and_percentiles() -> None:
    """Shares print with sensible precision; percentiles use the nearest rank."""
    assert [percent(x) for x in (0.0, 0.031, 0.5, 1.0)] == ["0%", "3.1%", "50%", "100%"]
    assert percent(0.9996) == "99.9%"  # a failure is never rounded away
    values = [float(n) for n in range(1, 101)]
    assert [percentile(values, q) for q in (0.5, 0.95, 0.99)] == [50.0, 95.0, 99.0]
    assert percentile([], 0.5) == 0.0


# -- the progress line, the last redraw and the summary --------------------------------------------


def _finished(stats: DemoStats, outcome: CallOutcome, attempts: int, count: int) -> None:
    """Feed ``count`` finished calls to ``stats``, as the transport's dispatch would."""
    event = CallFinished("demo", "127.0.0.1", "GET", outcome, attempts, 0.02, None)
    for _ in range(count):
        for _ in range(attempts):
            stats.attempts += 1
        stats.call_finished(event)


def _outage_stats() -> DemoStats:
    """A demo mid-outage: 598 calls, 480 successes, the others exhausted, throttled, rejected."""
    stats = DemoStats()
    _finished(stats, "success", 1, 400)
    _finished(stats, "success", 3, 80)
    _finished(stats, "exhausted", 4, 12)
    _finished(stats, "throttled", 2, 40)
    _finished(stats, "circuit_open", 0, 66)
    return stats


@pytest.mark.parametrize("columns", [80, 120])
def test_progress_line_keeps_the_essentials_on_a_narrow_terminal(
    monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """At 80 and 120 columns the line fits without a cut and keeps what the demo is about."""
    monkeypatch.setenv("COLUMNS", str(columns))
    retrier = Retrier(RetryPolicy(name="demo"), breaker=CircuitBreaker(name="upstream"))
    stats = _outage_stats()
    stream = io.StringIO()
    console = Console(stream, tty=True)
    console.status(progress_line(12.0, stats, retrier, True, width=console.width()))
    shown = stream.getvalue().rpartition("\x1b[2K")[2]
    assert len(shown) < columns
    assert "…" not in shown  # fitted by leaving details out, not cut at the edge
    assert shown.startswith("[  12.0s] calls 598 · ")
    amplification = f"{(400 + 240 + 48 + 80) / (598 - 66):.2f}x"  # rejected calls apart
    assert amplification in shown
    assert "success 80.3%" in shown
    assert shown.endswith("breaker closed") or " · breaker closed · " in shown
    if columns >= 120:  # room for every outcome, one by one
        assert "exhausted 12 · throttled 40 · circuit_open 66" in shown
    full = progress_line(12.0, stats, retrier, True)  # a pipe: every detail
    assert full == (
        f"[  12.0s] calls 598 · attempts 768 ({amplification}) · success 480 (80.3%) · "
        "exhausted 12 · throttled 40 · circuit_open 66 · breaker closed · budget 10/10 · "
        "upstream DOWN"
    )


def test_progress_line_before_any_call_claims_no_figures() -> None:
    """Before the first call finishes there is no amplification or share to show."""
    line = progress_line(0.3, DemoStats(), None, False)
    assert line == "[   0.3s] no calls finished yet · breaker none · upstream up"


def test_summary_of_no_calls_claims_no_amplification() -> None:
    """With no finished call (or none let through) the summary says so instead of "1.00x"."""
    upstream = FlakyUpstream(UpstreamScript())
    empty = summary(DemoStats(), elapsed=0.0, upstream=upstream, retrier=None, metrics_url=None)
    assert re.search(r"^amplification\s+none: no calls$", empty, re.MULTILINE), empty
    assert re.search(r"^outcomes\s+none$", empty, re.MULTILINE)
    assert re.search(r"^latency\s+none$", empty, re.MULTILINE)
    rejected = DemoStats()
    _finished(rejected, "circuit_open", 0, 5)
    text = summary(rejected, elapsed=1.0, upstream=upstream, retrier=None, metrics_url=None)
    assert re.search(r"^amplification\s+none: no call was let through$", text, re.MULTILINE)
    assert "1.00x" not in empty + text


def test_zero_duration_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """``--duration 0s`` would run no call at all: a usage error naming option, value, example."""
    code, out, err = cli(capsys, "demo", "--duration", "0s")
    assert code == 2
    assert out == ""
    assert "argument --duration: must be longer than 0s: '0s' (e.g. 5s, 20s, 1m)" in err


def test_the_last_progress_line_shows_the_summary_totals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On an 80-column terminal the final redraw fits and agrees with the summary below it."""
    monkeypatch.setenv("COLUMNS", "80")
    args = build_parser().parse_args(
        [
            *("demo", "--duration", "1500ms", "--metrics-port", "0", "--outage", "none"),
            *("--seed", "3", "--traces", "none", "--latency", "5ms"),
        ]
    )
    demo = DemoRun(args, _script(args))
    stream = io.StringIO()
    demo.console = Console(stream, tty=True, traces="none")
    asyncio.run(demo.main())
    demo.report()
    screen, _, table = stream.getvalue().partition("\n\nretrymw demo: ")
    last = screen.rpartition("\x1b[2K")[2]
    assert len(last) < 80
    calls = re.search(r"^calls\s+([\d,]+) \(", table, re.MULTILINE)
    ratio = re.search(r"^amplification\s+(\d+\.\d\dx) attempts per call$", table, re.MULTILINE)
    assert calls is not None, table
    assert ratio is not None, table
    assert f"calls {calls.group(1)} · " in last, (last, table)
    assert ratio.group(1) in last, (last, table)


# -- credentials and a reader that leaves ----------------------------------------------------------


def test_the_otlp_endpoint_is_printed_without_its_credentials(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user:password and a ?token= in OTEL_EXPORTER_OTLP_ENDPOINT never reach the output."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporters: list[InMemorySpanExporter] = []

    def exporter(protocol: str) -> InMemorySpanExporter:
        exporters.append(InMemorySpanExporter())
        return exporters[-1]

    monkeypatch.setattr("retrymw.cli.demo._trace._otlp_exporter", exporter)
    endpoint = "http://user:secret@127.0.0.1:4317/?token=abc"
    tracing = setup_tracing(lambda trace: None, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    tracing.shutdown()
    assert "127.0.0.1:4317" in tracing.description
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    code, out, err = cli(capsys, "demo", "--duration", "500ms", "--metrics-port", "0")
    assert code == 0, err
    assert "traces: exported by OTLP (grpc) to http://" in out
    for printed in (tracing.description, out, err):
        assert "secret" not in printed
        assert "abc" not in printed
    assert exporters[-1].get_finished_spans()  # the demo's spans did go to the exporter


class _GonePipe(io.StringIO):
    """A stream whose reader has gone away: every write fails with EPIPE."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_console_stops_writing_once_the_reader_is_gone() -> None:
    """The first EPIPE closes the console and tells its owner once; later writes are dropped."""
    calls: list[str] = []
    console = Console(_GonePipe(), tty=False, on_closed=lambda: calls.append("closed"))
    console.line("upstream: ...")
    console.status("[   1.0s] calls 1")
    console.finish()
    assert console.closed
    assert calls == ["closed"]


def test_silence_points_a_broken_pipe_at_devnull() -> None:
    """After EPIPE, the stream's descriptor writes to devnull: the final flush cannot fail."""
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as stream:
        stream.write("more than the reader wanted\n")
        with pytest.raises(BrokenPipeError):
            stream.flush()
        silence(stream)
        stream.write("and the summary\n")
        stream.flush()  # would raise BrokenPipeError again without silence()
    silence(io.StringIO())  # no descriptor: nothing to do, and no error


@pytest.mark.skipif(shutil.which("head") is None, reason="needs head(1) to close the pipe early")
def test_demo_piped_into_head_stops_quietly() -> None:
    """``retrymw demo --forever | head -n 3``: the demo stops, exit 0, nothing on stderr."""
    demo = subprocess.Popen(
        [sys.executable, "-m", "retrymw", "demo", "--forever", "--metrics-port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    try:
        head = subprocess.run(
            ["head", "-n", "3"], stdin=demo.stdout, capture_output=True, timeout=WAIT, check=True
        )
        assert demo.stdout is not None
        demo.stdout.close()  # only head reads the pipe now: when it exits, the pipe breaks
        # --forever: only noticing the broken pipe ends this demo before WAIT.
        assert demo.wait(timeout=WAIT) == 0
        assert demo.stderr is not None
        assert demo.stderr.read() == b""
        assert head.stdout.decode().splitlines()[0].startswith("upstream: http://127.0.0.1:")
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(timeout=WAIT)
        if demo.stderr is not None:
            demo.stderr.close()
