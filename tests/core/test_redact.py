"""Redaction of free text and safe formatting of users' objects (`retrymw._core.redact`)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from retrymw._core.redact import (
    SENSITIVE_QUERY_KEYS,
    exception_text,
    redact_text,
    safe_repr,
    safe_str,
)


class Hostile(Exception):
    """An exception whose ``__str__`` and ``__repr__`` raise."""

    def __str__(self) -> str:
        raise RuntimeError("str failed")

    def __repr__(self) -> str:
        raise RuntimeError("repr failed")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "Server error '503 Service Unavailable' for url 'https://u:pw@api.test/v1?token=t&n=1'"
            "\nFor more information check: https://developer.mozilla.org/503",
            "Server error '503 Service Unavailable' for url "
            "'https://REDACTED:REDACTED@api.test/v1?token=REDACTED&n=1'"
            "\nFor more information check: https://developer.mozilla.org/503",
            id="httpx-status-error",
        ),
        pytest.param(
            "<Request('GET', 'http://a:b@h/x?sig=s')> and postgresql://app:pw@db:5432/main",
            "<Request('GET', 'http://REDACTED:REDACTED@h/x?sig=REDACTED')> and "
            "postgresql://REDACTED:REDACTED@db:5432/main",
            id="several-urls",
        ),
        pytest.param(
            "GET /items?api_key=k&page=2 failed",
            "GET /items?api_key=REDACTED&page=2 failed",
            id="path",
        ),
        pytest.param("exit code=3, a=b", "exit code=3, a=b", id="prose-is-not-a-query"),
        pytest.param("connection reset by peer", "connection reset by peer", id="no-url"),
        pytest.param("", "", id="empty"),
    ],
)
def test_redact_text(text: str, expected: str) -> None:
    """URLs inside free text are redacted like `redact_url`; the rest of the text is kept."""
    assert redact_text(text) == expected


@given(st.text(max_size=120))
def test_redact_text_never_raises(text: str) -> None:
    """Any text redacts without raising."""
    assert isinstance(redact_text(text), str)


@given(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._~", min_size=8, max_size=30),
    st.sampled_from(sorted(SENSITIVE_QUERY_KEYS)),
    st.sampled_from(["'{}'", "({})", "url {} failed", '"{}"', "<{}>"]),
)
def test_no_secret_survives_in_text(secret: str, key: str, frame: str) -> None:
    """A password or a sensitive query value inside a message never survives `redact_text`."""
    # A secret that is part of the rest of the message (a key's name) cannot be told apart.
    assume(secret not in frame.format(f"https://REDACTED:REDACTED@host.test/p?{key}=&page=2"))
    url = f"https://bob:{secret}@host.test/p?{key}={secret}&page=2"
    redacted = redact_text(frame.format(url))
    assert secret not in redacted
    assert "page=2" in redacted


def test_safe_str_falls_back_to_the_type_name() -> None:
    """An exception whose __str__ raises is written as its type name, without raising."""
    assert safe_str(Hostile()) == "<Hostile>"
    assert safe_str(ValueError("plain")) == "plain"


def test_safe_repr_is_bounded_redacted_and_safe() -> None:
    """repr is cut to the limit, redacted first, and never raises."""
    assert safe_repr(Hostile()) == "<Hostile>"
    assert safe_repr(list(range(10**5)), limit=20) == "[0, 1, 2, 3, 4, 5, …"
    assert safe_repr("https://u:p@h/x") == "'https://REDACTED:REDACTED@h/x'"


def test_exception_text_redacts_before_cutting() -> None:
    """A URL cut by the limit cannot escape redaction: redaction comes first."""
    error = ConnectionError("failed: https://alice:hunter2hunter2@example.com/x?token=abcdefgh")
    for limit in range(1, 90):
        text = exception_text(error, limit)
        assert len(text) <= limit
        assert "hunter2" not in text
        assert "abcdefgh" not in text
    assert exception_text(Hostile()) == "<Hostile>"
