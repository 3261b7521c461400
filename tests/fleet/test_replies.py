"""The fleet's parsers of store replies and its key encoding (no store needed).

Store replies are outside input: whatever they hold, `parse_step` and `parse_lease` return a
checked reply or raise `ReplyError`, in time linear in the reply. Keys are injective.
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrymw.fleet._keys import encode_part, namespace_prefix
from retrymw.fleet._replies import (
    BreakerReply,
    BudgetReply,
    ReplyError,
    ThrottleReply,
    parse_lease,
    parse_step,
)

_ANY_REPLY = st.recursive(
    st.none()
    | st.integers()
    | st.binary(max_size=200)
    | st.text(max_size=200)
    | st.floats(allow_nan=True),
    lambda children: st.lists(children, max_size=6),
    max_leaves=20,
)
_LINES = st.lists(
    st.lists(
        st.sampled_from(
            ["1", "-3", "open", "closed", "c", "x", "nan", "1e400", "99999999999999999"]
        )
        | st.text(max_size=8),
        max_size=6,
    ).map(" ".join),
    max_size=6,
).map("\n".join)


@settings(deadline=None, max_examples=300)
@given(reply=_ANY_REPLY | _LINES, kinds=st.lists(st.sampled_from("bktx"), max_size=4))
def test_a_step_reply_is_checked_or_refused(reply: Any, kinds: list[str]) -> None:
    """Any reply: a checked `StepReply` or `ReplyError`, nothing else."""
    try:
        parsed = parse_step(reply, kinds, [5] * len(kinds))
    except ReplyError:
        return
    assert len(parsed.records) == len(kinds)
    assert parsed.members >= 1
    for record in parsed.records:
        if isinstance(record, BudgetReply):
            assert 0 <= record.granted <= 5
            assert record.members >= 1
        elif isinstance(record, ThrottleReply):
            assert 0 <= record.accepts <= record.requests
        elif isinstance(record, BreakerReply):
            assert record.state in ("closed", "open")
            assert 0 <= record.votes <= record.members


@settings(deadline=None, max_examples=300)
@given(reply=_ANY_REPLY)
def test_a_lease_reply_is_checked_or_refused(reply: Any) -> None:
    """Any reply: ``(granted, version)`` from four small integers, or `ReplyError`."""
    try:
        granted, version = parse_lease(reply)
    except ReplyError:
        return
    assert isinstance(granted, bool)
    assert 0 <= version <= 2**53


def test_well_formed_replies_parse() -> None:
    """The shapes the script answers."""
    reply = parse_step(
        b"1700000000000 4 3 -\n2 10 3\nopen 1700000005000 7 3 2\n40 30 5 2\nx\n"
        b"c api:host open 1700000005000 7",
        ["b", "k", "t", "x"],
        [2, 0, 0, 0],
    )
    assert reply.records[0] == BudgetReply(2, 10.0, 3)
    assert reply.records[1] == BreakerReply("open", 1700000005000, 7, 3, 2)
    assert reply.records[2] == ThrottleReply(40, 30, 5, 2)
    assert reply.records[3] is None
    assert [change.suffix for change in reply.changes] == ["api:host"]
    assert parse_lease([1, 7, 0, 0]) == (True, 7)


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(b"1 0 1 -\n11 10 1", id="grant-above-want"),
        pytest.param(b"1 0 1 -\n-1 10 1", id="negative-grant"),
        pytest.param(b"1 0 -3 -\n1 10 1", id="negative-members"),
        pytest.param(b"1 0 1 -\n1 nan 1", id="nan-capacity"),
        pytest.param(b"1 0 1 -\n1 1e400 1", id="infinite-capacity"),
        pytest.param(b"1 0 1 -\n99999999999999999999 10 1", id="huge-grant"),
        pytest.param(b"1 0 1 -\n1 10 1 7", id="extra-field"),
        pytest.param(b"1 0 1 -", id="missing-record"),
        pytest.param(b"1 0 1 ?\n1 10 1", id="unknown-flag"),
    ],
)
def test_implausible_budget_answers_are_refused(reply: bytes) -> None:
    """A grant above what was asked, a negative count, nan: refused whole."""
    with pytest.raises(ReplyError):
        parse_step(reply, ["b"], [10])


def _parse_cost(size: int) -> float:
    huge = b"1 0 1 -\n" + b"\n".join([b"c api:x open 5 6"] * size)
    started = time.process_time()
    for _ in range(3):
        parse_step(huge, [], [])
    digits = b"1" * (size * 16)
    for _ in range(3):
        with pytest.raises(ReplyError):
            parse_step(b"1 0 1 -\n" + digits + b" 10 1", ["b"], [1])
    return time.process_time() - started


def test_parsing_is_linear_in_the_reply() -> None:
    """Ten times the reply (up to ~1.6 MB) costs about ten times as much, not a hundred."""
    small, large = _parse_cost(10_000), _parse_cost(100_000)
    assert large <= 30 * max(small, 1e-3)


@settings(deadline=None, max_examples=500)
@given(first=st.text(max_size=30), second=st.text(max_size=30))
def test_key_parts_are_injective_and_safe(first: str, second: str) -> None:
    """Different names, different parts; no raw separator, brace or space in any part."""
    encoded = encode_part(first)
    assert all(character not in encoded for character in ":{} \n\r\t")
    assert urllib.parse.unquote(encoded, errors="surrogatepass") == first
    if first != second:
        assert encoded != encode_part(second)


def test_the_namespace_is_the_hash_tag() -> None:
    """Braces and colons in a namespace stay inside its one hash tag."""
    assert namespace_prefix("shop") == "retrymw:{shop}:"
    assert namespace_prefix("api{v1}") == "retrymw:{api%7Bv1%7D}:"
    assert namespace_prefix("shop:eu") != namespace_prefix("shop") + "eu:"
