"""Every store reply, checked before anything is taken from it.

A store that answers a wrong type, a huge or negative number, ``nan``, a short or long reply
(a proxy in between, a different script under the same SHA, a bug, a lie) must never kill the
synchroniser, raise into a call, or grant what no member could hold. The parsers here accept
only the shapes the fleet's scripts (`_scripts`) produce, with every number within what one
member can plausibly be told, and raise `ReplyError` otherwise: the step (or the probe lease)
then counts as failed and the fleet decides on its conservative local share.

Parsing is linear in the reply: numbers are matched by bounded regular expressions before any
conversion, so a reply of a million digits costs one failed match, not a big-integer parse.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_COUNT",
    "MAX_MEMBERS",
    "MAX_RATE",
    "BreakerReply",
    "BudgetReply",
    "Change",
    "ReplyError",
    "StepReply",
    "PacerReply",
    "ThrottleReply",
    "parse_lease",
    "parse_step",
]

MAX_MEMBERS = 1_000_000  # members of one namespace, or of one target
MAX_RATE = 1e9  # a requests limit, per second (`Pacer` accepts no more)
MAX_COUNT = 10**12  # a pooled trailing-window count: a million members at a million each
_MAX_TIME = 2**53  # store milliseconds (and versions, sequence numbers) stay exact as floats
_INT = re.compile(r"-?[0-9]{1,16}")
# ``%.17g`` of a number below 0.1 has up to 20 decimals (0.00012345678901234567).
_FLOAT = re.compile(r"[0-9]{1,16}(?:\.[0-9]{1,20})?(?:e[+-]?[0-9]{1,3})?")


class ReplyError(ValueError):
    """The store's reply is not what the fleet's script answers: never taken, never raised
    into a call."""


@dataclass(frozen=True, slots=True)
class BudgetReply:
    """A budget record's answer: tokens granted, the bucket's capacity, the target's members."""

    granted: int
    capacity: float
    members: int


@dataclass(frozen=True, slots=True)
class BreakerReply:
    """A breaker record's answer, or a change of a circuit's state (``members`` 0 there)."""

    state: str
    reopen: int
    version: int
    members: int
    votes: int


@dataclass(frozen=True, slots=True)
class ThrottleReply:
    """A throttle record's answer: the other members' trailing-window sums."""

    requests: int
    accepts: int
    overloaded: int
    members: int


@dataclass(frozen=True, slots=True)
class PacerReply:
    """A pacer record's answer: the fleet's limit (per second; ``None``: nobody learned one),
    the members pacing the target, and this member's share of the limit by the members'
    needs (``None`` without a limit)."""

    limit: float | None
    members: int
    share: float | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """A shared circuit whose state changed since the last step: its suffix and state."""

    suffix: str
    state: BreakerReply


@dataclass(frozen=True, slots=True)
class StepReply:
    """A whole step's answer.

    Attributes:
        now: the store's time (ms).
        seq: the namespace's circuit-change counter, to ask from next time.
        members: live members of the namespace.
        resend: the store forgot this member or the changes since ``seq``: send every record.
        records: one answer per record sent, in order.
        changes: circuits changed since the last step.
    """

    now: int
    seq: int
    members: int
    resend: bool
    records: list[BudgetReply | BreakerReply | ThrottleReply | PacerReply | None]
    changes: list[Change]


def _int(text: str, field: str, low: int, high: int) -> int:
    if _INT.fullmatch(text) is None:
        raise ReplyError(f"{field} is not an integer: {text[:40]!r}")
    value = int(text)
    if not low <= value <= high:
        raise ReplyError(f"{field} {value} is outside [{low}, {high}]")
    return value


def _float(text: str, field: str, high: float) -> float:
    if _FLOAT.fullmatch(text) is None:
        raise ReplyError(f"{field} is not a number: {text[:40]!r}")
    value = float(text)
    if not (math.isfinite(value) and 0.0 <= value <= high):
        raise ReplyError(f"{field} {value} is outside [0, {high}]")
    return value


def _words(line: str, count: int, what: str) -> list[str]:
    words = line.split(" ")
    if len(words) != count:
        raise ReplyError(f"a {what} line has {len(words)} fields, not {count}")
    return words


def _breaker(words: list[str], members: bool) -> BreakerReply:
    state, reopen, version = words[0], words[1], words[2]
    if state not in ("closed", "open"):
        raise ReplyError(f"circuit state {state[:40]!r}")
    count = _int(words[3], "members", 1, MAX_MEMBERS) if members else 0
    return BreakerReply(
        state=state,
        reopen=_int(reopen, "reopen", 0, _MAX_TIME),
        version=_int(version, "version", 0, _MAX_TIME),
        members=count,
        votes=min(count, _int(words[4], "votes", 0, MAX_MEMBERS)) if members else 0,
    )


