"""The terminal event of an LLM API's event stream, and whether a stream ended with it.

An OpenAI-compatible chat stream ends with ``data: [DONE]``, an Anthropic message stream with
``event: message_stop``. A stream whose connection ends cleanly before that event looks
complete to httpx and to the SDKs above it, yet the answer is cut short. `terminal_for` says
which event a response's stream owes (by the request's path, for ``text/event-stream``
answers only), and `StreamTail` keeps the last bytes of the stream, no more, to tell at its
end whether that event came: linear in the stream, constant in memory. The stream itself is
never parsed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from .._core.errors import IncompleteStreamError

__all__ = ["ANTHROPIC_STOP", "OPENAI_DONE", "TAIL_BYTES", "StreamTail", "Terminal", "terminal_for"]

#: The bytes of a stream's end kept to find its terminal event: more than the last event of
#: either API (``event: message_stop`` and its data line, 53 bytes) with room for whitespace.
TAIL_BYTES: Final = 256

_EVENT_STREAM = "text/event-stream"


@dataclass(frozen=True, slots=True)
class Terminal:
    """The event an API's stream ends with.

    Attributes:
        shown: how it is named in the error (``data: [DONE]``).
        field: the SSE field of the last event that carries it (``data`` or ``event``).
        value: that field's value.
    """

    shown: str
    field: bytes
    value: bytes


OPENAI_DONE: Final = Terminal("data: [DONE]", b"data", b"[DONE]")
ANTHROPIC_STOP: Final = Terminal("event: message_stop", b"event", b"message_stop")

# An API's path ends → the terminal event its streams owe.
_TERMINALS: Final = (
    ("/chat/completions", OPENAI_DONE),
    ("/completions", OPENAI_DONE),
    ("/messages", ANTHROPIC_STOP),
)


def terminal_for(request: Any, response: Any) -> Terminal | None:
    """The terminal event ``response``'s stream owes: an event stream answering an OpenAI
    chat or completions path or an Anthropic messages path; ``None`` for anything else."""
    content_type = response.headers.get("content-type", "")
    if not content_type.lower().startswith(_EVENT_STREAM) or response.status_code >= 300:
        return None
    path = request.url.path.rstrip("/")
    for ending, terminal in _TERMINALS:
        if path.endswith(ending):
            return terminal
    return None


class StreamTail:
    """The last `TAIL_BYTES` of a stream, fed chunk by chunk; `check` says at its end whether
    its last event is the `Terminal` it owes."""

    __slots__ = ("_received", "_tail", "terminal")

    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal
        self._tail = b""
        self._received = 0

    def feed(self, chunk: bytes) -> None:
        """Keep the end of ``chunk`` (work bounded by `TAIL_BYTES`, whatever its size)."""
        self._received += len(chunk)
        self._tail = (self._tail + chunk[-TAIL_BYTES:])[-TAIL_BYTES:]

    def complete(self) -> bool:
        """Whether the stream so far ends with its terminal event: the last event (after the
        last blank line) has a line ``field: value`` (the space optional, as SSE allows)."""
        text = self._tail.replace(b"\r\n", b"\n").replace(b"\r", b"\n").strip()
        last_event = text.rsplit(b"\n\n", 1)[-1]
        terminal = self.terminal
        for line in last_event.split(b"\n"):
            name, colon, value = line.partition(b":")
            if colon and name == terminal.field and value.strip() == terminal.value:
                return True
        return False

    def check(self, flavour: ModuleType, request: Any) -> None:
        """At the stream's end: raise the flavour's `IncompleteStreamError` if its terminal
        event is missing."""
        if not self.complete():
            error = incomplete_stream_error(flavour)(self.terminal.shown, received=self._received)
            error.request = request
            raise error


@functools.cache
def incomplete_stream_error(flavour: ModuleType) -> type[Any]:
    """`IncompleteStreamError` that is also ``flavour.RemoteProtocolError``: code that handles
    the library's transport errors handles it too."""
    return type(
        "IncompleteStreamError",
        (IncompleteStreamError, flavour.RemoteProtocolError),
        {"__module__": "retrymw"},
    )
