"""The README's Python blocks run as written, so the documentation cannot drift from the code.

Each ```python block is executed in a fresh subprocess. Blocks talk to ``https://api.example.com``;
the test points that host at a loopback server on 127.0.0.1 whose every path answers 503 on its
first request and 200 after, so the retries the README describes really happen.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
EXAMPLE_HOST = "https://api.example.com"


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


@pytest.fixture(scope="module")
def example_url() -> Iterator[str]:
    """A loopback server standing in for https://api.example.com."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FlakyOnce)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _blocks() -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def test_readme_has_python_blocks() -> None:
    """The README shows runnable code (guards against the extraction silently finding none)."""
    assert len(_blocks()) >= 5


@pytest.mark.parametrize(
    ("line", "code"), [pytest.param(line, code, id=f"line-{line}") for line, code in _blocks()]
)
def test_readme_block_runs(line: int, code: str, example_url: str, tmp_path: Path) -> None:
    """Every ```python block in README.md runs to completion without an error."""
    script = tmp_path / f"readme_{line}.py"
    script.write_text(code.replace(EXAMPLE_HOST, example_url), encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert completed.returncode == 0, f"README.md line {line}:\n{completed.stderr}"


def test_readme_has_no_unfilled_placeholders() -> None:
    """The generated tables are in place and `make bench` has its block to refresh."""
    text = README.read_text(encoding="utf-8")
    assert "<!-- benchmarks:start -->" in text
    assert "<!-- benchmarks:end -->" in text
    for placeholder in ("BENCH_TABLE", "SIMULATOR_TABLE"):
        assert placeholder not in text
