"""``retrymw check``: validate config files, reporting every error and likely mistakes.

`load_config` stops at the first error. To report them all, the file is validated piece by
piece (the defaults, each policy over the valid defaults, each breaker and budget), and within
a piece the offending field is dropped and the piece validated again until it passes. An error
in one entry of a list (``retry_on[2]``, ``delays[1]``) drops only that entry, so the other
entries are checked too and keep their indices in the messages.

Each finding carries the line that writes its field: YAML files give it exactly (the parser's
node marks), TOML files by a search for the key's line (`_config.files`); a field with no line
of its own (a value inside an inline table) gets its enclosing field's.
"""

from __future__ import annotations

import argparse
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .._config.files import line_of, read_document
from .._config.loader import RetryConfig, load_config
from .._core.backoff import CustomBackoff
from .._core.errors import ConfigError
from .._core.policy import RetryPolicy
from ._common import EXIT_FAILURE, EXIT_OK, human_duration

__all__ = [
    "DESCRIPTION",
    "EPILOG",
    "HELP",
    "NAME",
    "Finding",
    "Report",
    "check_data",
    "check_file",
]

NAME = "check"
HELP = "validate config files: every error with its line and field path, and warnings"
DESCRIPTION = """\
Validate retrymw config files (YAML or TOML). Every error is printed with its line (exact for
YAML, the key's line for TOML), its field path, the bad value and an accepted example; every
bad entry of a list is reported, not only the first. Warnings point at settings that are valid but
probably not what was meant: a backoff without a delay, a retry_budget or deadline shorter
than the first delay, jitter on a custom delay list, attempts=1 with retry fields set."""
EPILOG = """\
examples:
  retrymw check policies.yaml
  retrymw check retry.toml other.yaml
  retrymw check --strict policies.yaml        warnings fail the check too"""

_SECTIONS = ("retry_defaults", "policies", "breakers", "budgets")
# Where a field can be spelt another way: RetryPolicy names the canonical field in its errors.
_SPELLINGS = {
    "initial_delay": ("initial_delay", "delay"),
    "attempts": ("attempts", "max_attempts", "retry"),
}
_RETRY_FIELDS = (
    *("backoff", "initial_delay", "delay", "max_delay", "jitter", "jitter_factor"),
    *("retry_budget", "retry_on"),
)
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
        lines: field path → line in the file, for the findings' lines.
    """

    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)
    breakers: list[str] = field(default_factory=list)
    budgets: list[str] = field(default_factory=list)
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


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``check`` arguments to ``parser``."""
    parser.add_argument("configs", nargs="+", metavar="CONFIG", help="a .yaml or .toml file")
    parser.add_argument("--strict", action="store_true", help="fail on warnings too")


def run(args: argparse.Namespace) -> int:
    """Check every file named in ``args`` and print what was found."""
    failed = False
    for name in args.configs:
        report = check_file(name)
        for kind, findings in (("error", report.errors), ("warning", report.warnings)):
            # In file order; findings about the whole file (no line) first.
            for finding in sorted(findings, key=lambda found: found.line or 0):
                # file:line: is what editors and terminals turn into a link to the line.
                where = f"{name}:{finding.line}: " if finding.line is not None else ""
                print(f"{kind}: {where}{finding.message}")
        print(f"{name}: {_summary(report)}")
        failed = failed or bool(report.errors) or (args.strict and bool(report.warnings))
    return EXIT_FAILURE if failed else EXIT_OK


def _summary(report: Report) -> str:
    warned = _count(len(report.warnings), "warning")
    if report.errors:
        return f"{_count(len(report.errors), 'error')}, {warned}"
    parts = [_count(len(report.policies), "policy", "policies")]
    if report.policies:
        parts[0] += f" ({', '.join(report.policies)})"
    parts += [_count(len(report.breakers), "breaker"), _count(len(report.budgets), "budget")]
    return f"OK: {', '.join(parts)}; {warned}"


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n or 'no'} {singular if n == 1 else plural or singular + 's'}"


def check_file(path: str) -> Report:
    """Check the config file at ``path``.

    Raises:
        OSError: the file cannot be read.
        ImportError: it is YAML and PyYAML is missing.
    """
    try:
        document = read_document(Path(path))
    except ConfigError as error:  # not YAML/TOML, a syntax error (its message has the line)
        return Report(errors=[Finding(str(error))])
    return check_data(document.data, lines=document.lines)


