"""Help for a mistyped name: the close match to suggest and the known names, both bounded.

A config file or a request names a policy, a breaker, a budget; a misspelt one is an error that
says what was probably meant (``did you mean 'payments'?``, from `difflib`) and what exists. The
names come from outside input, so both are bounded: a name of megabytes or a config of
thousands of policies still gives a one-line message in milliseconds.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean", "listed"]

# Longer names are no typo of a policy name, and difflib's ratio is quadratic in the length.
_LONGEST_NAME = 100
# How many names a message lists before it gives only their count.
_LISTED = 20


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """``" (did you mean 'payments'?)"``, or ``""`` when no known name is close to ``name``.

    >>> did_you_mean("paymnts", ["payments", "search"])
    " (did you mean 'payments'?)"
    """
    if not isinstance(name, str) or len(name) > _LONGEST_NAME:
        return ""
    candidates = [other for other in known if len(other) <= _LONGEST_NAME]
    found = difflib.get_close_matches(name, candidates, n=1)
    return f" (did you mean {found[0]!r}?)" if found else ""


def listed(names: Iterable[str], *, none: str = "none") -> str:
    """The sorted ``names``, comma-separated: at most 20 of them, then how many in all.

    >>> listed(["b", "a"])
    'a, b'
    >>> listed([f"p{i:02}" for i in range(30)])[-22:]
    'p18, p19, … (30 names)'
    """
    ordered = sorted(names)
    shown = ", ".join(_cut(name) for name in ordered[:_LISTED]) or none
    return f"{shown}, … ({len(ordered)} names)" if len(ordered) > _LISTED else shown


def _cut(name: str) -> str:
    return name if len(name) <= _LONGEST_NAME else f"{name[: _LONGEST_NAME - 1]}…"
