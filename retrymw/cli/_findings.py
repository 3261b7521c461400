"""What `retrymw check` finds, and how it finds every error rather than the first.

`prune` builds one piece of a file (the defaults, a policy, a breaker, a budget, a throttle);
on each `ConfigError` it records the error, drops what the error names (the entry of a list
when the error is inside one, else the field) and builds again, so that later entries and
fields are checked too. Errors keep the file's own list indices.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .._config.files import line_of
from .._core.errors import ConfigError

__all__ = ["Finding", "Report", "attempt", "prune"]

_SPELLINGS = {
    "initial_delay": ("initial_delay", "delay"),
    "attempts": ("attempts", "max_attempts", "retry"),
}
_MAX_ROUNDS = 100  # a piece has far fewer fields; this only guards against a loop


class Finding(NamedTuple):
    """One error or warning: its message (which starts with the field path) and its line."""

    message: str
    line: int | None = None

    def __str__(self) -> str:
        return self.message if self.line is None else f"{self.line}: {self.message}"


@dataclass(slots=True)
class Report:
    """What checking one file found.

    Attributes:
        errors: findings that name a field path; any of them makes the file invalid.
        warnings: valid but suspicious settings.
        policies: the names of the policies that validated.
        breakers: the names of the breakers that validated.
        budgets: the names of the budgets that validated.
        throttles: the names of the throttles that validated.
        pacers: the names of the pacers that validated.
        hedges: the names of the hedges that validated.
        lines: field path → line in the file, for the findings' lines.
    """

    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)
    breakers: list[str] = field(default_factory=list)
    budgets: list[str] = field(default_factory=list)
    throttles: list[str] = field(default_factory=list)
    pacers: list[str] = field(default_factory=list)
    hedges: list[str] = field(default_factory=list)
    lines: Mapping[str, int] = field(default_factory=dict)

    def error(self, error: ConfigError) -> None:
        """Add ``error`` with the line of its field, unless it is already there."""
        finding = Finding(str(error), line_of(self.lines, error.field))
        if finding not in self.errors:
            self.errors.append(finding)

    def warn(self, message: str) -> None:
        """Add ``message`` (``"<field path>: ..."``) unless it is already there."""
        finding = Finding(message, line_of(self.lines, message.split(": ", 1)[0]))
        if finding not in self.warnings:
            self.warnings.append(finding)


def prune(
    report: Report, raw: Any, path: str, build: Callable[[Any], Any]
) -> tuple[Any, Mapping[str, Any]]:
    """Build ``raw``; on each error, record it, drop what it names and build again.

    What is dropped is the entry of a list when the error is inside one (so that the next
    entries are checked too), else the field. Errors are recorded with the indices of the
    file, not of the shortened lists.

    Returns:
        What ``build`` returned (``None`` if the piece never validated) and the fields kept.
    """
    kept: Any = dict(raw) if isinstance(raw, Mapping) else raw
    dropped: dict[str, list[int]] = {}  # list path, as in the file → indices dropped from it
    for _ in range(_MAX_ROUNDS):
        result, error = attempt(report, build, kept, record=False)
        if error is None:
            return result, kept if isinstance(kept, Mapping) else {}
        error = _in_file(error, dropped)
        report.error(error)
        shorter = _without_entry(kept, error.field, path, dropped)
        if shorter is None:
            key = _field_key(error.field, path, kept)
            if key is None:
                break
            shorter = {k: v for k, v in kept.items() if k != key}
        kept = shorter
    return None, {}


_INDEX = re.compile(r"\[(\d+)\]")


def _in_file(error: ConfigError, dropped: Mapping[str, list[int]]) -> ConfigError:
    """``error`` with each list index moved back to the file's, past the entries dropped."""
    if not dropped:
        return error
    parts: list[str] = []
    position = 0
    for match in _INDEX.finditer(error.field):
        parts.append(error.field[position : match.start()])
        index = int(match[1])
        for gone in dropped.get("".join(parts), ()):  # ascending
            if gone <= index:
                index += 1
        parts.append(f"[{index}]")
        position = match.end()
    field = "".join(parts) + error.field[position:]
    if field == error.field:
        return error
    return ConfigError(field, error.value, error.problem, error.example)


def _without_entry(
    kept: Any, field: str, path: str, dropped: dict[str, list[int]]
) -> dict[str, Any] | None:
    """``kept`` without the list entry that the error at ``field`` is in, or ``None``.

    ``field`` uses the file's indices; ``dropped`` maps them to the shortened lists and
    records the entry dropped now.
    """
    prefix = f"{path}." if path else ""
    matches = list(_INDEX.finditer(field))
    if not isinstance(kept, Mapping) or not field.startswith(prefix) or not matches:
        return None
    # The route to the innermost index, in the shortened lists' indices: "retry_on[2].status"
    # drops retry_on[2], "backoff.custom.delays[1]" drops delays[1].
    route: list[Any] = []
    position = len(prefix)
    for match in matches:
        route += [key for key in field[position : match.start()].split(".") if key]
        route.append(_shortened(int(match[1]), dropped.get(field[: match.start()], ())))
        position = match.end()
    *route, entry = route
    result = dict(kept)
    container: Any = result
    for key in route:
        try:
            child = container[key]
        except (KeyError, IndexError, TypeError):
            return None
        if not isinstance(child, (Mapping, list)):
            return None
        container[key] = container = dict(child) if isinstance(child, Mapping) else list(child)
    if not isinstance(container, list) or not 0 <= entry < len(container):
        return None
    del container[entry]
    gone = dropped.setdefault(field[: matches[-1].start()], [])
    gone.append(int(matches[-1][1]))
    gone.sort()
    return result


def _shortened(index: int, gone: Any) -> int:
    """Where entry ``index`` of the file's list is once the entries ``gone`` are dropped."""
    return index - sum(1 for other in gone if other < index)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def attempt(
    report: Report, build: Callable[[Any], Any], value: Any, *, record: bool = True
) -> tuple[Any, ConfigError | None]:
    """Call ``build(value)``; record its error (if ``record``), or its warnings on success."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = build(value)
        except ConfigError as error:
            if record:
                report.error(error)
            return None, error
    for warning in caught:
        report.warn(str(warning.message))
    return result, None


def _field_key(error_path: str, path: str, kept: Any) -> str | None:
    """The key of ``kept`` (the fields at ``path``) that the error at ``error_path`` is about."""
    if not isinstance(kept, Mapping):
        return None
    prefix = f"{path}." if path else ""
    if not error_path.startswith(prefix):
        return None
    head = re.split(r"[.\[]", error_path[len(prefix) :], maxsplit=1)[0]
    for key in _SPELLINGS.get(head, (head,)):
        if key in kept:
            return key
    return None