def check_data(data: Any, *, lines: Mapping[str, int] | None = None) -> Report:
    """Check a parsed config (a mapping shaped like the file).

    Args:
        data: the parsed file.
        lines: field path → line, as `read_document` finds them; ``None`` for no lines.
    """
    report = Report(lines=lines or {})
    if not isinstance(data, Mapping):
        example = "retry_defaults: {attempts: 3}"
        report.error(ConfigError("config", data, "the top level must be a mapping", example))
        return report
    keys = set(data)
    if "retry_config" in keys and len(keys) > 1:
        _attempt(report, load_config, data)  # reports the conflicting keys, nothing to salvage
        return report
    if "retry_config" in keys:
        _check_defaults(
            report, data["retry_config"], "retry_config", lambda raw: {"retry_config": raw}
        )
        return report
    if not keys & set(_SECTIONS) and keys:
        _check_defaults(report, data, "", lambda raw: raw)  # a bare mapping of policy fields
        return report
    for key in sorted(keys - set(_SECTIONS), key=str):
        # load_config names the unknown key; "policies: {}" keeps it in the sectioned form.
        _attempt(report, load_config, {"policies": {}, key: data[key]})
    defaults = _check_defaults(
        report, data.get("retry_defaults"), "retry_defaults", lambda raw: {"retry_defaults": raw}
    )
    _check_policies(report, data.get("policies"), defaults)
    for section in ("breakers", "budgets"):
        _check_components(report, section, data.get(section))
    return report


def _check_defaults(
    report: Report, raw: Any, path: str, wrap: Callable[[Any], Any]
) -> Mapping[str, Any]:
    """Validate the defaults; return the fields that survived, for the policies to merge over."""
    config, kept = _prune(report, raw, path, lambda fields: load_config(wrap(fields)))
    if isinstance(config, RetryConfig):
        _lint(report, path, config.defaults, kept, None)
        return kept
    return {}


def _check_policies(report: Report, raw: Any, defaults: Mapping[str, Any]) -> None:
    if not isinstance(raw, Mapping):
        if raw is not None:
            _attempt(report, load_config, {"policies": raw})
        return
    base = _quiet(lambda: load_config({"retry_defaults": dict(defaults)}).defaults)
    for name, fields in raw.items():
        path = f"policies.{name}"

        def build(kept: Any, name: Any = name) -> RetryConfig:
            return load_config({"retry_defaults": dict(defaults), "policies": {name: kept}})

        config, kept = _prune(report, fields, path, build)
        if isinstance(config, RetryConfig):
            report.policies.append(str(name))
            _lint(report, path, config.policy(name), kept, base)


def _check_components(report: Report, section: str, raw: Any) -> None:
    if not isinstance(raw, Mapping):
        if raw is not None:
            _attempt(report, load_config, {section: raw})
        return
    for name, options in raw.items():
        path = f"{section}.{name}"

        def build(kept: Any, name: Any = name) -> object:
            config = load_config({section: {name: kept}})
            # load_config only checks durations; building the object checks everything.
            return config.breaker(name) if section == "breakers" else config.budget(name)

        built, _ = _prune(report, options, path, build)
        if built is not None:
            getattr(report, section).append(str(name))


def _prune(
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
        result, error = _attempt(report, build, kept, record=False)
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


def _attempt(
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


def _quiet(build: Callable[[], RetryPolicy]) -> RetryPolicy | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return build()
        except ConfigError:
            return None


def _lint(
    report: Report,
    path: str,
    policy: RetryPolicy,
    fields: Mapping[str, Any],
    defaults: RetryPolicy | None,
) -> None:
    """Warn about valid settings that are probably mistakes.

    A policy inherits the defaults' mistakes; they are reported once, on the defaults.
    """
    where = f"{path}." if path else ""
    for key, message in _smells(policy, fields):
        if defaults is not None and message in dict(_smells(defaults, {})).values():
            continue
        report.warn(f"{where}{key}: {message}")


def _smells(policy: RetryPolicy, fields: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for every suspicious setting of ``policy``."""
    found: list[tuple[str, str]] = []
    if policy.attempts == 1:
        pointless = [key for key in _RETRY_FIELDS if key in fields]
        if pointless:
            found.append(
                ("attempts", f"attempts=1 never retries, so {', '.join(pointless)} have no effect")
            )
        return found
    first = policy.delay_for(1)
    budget, deadline = policy.retry_budget, policy.deadline
    if budget is not None and budget < first:
        found.append(
            (
                "retry_budget",
                f"{human_duration(budget)} is shorter than the first delay "
                f"({human_duration(first)}), so the policy never retries",
            )
        )
    if deadline is not None and deadline <= first:
        found.append(
            (
                "deadline",
                f"{human_duration(deadline)} is not longer than the first delay "
                f"({human_duration(first)}), so the policy never retries",
            )
        )
    if policy.jitter is not None and isinstance(policy.backoff, CustomBackoff):
        found.append(
            (
                "jitter",
                f"{policy.jitter} jitter on a custom delay list: the listed delays are not "
                "slept as written (set jitter: false to keep them exact)",
            )
        )
    return found
