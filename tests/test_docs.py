"""The README and the reference in docs/ run as written, so the documentation cannot drift.

Every ```python block of README.md and docs/**/*.md is executed in a fresh subprocess, one test
per block (ids are ``file:line``). Blocks talk to ``https://api.example.com``; the test points
that host at a loopback server on 127.0.0.1 whose every path answers 503 on its first request and
200 after, so the retries the documentation describes really happen.

A block that must not run (a fragment, a server's set-up) is marked on the line just before it
with ``<!-- docs: not-run (why) -->``. `NOT_RUN` lists how many each file has, so no block is
ever skipped silently, and other spellings of a Python fence (```py, ```python3, ```pycon) are
refused because the extraction would miss them.

The telemetry tables of docs/telemetry.md are generated from `retrymw.instrumentation._names`:
``python -m tests.test_docs`` rewrites them, and a test fails when they differ. The site itself
is built with ``mkdocs build --strict``, as ``make docs`` does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar, NamedTuple

import pytest

from retrymw.instrumentation import _names as names

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TELEMETRY = DOCS / "telemetry.md"
EXAMPLE_HOST = "https://api.example.com"
# A fenced block: its info string (language and attributes) and its body.
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
NOT_RUN_MARKER = re.compile(r"<!-- docs: not-run \(([^)]+)\) -->\n\Z")
MARKER_LINE = re.compile(r"^<!-- docs: not-run \(", re.MULTILINE)
# Spellings of Python that the extraction would not run.
PYTHON_ALIASES = frozenset({"py", "py3", "python3", "pycon", "ipython"})
# How many ```python blocks each file deliberately does not run: changing a count is a decision.
NOT_RUN: dict[str, int] = {}


class Block(NamedTuple):
    """One fenced block of a document."""

    path: Path
    line: int
    language: str
    code: str
    not_run: str | None  # the reason given by the marker, if any

    @property
    def id(self) -> str:
        """``file:line``, relative to the repository."""
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _documents() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _fences(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        info = match.group(1).split()
        marker = NOT_RUN_MARKER.search(text[: match.start()])
        line = text.count("\n", 0, match.start()) + 1
        language = info[0] if info else ""
        found.append(Block(path, line, language, match.group(2), marker and marker.group(1)))
    return found


def _python_blocks() -> list[Block]:
    return [block for path in _documents() for block in _fences(path) if block.language == "python"]


class _FlakyOnce(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[set[str]] = set()
    lock = threading.Lock()

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with self.lock:
            first = self.path not in self.seen
            self.seen.add(self.path)
        status, body = (503, b"busy") if first else (200, b'{"ok": true}')
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        """Keep the test output quiet."""


@pytest.fixture
def example_url() -> Iterator[str]:
    """A fresh loopback server standing in for https://api.example.com, one per block."""
    handler = type("FlakyOnce", (_FlakyOnce,), {"seen": set()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_documents_have_python_blocks() -> None:
    """The README and the reference show runnable code (the extraction finds it)."""
    blocks = _python_blocks()
    assert len([b for b in blocks if b.path == README and b.not_run is None]) >= 3
    assert len([b for b in blocks if b.path != README and b.not_run is None]) >= 15


def test_not_run_blocks_are_counted() -> None:
    """Every block marked not-run is listed in NOT_RUN, and every marker sits on a python block."""
    counts: dict[str, int] = {}
    for path in _documents():
        fences = _fences(path)
        for block in fences:
            if block.not_run is not None:
                assert block.language == "python", (
                    f"{block.id}: not-run marker on a non-python block"
                )
                key = str(path.relative_to(ROOT))
                counts[key] = counts.get(key, 0) + 1
        markers = len(MARKER_LINE.findall(path.read_text(encoding="utf-8")))
        assert markers == sum(block.not_run is not None for block in fences), (
            f"{path.name}: a not-run marker is not directly above a fenced block"
        )
    assert counts == NOT_RUN


def test_python_fences_use_one_spelling() -> None:
    """No Python block hides from the runner behind ```py, ```python3 or ```pycon."""
    hidden = [
        block.id
        for path in _documents()
        for block in _fences(path)
        if block.language in PYTHON_ALIASES
    ]
    assert hidden == []


@pytest.mark.parametrize(
    "block",
    [pytest.param(block, id=block.id) for block in _python_blocks() if block.not_run is None],
)
def test_python_block_runs(block: Block, example_url: str, tmp_path: Path) -> None:
    """Every ```python block in README.md and docs/ runs to completion without an error."""
    script = tmp_path / f"block_{block.line}.py"
    script.write_text(block.code.replace(EXAMPLE_HOST, example_url), encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert completed.returncode == 0, f"{block.id}:\n{completed.stdout}\n{completed.stderr}"


def test_readme_keeps_the_benchmark_block() -> None:
    """`make bench` has its block to refresh, and no generated table is left unfilled."""
    from benchmarks._report import README_END, README_START

    text = README.read_text(encoding="utf-8")
    assert text.count(README_START) == 1
    assert text.count(README_END) == 1
    assert text.index(README_START) < text.index(README_END)
    for placeholder in ("BENCH_TABLE", "SIMULATOR_TABLE"):
        assert placeholder not in text


def test_readme_is_the_front_door() -> None:
    """The README stays short, quick-starts with two commands and links into the reference."""
    text = README.read_text(encoding="utf-8")
    assert text.count("\n") < 320
    assert "make demo" in text
    assert "make test" in text
    assert "dashboards/preview.png" in text
    linked = set(re.findall(r"\]\((docs/[^)#]+)", text))
    assert linked, "the README links into docs/"
    for target in linked:
        assert (ROOT / target).is_file(), target


def test_configuration_yaml_blocks_load() -> None:
    """Every YAML file shown on the configuration page is accepted by load_config as written."""
    import yaml

    from retrymw import load_config

    shown = [b for b in _fences(DOCS / "configuration.md") if b.language == "yaml"]
    assert shown
    for block in shown:
        config = load_config(yaml.safe_load(block.code))
        assert config.policies, block.id


# -- telemetry tables, generated from _names.py -------------------------------------------------


def _code(value: object) -> str:
    return f"`{value}`"


def _metrics_table() -> str:
    rows = [
        "| Prometheus name | type | labels | OTel instrument (unit) | buckets |",
        "|---|---|---|---|---|",
    ]
    for spec in (*names.METRICS, *names.BODY_METRICS):
        kind: str = spec.kind
        if spec.multiprocess_mode:
            kind += f" (multiprocess `{spec.multiprocess_mode}`)"
        buckets = ", ".join(f"{b:g}" for b in spec.buckets) if spec.buckets else ""
        labels = ", ".join(_code(label) for label in spec.labels)
        otel = f"{_code(spec.otel)} ({_code(spec.unit)})"
        rows.append(f"| {_code(spec.prometheus)} | {kind} | {labels} | {otel} | {buckets} |")
    return "\n".join(rows)


def _server_table() -> str:
    """The server companion's inbound metric and its labels (retrymw.server)."""

    def values(items: tuple[str, ...]) -> str:
        return ", ".join(_code(item) for item in items)

    spec = names.INBOUND_REQUESTS
    labels = {
        names.LABEL_SERVICE: "the middleware's `service`",
        names.LABEL_ROUTE: "the route template (`/orders/{order_id}`), never the path; the "
        f"first {names.MAX_ROUTES} per service, then `{names.OVERFLOW}`; "
        f"`{names.UNKNOWN_ROUTE}` when none is known",
        names.LABEL_INBOUND_ATTEMPT: f"{values(names.INBOUND_ATTEMPTS)}: attempt header 1, 2 or "
        "more, absent or unreadable",
    }
    rows = [
        "| Prometheus name | type | labels | OTel name (unit) |",
        "|---|---|---|---|",
        f"| {_code(spec.prometheus)} | {spec.kind} | "
        f"{', '.join(_code(label) for label in spec.labels)} | "
        f"{_code(spec.otel)} ({_code(spec.unit)}) |",
        "",
        "| label | OTel attribute | values |",
        "|---|---|---|",
    ]
    rows += [
        f"| {_code(label)} | {_code(names.ATTRIBUTE_OF_LABEL[label])} | {text} |"
        for label, text in labels.items()
    ]
    return "\n".join(rows)


def _labels_table() -> str:
    def values(items: tuple[str, ...]) -> str:
        return ", ".join(_code(item) for item in items)

    rows = [
        "| label | OTel attribute | values |",
        "|---|---|---|",
        f"| `{names.LABEL_POLICY}` | `{names.ATTR_POLICY}` | the policy's `name` |",
        f"| `{names.LABEL_TARGET}` | `{names.ATTR_TARGET}` | the host (`host` or `host:port`) "
        "for HTTP, the function's name for coroutines; the first "
        f"{names.MAX_TARGETS}, then `{names.OVERFLOW}` |",
        f"| `{names.LABEL_OUTCOME}` | `{names.ATTR_OUTCOME}` | {values(names.OUTCOMES)} |",
        f"| `{names.LABEL_ATTEMPT_OUTCOME}` | `{names.ATTR_ATTEMPT_OUTCOME}` | "
        f"{values(names.ATTEMPT_OUTCOMES)} |",
        f"| `{names.LABEL_REASON}` | `{names.ATTR_REASON}` | {values(names.REASONS)} |",
        f"| `{names.LABEL_ERROR_TYPE}` | `{names.ATTR_ERROR_TYPE}` | the status code (`503`) or "
        "the exception class name (`ConnectError`); empty on success; the first "
        f"{names.MAX_ERROR_TYPES}, then `{names.ERROR_TYPE_OVERFLOW}` |",
        f"| `{names.LABEL_CIRCUIT}` | `{names.ATTR_CIRCUIT}` | the breaker's own `name`; "
        "with `PerTarget`, and always on a transport (one circuit per host), "
        "`<template name>:<target>` |",
        f"| `{names.LABEL_CIRCUIT_STATE}` | `{names.ATTR_CIRCUIT_STATE}` | "
        f"{values(names.CIRCUIT_STATES)} |",
        f"| `{names.LABEL_CIRCUIT_PREVIOUS_STATE}` | `{names.ATTR_CIRCUIT_PREVIOUS_STATE}` | "
        f"{values(names.CIRCUIT_STATES)} |",
    ]
    return "\n".join(rows)


def _spans_table() -> str:
    call = (
        names.ATTR_POLICY,
        names.ATTR_TARGET,
        names.ATTR_MAX_ATTEMPTS,
    )
    call_end = (names.ATTR_OUTCOME, names.ATTR_ATTEMPT_COUNT, names.ATTR_ERROR_TYPE)
    http = (
        names.ATTR_HTTP_METHOD,
        names.ATTR_HTTP_METHOD_ORIGINAL,
        names.ATTR_SERVER_ADDRESS,
        names.ATTR_SERVER_PORT,
        names.ATTR_URL_FULL,
        names.ATTR_HTTP_RESEND_COUNT,
        names.ATTR_HTTP_STATUS_CODE,
        names.ATTR_NETWORK_PROTOCOL_VERSION,
        names.ATTR_ATTEMPT,
        names.ATTR_ATTEMPT_OUTCOME,
        names.ATTR_ERROR_TYPE,
    )
    # On the CLIENT span of the attempt whose response the call returned (issue 31).
    body = (
        names.ATTR_RESPONSE_BODY_STATE,
        names.ATTR_HTTP_RESPONSE_BODY_SIZE,
        names.ATTR_RESPONSE_TIME_TO_FIRST_BYTE,
    )
    attempt = (names.ATTR_ATTEMPT, names.ATTR_ATTEMPT_OUTCOME, names.ATTR_ERROR_TYPE)
    # On an attempt span: the wait before it, and a retried exception.
    waited = (names.ATTR_BACKOFF_DELAY, names.ATTR_RETRY_AFTER, names.ATTR_RETRY_AFTER_HEADER)
    retried = (names.ATTR_EXCEPTION_TYPE, names.ATTR_EXCEPTION_MESSAGE)
    backoff = (
        names.ATTR_BACKOFF_DELAY,
        names.ATTR_ATTEMPT,
        names.ATTR_ERROR_TYPE,
        names.ATTR_RETRY_AFTER,
        names.ATTR_RETRY_AFTER_HEADER,
    )

    transition = (names.ATTR_CIRCUIT, names.ATTR_CIRCUIT_PREVIOUS_STATE, names.ATTR_CIRCUIT_STATE)

    def keys(items: tuple[str, ...]) -> str:
        return ", ".join(_code(item) for item in items)

    rows = [
        "| span or event | kind | attributes |",
        "|---|---|---|",
        f"| `{names.SPAN_CALL}` | INTERNAL span, one per call, parent of its attempts (HTTP: a "
        "call that can make one attempt only when it has more to say than its CLIENT span: "
        "refused, denied a retry or moving a breaker) | "
        f"{keys(call)}; at the end "
        f"{keys(call_end)} |",
        f"| the HTTP method (`GET`; `{names.SPAN_HTTP_OTHER}` for an unknown one) | CLIENT span, "
        f"one per HTTP attempt | {keys(http)}; after a wait {keys(waited)}; if it raised and "
        f"was retried {keys(retried)} (redacted); when the body of the response the call "
        f"returned ends {keys(body)} |",
        f"| `{names.SPAN_ATTEMPT}` | INTERNAL span, one per coroutine attempt of a call that "
        f"was retried | {keys(attempt)}; after a wait {keys(waited)}; if it raised and was "
        f"retried {keys(retried)} (redacted) |",
        f"| `{names.SPAN_HEDGE}` | INTERNAL span, one per extra copy of an attempt a `Hedge` "
        f"sent ([hedging](hedging.md)), a child of the call span | `{names.ATTR_ATTEMPT}` (the "
        f"attempt it copies), `{names.ATTR_HEDGE}` (`true`), `{names.ATTR_ATTEMPT_OUTCOME}` "
        f"(`hedge`), `{names.ATTR_ERROR_TYPE}` (`cancelled` when another copy won first, the "
        f"failure when its answer failed; none when its answer won) |",
        f"| `{names.SPAN_ORIGIN}` | INTERNAL span, one per request on a transport with "
        f"`failover=` that may go to another origin ([hedging and failover](hedging.md)), the "
        f"parent of each origin's call span | {keys((names.ATTR_POLICY, names.ATTR_TARGET))} "
        f"(the primary's host); at the end `{names.ATTR_ORIGINS}` (the origins tried, in "
        f"order), `{names.ATTR_ORIGIN}` (the one that answered) or `{names.ATTR_ERROR_TYPE}` |",
        f"| `{names.EVENT_BACKOFF}` | event on the call span, only for a wait that no attempt "
        f"followed (the call cancelled, or the next attempt refused) | {keys(backoff)} |",
        f"| `{names.EVENT_RETRY_DENIED}` | event on the call span | "
        f"{keys((names.ATTR_REASON, names.ATTR_ATTEMPT))} |",
        f"| `{names.EVENT_CIRCUIT_STATE_CHANGE}` | event on the current call span, if any | "
        f"{keys(transition)} |",
    ]
    # The semconv exception event, which retrymw writes itself so that it is redacted.
    exception = getattr(names, "EVENT_EXCEPTION", None)
    if exception is not None:
        details = (names.ATTR_EXCEPTION_TYPE, names.ATTR_EXCEPTION_MESSAGE)
        trace = names.ATTR_EXCEPTION_STACKTRACE
        rows.append(
            f"| `{exception}` | event for the exception that ends the call, on the last attempt's "
            f"span (on the call span when the call made one attempt); a log record instead or "
            f"as well with `OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN` | {keys(details)}, "
            f"`{trace}` (all redacted) |"
        )
        rows.append(
            f"| `{names.EVENT_HTTP_CLIENT_REQUEST_EXCEPTION}`, `{names.EVENT_CALL_EXCEPTION}` | "
            "WARN log record (event) for the exception that ends an HTTP call or another call, "
            "with `OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN=logs` or `logs/dup`, in the context of "
            f"the span above | {keys(details)}, `{trace}` (all redacted); HTTP: "
            f"{keys((names.ATTR_HTTP_METHOD, names.ATTR_SERVER_ADDRESS, names.ATTR_SERVER_PORT))}"
            f", {_code(names.ATTR_URL_SCHEME)}, {_code(names.ATTR_ERROR_TYPE)} |"
        )
    return "\n".join(rows)


GENERATED: dict[str, Callable[[], str]] = {
    "metrics": _metrics_table,
    "labels": _labels_table,
    "spans": _spans_table,
    "server": _server_table,
}


def _generated_block(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- generated:{name}:start[^>]*-->\n)(.*?)(<!-- generated:{name}:end -->)", re.DOTALL
    )


def render_telemetry(text: str) -> str:
    """Return docs/telemetry.md's text with every generated table rebuilt from `_names`."""
    for name, build in GENERATED.items():
        pattern = _generated_block(name)
        assert pattern.search(text), f"docs/telemetry.md has no generated:{name} block"
        table = build()

        def fill(match: re.Match[str], table: str = table) -> str:
            return match.group(1) + table + "\n" + match.group(3)

        text = pattern.sub(fill, text)
    return text


def test_telemetry_tables_match_names() -> None:
    """The metric, label and span tables are exactly what `_names.py` defines."""
    text = TELEMETRY.read_text(encoding="utf-8")
    assert render_telemetry(text) == text, "run: .venv/bin/python -m tests.test_docs"


def test_every_name_is_documented() -> None:
    """Every metric, label, attribute, span and event name of `_names.py` appears in the page."""
    text = TELEMETRY.read_text(encoding="utf-8")
    public = {
        key: value
        for key, value in vars(names).items()
        if key.startswith(("LABEL_", "ATTR_", "SPAN_", "EVENT_")) and isinstance(value, str)
    }
    missing = {key: value for key, value in public.items() if f"`{value}`" not in text}
    assert missing == {}


# -- the site ------------------------------------------------------------------------------------


def test_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict` succeeds: no broken link, no page left out of the navigation."""
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # a banner, not a finding
    )
    assert completed.returncode == 0, completed.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()


if __name__ == "__main__":
    TELEMETRY.write_text(render_telemetry(TELEMETRY.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"rewrote {TELEMETRY.relative_to(ROOT)}")
