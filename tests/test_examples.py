"""Every script in examples/ runs to completion against a flaky loopback fixture server."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WAIT = 30.0  # each example finishes in about a second; this only bounds a hang

# What each example must print when every other request fails (503, 200, 503, 200, ...).
EXPECTED = {
    "httpx_async_client.py": ["-> 200 after 2 attempt(s)"],
    "httpx_sync_client.py": ["-> 200 after 2 attempt(s)"],
    "decorate_coroutine.py": ["fetch_json -> {'ok': True}"],
    "config_policies.py": ["search: 200 after 2", "reports: 200 after 2", "payments: 200"],
    "telemetry_wiring.py": [
        'retrymw_call_duration_seconds_count{retrymw_outcome="success"',
        "'retrymw GET'",
    ],
    "per_request_overrides.py": ["named policy: 200 after 2", "no retries: 503 after 1"],
    "layers_starlette.py": ["orders: 200 after 1 attempt(s)", "inbound first: 3.0"],
    "layers_flask.py": ["invoices: 200", "inbound first: 2.0", "inbound retry: 1.0"],
}


class FlakyServer(ThreadingHTTPServer):
    """Answers 503 to odd-numbered requests and 200 to even ones; counts the statuses sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.numbers = itertools.count(1)
        self.lock = threading.Lock()
        self.statuses: list[int] = []

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.server_address[1]}/"


class _Handler(BaseHTTPRequestHandler):
    server: FlakyServer

    def do_GET(self) -> None:
        with self.server.lock:
            status = 200 if next(self.server.numbers) % 2 == 0 else 503
            self.server.statuses.append(status)
        body = b'{"ok": true}' if status == 200 else b'{"ok": false}'
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet."""


@pytest.fixture
def upstream() -> Iterator[FlakyServer]:
    """A fresh flaky server on 127.0.0.1, so each example sees the same sequence."""
    server = FlakyServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=WAIT)


def run_example(name: str, url: str | None) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<name>`` as a user would, pointed at ``url`` when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RETRYMW_"))}
    if url is not None:
        env["RETRYMW_EXAMPLE_URL"] = url
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=EXAMPLES.parent,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**env, "PYTHONIOENCODING": "utf-8"},
        check=False,
    )


def test_every_example_is_smoke_tested() -> None:
    """Each script in examples/ (helpers aside) has an entry in EXPECTED."""
    scripts = {path.name for path in EXAMPLES.glob("*.py") if not path.name.startswith("_")}
    assert scripts == set(EXPECTED)


@pytest.mark.parametrize("name", [pytest.param(name, id=name[:-3]) for name in EXPECTED])
def test_example_runs_against_the_fixture_server(name: str, upstream: FlakyServer) -> None:
    """The example exits 0, retried the fixture's 503s, and printed what it promises."""
    result = run_example(name, upstream.url)
    assert result.returncode == 0, result.stderr
    assert 503 in upstream.statuses
    assert 200 in upstream.statuses
    for text in EXPECTED[name]:
        assert text in result.stdout, result.stdout


def test_example_starts_its_own_server_without_the_variable() -> None:
    """Without RETRYMW_EXAMPLE_URL an example talks to a loopback server it starts itself."""
    result = run_example("httpx_async_client.py", None)
    assert result.returncode == 0, result.stderr
    assert "GET http://127.0.0.1:" in result.stdout
