"""``retrymw check``: validate config files, reporting every error and likely mistakes.

`load_config` stops at the first error. To report them all, the file is validated piece by
piece (the defaults, each policy over the valid defaults, each breaker, budget and throttle),
and within a piece the offending field is dropped and the piece validated again until it
passes. An error in one entry of a list (``retry_on[2]``, ``delays[1]``) drops only that entry,
so the other entries are checked too and keep their indices in the messages. A breaker, budget
or throttle is checked twice: its name against the file's policy names, and its options.

Each finding carries the line that writes its field: YAML files give it exactly (the parser's
node marks), TOML files by a search for the key's line (`_config.files`); a field with no line
of its own (a value inside an inline table) gets its enclosing field's.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._config.build import COMPONENTS, unbound
from .._config.files import read_document
from .._config.loader import RetryConfig, load_config
from .._core.backoff import CustomBackoff
from .._core.errors import ConfigError
from .._core.policy import RetryPolicy
from ._common import EXIT_FAILURE, EXIT_OK, human_duration
from ._findings import Finding, Report, attempt, prune

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
bad entry of a list is reported, not only the first; so is a breaker, budget, throttle, pacer
or hedge keyed by a name that is no policy's (with the close match). Warnings point at settings
that are valid but probably not what was meant: a backoff without a delay, a retry_budget or
deadline shorter than the first delay, jitter on a custom delay list, attempts=1 with retry
fields set."""
EPILOG = """\
examples:
  retrymw check policies.yaml
  retrymw check retry.toml other.yaml
  retrymw check --strict policies.yaml        warnings fail the check too"""

_SECTIONS = ("retry_defaults", "policies", *COMPONENTS)
# Building the object checks every option (load_config's first pass only checks durations).
_BUILDERS: Mapping[str, Callable[[RetryConfig, str], object]] = {
    "breakers": RetryConfig.breaker,
    "budgets": RetryConfig.budget,
    "throttles": RetryConfig.throttle,
    "pacers": RetryConfig.pacer,
    "hedges": RetryConfig.hedge,
}
# Where a field can be spelt another way: RetryPolicy names the canonical field in its errors.
_RETRY_FIELDS = (
    *("backoff", "initial_delay", "delay", "max_delay", "jitter", "jitter_factor"),
    *("retry_budget", "retry_on"),
)


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
    parts += [
        _count(len(report.breakers), "breaker"),
        _count(len(report.budgets), "budget"),
        _count(len(report.throttles), "throttle"),
        _count(len(report.pacers), "pacer"),
        _count(len(report.hedges), "hedge"),
    ]
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
        attempt(report, load_config, data)  # reports the conflicting keys, nothing to salvage
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
        attempt(report, load_config, {"policies": {}, key: data[key]})
    defaults = _check_defaults(
        report, data.get("retry_defaults"), "retry_defaults", lambda raw: {"retry_defaults": raw}
    )
    _check_policies(report, data.get("policies"), defaults)
    known = _policy_names(data)
    for section in COMPONENTS:
        _check_components(report, section, data.get(section), known)
    return report


def _policy_names(data: Mapping[Any, Any]) -> set[str]:
    """The names protection may be keyed by: the policies' keys and the defaults' name."""
    defaults, policies = data.get("retry_defaults"), data.get("policies")
    name = defaults.get("name") if isinstance(defaults, Mapping) else None
    names = {name if isinstance(name, str) and name else "default"}
    if isinstance(policies, Mapping):
        names.update(key for key in policies if isinstance(key, str))
    return names


def _check_defaults(
    report: Report, raw: Any, path: str, wrap: Callable[[Any], Any]
) -> Mapping[str, Any]:
    """Validate the defaults; return the fields that survived, for the policies to merge over."""
    config, kept = prune(report, raw, path, lambda fields: load_config(wrap(fields)))
    if isinstance(config, RetryConfig):
        _lint(report, path, config.defaults, kept, None)
        return kept
    return {}


def _check_policies(report: Report, raw: Any, defaults: Mapping[str, Any]) -> None:
    if not isinstance(raw, Mapping):
        if raw is not None:
            attempt(report, load_config, {"policies": raw})
        return
    base = _quiet(lambda: load_config({"retry_defaults": dict(defaults)}).defaults)
    for name, fields in raw.items():
        path = f"policies.{name}"

        def build(kept: Any, name: Any = name) -> RetryConfig:
            return load_config({"retry_defaults": dict(defaults), "policies": {name: kept}})

        config, kept = prune(report, fields, path, build)
        if isinstance(config, RetryConfig):
            report.policies.append(str(name))
            _lint(report, path, config.policy(name), kept, base)


def _check_components(report: Report, section: str, raw: Any, known: set[str]) -> None:
    if not isinstance(raw, Mapping):
        if raw is not None:
            attempt(report, load_config, {section: raw})
        return
    for name, options in raw.items():
        path = f"{section}.{name}"
        error = unbound(section, name, known) if isinstance(name, str) else None
        if error is not None:
            report.error(error)
        # The options are checked alone, beside a policy of the entry's name so that the
        # name (reported just above) does not hide them.
        policies: dict[str, Any] = {name: {}} if isinstance(name, str) and name else {}

        def build(kept: Any, name: Any = name, policies: Any = policies) -> object:
            config = load_config({"policies": policies, section: {name: kept}})
            return _BUILDERS[section](config, name)

        built, _ = prune(report, options, path, build)
        if built is not None:
            getattr(report, section).append(str(name))


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
