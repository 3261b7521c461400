"""Just enough of the OpenAI and Anthropic HTTP APIs, as `Step`s of the loopback test server.

The SDKs under test talk to `tests.http_server.FlakyServer` on 127.0.0.1: an SDK's base URL is
a script's URL, and each scripted step answers one request with what the real API sends: a
chat completion or a message, a stream of server-sent events, or an error body with the API's
own retry headers. The server counts and records every request, so tests count attempts where
they happen.
"""

from __future__ import annotations

import json

from tests.http_server import Step

__all__ = [
    "OPENAI_KEY",
    "ANTHROPIC_KEY",
    "anthropic_error",
    "anthropic_message",
    "anthropic_stream",
    "openai_completion",
    "openai_error",
    "openai_stream",
]

OPENAI_KEY = "sk-test-not-a-secret"
ANTHROPIC_KEY = "sk-ant-test-not-a-secret"
_JSON = {"content-type": "application/json"}
_SSE = {"content-type": "text/event-stream", "cache-control": "no-cache"}


def openai_completion(text: str = "pong") -> Step:
    """A ``POST /chat/completions`` answer: one choice saying ``text``."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return Step(200, dict(_JSON), json.dumps(body).encode())


def openai_stream(*pieces: str) -> Step:
    """A streamed chat completion: one chunk per piece, then ``[DONE]``."""
    events = []
    for piece in pieces:
        chunk = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
        }
        events.append(f"data: {json.dumps(chunk)}\n\n")
    events.append("data: [DONE]\n\n")
    return Step(200, dict(_SSE), "".join(events).encode(), chunked=True)


def openai_error(status: int, headers: dict[str, str] | None = None) -> Step:
    """An OpenAI error body (``{"error": {...}}``) with ``headers`` (the retry hints)."""
    body = {"error": {"message": f"scripted {status}", "type": "server_error", "code": None}}
    return Step(status, {**_JSON, **(headers or {})}, json.dumps(body).encode())


def anthropic_message(text: str = "pong") -> Step:
    """A ``POST /v1/messages`` answer saying ``text``."""
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    return Step(200, dict(_JSON), json.dumps(body).encode())


def _event(name: str, data: dict[str, object]) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"


def anthropic_stream(*pieces: str) -> Step:
    """A streamed message: message_start, one text delta per piece, message_stop."""
    message = json.loads(anthropic_message("").body)
    message["content"] = []
    events = [
        _event("message_start", {"message": message}),
        _event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        *(
            _event(
                "content_block_delta",
                {"index": 0, "delta": {"type": "text_delta", "text": piece}},
            )
            for piece in pieces
        ),
        _event("content_block_stop", {"index": 0}),
        _event(
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
        ),
        _event("message_stop", {}),
    ]
    return Step(200, dict(_SSE), "".join(events).encode(), chunked=True)


def anthropic_error(status: int, headers: dict[str, str] | None = None) -> Step:
    """An Anthropic error body; 529 is ``overloaded_error``, as the API sends it."""
    kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": f"scripted {status}"}}
    return Step(status, {**_JSON, **(headers or {})}, json.dumps(body).encode())
