"""The demo's console: its lines, and a progress line that a terminal redraws in place."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from .._common import silence

if TYPE_CHECKING:
    from ._trace import CallTrace

__all__ = ["Console"]

_TRACES_PER_SECOND = 2


class Console:
    """Writes the demo's lines, and a progress line that a terminal redraws in place.

    On a terminal the progress line is rewritten in place and other lines print above it; when
    stdout is a pipe or a file every progress update is a plain line. Every write is flushed,
    so a reader of the pipe sees the metrics URL at once.

    When the reader goes away (``retrymw demo | head``), the first write that fails with
    ``EPIPE`` points the stream's file descriptor at ``os.devnull`` (the idiom of the Python
    documentation's note on SIGPIPE, so that neither a later write nor the interpreter's final
    flush raises again), marks the console `closed` and calls ``on_closed`` once: the demo then
    stops, since nobody is watching.

    Args:
        stream: where to write.
        tty: whether ``stream`` is a terminal.
        traces: ``"interesting"`` (retried or failed calls, at most 2 a second), ``"all"`` or
            ``"none"``.
        on_closed: called once when the reader of ``stream`` has gone away.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        tty: bool,
        traces: str = "interesting",
        on_closed: Callable[[], None] | None = None,
    ) -> None:
        self.stream = stream
        self.tty = tty
        self.traces = traces
        self.closed = False
        self.suppressed = 0
        self.printed = 0
        self._on_closed = on_closed
        self._status = ""
        self._second = -1
        self._in_second = 0

    def width(self) -> int | None:
        """Columns the progress line may use on a terminal (one less than it has), else ``None``.

        Read at every redraw, so that a resized terminal gets a line that fits it.
        """
        return shutil.get_terminal_size().columns - 1 if self.tty else None

    def line(self, text: str) -> None:
        """Print ``text`` on its own line (above the progress line on a terminal)."""
        if self.tty and self._status:
            self._write(f"\r\x1b[2K{text}\n{self._status}")
        else:
            self._write(f"{text}\n")

    def status(self, text: str) -> None:
        """Show the progress line, cut to the terminal's width (a wrapped one cannot be redrawn).

        `progress_line` fits its line to `width` by leaving details out; the cut here is the
        last resort for a terminal too narrow even for the essentials.
        """
        width = self.width()
        if width is not None:
            if len(text) > width:
                text = text[: max(0, width - 1)] + "…"
            self._status = text
            self._write(f"\r\x1b[2K{text}")
        else:
            self._write(f"{text}\n")

    def trace(self, trace: CallTrace, elapsed: float) -> None:
        """Print a call's trace line if the ``traces`` setting wants it."""
        if self.traces == "none":
            return
        if self.traces == "interesting":
            if trace.outcome == "success" and trace.attempts <= 1:
                return
            if trace.attempts == 0:  # rejected by the open circuit: the progress line counts them
                return
            second = int(elapsed)
            if second != self._second:
                self._second, self._in_second = second, 0
            if self._in_second >= _TRACES_PER_SECOND:
                self.suppressed += 1
                return
            self._in_second += 1
        self.printed += 1
        self.line(f"[{elapsed:6.1f}s] {trace.render()}")

    def finish(self) -> None:
        """End the progress line so that what follows starts on a fresh line."""
        if self.tty and self._status:
            self._status = ""
            self._write("\n")
        else:
            self._write("")

    def _write(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except BrokenPipeError:
            self.closed = True
            silence(self.stream)
            if self._on_closed is not None:
                self._on_closed()