def parse_step(reply: Any, kinds: list[str], wants: list[int]) -> StepReply:
    """The `_scripts.STEP` reply to records of ``kinds`` (``b``, ``k``, ``t``, ``p``, ``x``).

    ``wants[i]`` is what record ``i`` asked for (a budget's grant never exceeds it).

    Raises:
        ReplyError: anything else.
    """
    if isinstance(reply, bytes):
        try:
            text = reply.decode("ascii")
        except UnicodeDecodeError:
            raise ReplyError("the step's reply is not ASCII") from None
    elif isinstance(reply, str):
        text = reply
    else:
        raise ReplyError(f"the step's reply is a {type(reply).__name__}, not a string")
    lines = text.split("\n")
    head = _words(lines[0], 4, "header")
    flags = head[3]
    if flags not in ("-", "r"):
        raise ReplyError(f"header flags {flags[:40]!r}")
    body = [line for line in lines[1:] if line]
    if len(body) < len(kinds):
        raise ReplyError(f"{len(body)} record lines for {len(kinds)} records")
    records: list[BudgetReply | BreakerReply | ThrottleReply | PacerReply | None] = []
    for kind, want, line in zip(kinds, wants, body, strict=False):
        records.append(_record(kind, want, line))
    changes = []
    for line in body[len(kinds) :]:
        words = _words(line, 5, "change")
        if words[0] != "c" or not words[1]:
            raise ReplyError(f"a change line starts {line[:40]!r}")
        changes.append(Change(words[1], _breaker(words[2:], members=False)))
    return StepReply(
        now=_int(head[0], "now", 0, _MAX_TIME),
        seq=_int(head[1], "seq", 0, _MAX_TIME),
        members=_int(head[2], "members", 1, MAX_MEMBERS),
        resend=flags == "r",
        records=records,
        changes=changes,
    )


def _record(
    kind: str, want: int, line: str
) -> BudgetReply | BreakerReply | ThrottleReply | PacerReply | None:
    if kind == "b":
        words = _words(line, 3, "budget")
        return BudgetReply(
            granted=_int(words[0], "granted", 0, want),
            capacity=_float(words[1], "capacity", float(MAX_COUNT)),
            members=_int(words[2], "members", 1, MAX_MEMBERS),
        )
    if kind == "k":
        return _breaker(_words(line, 5, "breaker"), members=True)
    if kind == "t":
        words = _words(line, 4, "throttle")
        requests = _int(words[0], "requests", 0, MAX_COUNT)
        return ThrottleReply(  # the sums of claims clamped alike: never more than requests
            requests=requests,
            accepts=min(requests, _int(words[1], "accepts", 0, MAX_COUNT)),
            overloaded=min(requests, _int(words[2], "overloaded", 0, MAX_COUNT)),
            members=_int(words[3], "members", 1, MAX_MEMBERS),
        )
    if kind == "p":
        # ``- <members>`` while no limit is known; ``<limit> <members> <share>`` once one is.
        words = _words(line, 2 if line.startswith("- ") else 3, "pacer")
        limit = None if words[0] == "-" else _float(words[0], "limit", MAX_RATE)
        if limit == 0.0:
            raise ReplyError("limit 0.0 is outside (0, 1e9]")
        share = None if limit is None else _float(words[2], "share", 1.0)
        if share == 0.0:
            raise ReplyError("share 0.0 is outside (0, 1]")
        members = _int(words[1], "members", 1, MAX_MEMBERS)
        return PacerReply(limit=limit, members=members, share=share)
    if line != "x":
        raise ReplyError(f"a leave line is {line[:40]!r}")
    return None


def parse_lease(reply: Any) -> tuple[bool, int]:
    """The `_scripts.PROBE` reply: whether the lease was granted, and its version.

    Raises:
        ReplyError: anything but four integers, the first 0 or 1, the others store times or a
            version.
    """
    if not isinstance(reply, list) or len(reply) != 4:
        raise ReplyError("the lease reply is not four integers")
    values = []
    for index, item in enumerate(reply):
        if isinstance(item, bool) or not isinstance(item, int):
            raise ReplyError(f"lease field {index} is a {type(item).__name__}")
        if not 0 <= item <= _MAX_TIME:
            raise ReplyError(f"lease field {index} is {item}")
        values.append(item)
    if values[0] not in (0, 1):
        raise ReplyError(f"lease granted is {values[0]}")
    return values[0] == 1, values[1]
