"""Configuration files: `load_config` turns YAML, TOML or a mapping into a `RetryConfig`.

Policy fields are those of `RetryPolicy` plus the spellings users bring from other tools:
``max_attempts`` (legacy ``attempts``), ``retry: N`` (compact: N retries, N + 1 attempts) and
``delay`` (compact ``initial_delay``). ``backoff`` is a strategy name or a one-key mapping of a
strategy to its options, including the legacy ``initial`` (``delay`` for ``fixed``) and
``multiplier`` (``base``). Durations are ``30s``, ``500ms``, ``2m30s``, ``1h30m`` or ``{secs,
nanos}``; unlike the Python API, config rejects bare numbers, whose unit a reader must guess.

Reading a file into data is `files`'s; the way back, `to_mapping`, is `dump`'s and
re-exported here.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from .._core.backoff import (
    Backoff,
    CustomBackoff,
    ExponentialBackoff,
    FibonacciBackoff,
    FixedBackoff,
    LinearBackoff,
)
from .._core.durations import MAX_DURATION, parse_duration
from .._core.errors import ConfigError
from .._core.matchers import Matcher, compile_matcher
from .._core.policy import RetryPolicy
from .build import COMPONENTS, RetryConfig, components, unbound
from .dump import BACKOFF_EXAMPLE, MATCHER_EXAMPLE, to_mapping
from .files import LONGEST_INTEGER, MAX_ALIAS_NODES, Oversized, read_config_file

__all__ = ["MAX_ALIAS_NODES", "MAX_DURATION", "RetryConfig", "load_config", "to_mapping"]

_T = TypeVar("_T")

_SECTIONS = ("retry_defaults", "policies", *COMPONENTS)
_FIELDS = (
    *("name", "attempts", "backoff", "initial_delay", "max_delay", "jitter", "jitter_factor"),
    *("retry_on", "retry_budget", "timeout", "deadline", "on_failure", "retry_below"),
    *("max_attempts", "retry", "delay"),  # legacy and compact spellings
)
_CHECKED_BY_POLICY: tuple[str, ...] = ("name", "jitter", "jitter_factor", "on_failure")
_OPTIONS = {  # strategy → the options its mapping form accepts
    "fixed": ("delay",),
    "linear": ("increment", "initial"),
    "exponential": ("base", "multiplier", "initial"),
    "fibonacci": ("initial",),
    "custom": ("delays",),
}
_DURATION = '"30s", "500ms", "2m30s", "1h30m" or {secs: 1, nanos: 0}'
# Config integers stay in the signed 64-bit range, TOML's own: every count, status and option
# fits, and a 5 000-digit integer is refused before anything converts or prints it.
_INT_LIMIT = 2**63 - 1
_SHORTEST = 1e-9  # a non-zero duration below 1ns, the finest unit, is a typo (or an attack)
# The longest duration text is far shorter ("8760h", "0.000000001s", "1h59m59s999ms999us999ns"),
# and a longer one is shown by its start and length instead of 500 of its characters.
_LONGEST_DURATION = 64
# The seeds' on_failure words that mean one of ours (docs/configuration.md).
_ON_FAILURE_WORDS = {"stop": "raise"}
# Every spelling of the two fields whose conflict RetryPolicy reports (initial > max_delay).
_COUNTS = ("attempts", "max_attempts", "retry")
_INITIALS = ("initial_delay", "delay")


def load_config(source: str | os.PathLike[str] | Mapping[str, Any]) -> RetryConfig:
    """Load a `RetryConfig` from a ``.yaml``/``.yml``/``.toml`` file or from a mapping.

    Top-level keys are ``retry_defaults``, ``policies`` (name → fields merged over the
    defaults), ``breakers``, ``budgets``, ``throttles``, ``pacers`` and ``hedges``. A single
    ``retry_config:`` block, or a bare mapping of policy fields, is the defaults.

    Args:
        source: a path, or a mapping shaped like the file.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: ``source`` is neither a path nor a mapping, the file type is unknown, the
            file does not parse (also: a key written twice, aliases expanding past
            `MAX_ALIAS_NODES`), a value is invalid (also: an integer outside the 64-bit
            range, however many digits it is written with; a duration longer than
            `MAX_DURATION` or shorter than 1ns but not 0; a bare number for a pacer's rate or
            a hedge's ``after``), or a breaker, budget, throttle, pacer or hedge is keyed by a
            name that is no policy's; the message names the field path, the bad value (a long
            one by its start and length) and an accepted example, and for a misspelt name the
            close match.
        ImportError: a YAML file was given and PyYAML is not installed.

    Warns:
        UserWarning: a compact-form policy (``retry: N``) names a backoff but no delay.

    .. versionadded:: 0.1
    """
    if not isinstance(source, (Mapping, str, os.PathLike)):
        problem = "must be the path of a .yaml or .toml file, or a mapping shaped like one"
        raise ConfigError("config", source, problem, 'load_config("retry.yaml")')
    where = "config" if isinstance(source, Mapping) else os.fspath(source)
    data = source if isinstance(source, Mapping) else read_config_file(Path(source))
    if not isinstance(data, Mapping):
        raise ConfigError(where, data, "the top level must be a mapping", "retry_defaults: {}")
    _check_integers(data, "")
    top = _mapping(data, where, "retry_defaults: {attempts: 3}")
    keys = set(top)
    if "retry_config" in keys:
        if len(keys) > 1:
            problem = "must be the only top-level key; use retry_defaults beside policies"
            raise ConfigError("retry_config", sorted(keys), problem, "retry_defaults")
        top, defaults_path = {"retry_defaults": top["retry_config"]}, "retry_config"
    elif keys & set(_FIELDS) and not keys & set(_SECTIONS):
        top, defaults_path = {"retry_defaults": top}, ""  # a bare mapping of policy fields
    else:
        for key in sorted(keys - set(_SECTIONS)):
            known = ", ".join((*_SECTIONS, "retry_config"))
            problem = f"unknown top-level key, known: {known} (or only policy fields)"
            raise ConfigError(key, top[key], problem, "policies")
        defaults_path = "retry_defaults"

    notes: list[str] = []
    base = _policy_fields(top.get("retry_defaults"), defaults_path, notes, inherited={})
    policies = {}
    for name, raw in _mapping(top.get("policies"), "policies", "{payments: {}}").items():
        path = f"policies.{name}"
        # A policy is named after its key unless it says otherwise.
        merged = {**base, "name": name, **_policy_fields(raw, path, notes, inherited=base)}
        policies[name] = _build(merged, path)
    config = RetryConfig(
        defaults=_build(base, defaults_path),
        policies=policies,
        **{
            section: components(top.get(section), section, _mapping, _duration)
            for section in COMPONENTS
        },
    )
    # Build all the protection now, so a bad option is an error of load_config
    # (with its path) and not of the first request that needs it. They are cached and shared.
    for name in config.breakers:
        config.breaker(name)
    for name in config.budgets:
        config.budget(name)
    for name in config.throttles:
        config.throttle(name)
    for name in config.pacers:
        config.pacer(name)
    for name in config.hedges:
        config.hedge(name)
    # Then the names: protection binds to the policy of its name (a defaults' name included),
    # so any other name is a typo that would protect nothing. Options are reported first.
    policy_names = {*config.policies, config.defaults.name}
    for section in COMPONENTS:
        for name in getattr(config, section):
            error = unbound(section, name, policy_names)
            if error is not None:
                raise error
    for note in notes:  # only once everything is valid, and pointing at our caller
        warnings.warn(note, UserWarning, stacklevel=2)
    return config


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _mapping(value: Any, path: str, example: str) -> dict[str, Any]:
    """Return ``value`` as a dict with string keys; ``None`` (an empty YAML block) is empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(path, value, "must be a mapping", example)
    for key in value:
        if not isinstance(key, str):
            raise ConfigError(_join(path, str(key)), key, "keys must be strings", example)
    return dict(value)


def _check_integers(data: Any, path: str) -> None:
    """Refuse an integer outside the 64-bit range anywhere in ``data``, naming its path.

    The first one in the file's order is reported; an `Oversized` literal (more digits than any
    integer a file may hold, which the readers leave unconverted) counts as one. Each container
    is visited once, so shared or even cyclic data from Python code costs no more than its size
    (YAML aliases are bounded before this, by the file reader).
    """
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [(path, data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, Oversized) or (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not -_INT_LIMIT <= value <= _INT_LIMIT
        ):
            problem = "is out of range (64-bit at most)"
            raise ConfigError(where or "config", _shown_integer(value), problem, "3")
        if isinstance(value, (Mapping, list)) and id(value) not in seen:
            seen.add(id(value))
            found: list[tuple[str, Any]] = []
            if isinstance(value, Mapping):
                for key, item in value.items():
                    if not isinstance(key, str):  # keys must be strings: _mapping says so later
                        found.append((where, key))
                    found.append((_join(where, key if isinstance(key, str) else "?"), item))
            else:
                found.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
            stack.extend(reversed(found))  # the first in the file is popped first


def _shown_integer(value: int | Oversized) -> int | Oversized:
    """``value`` as an error shows it: short integers whole, long ones by start and length."""
    if isinstance(value, Oversized) or value.bit_length() <= 2 * LONGEST_INTEGER:
        return value
    try:
        text = str(value)
    except ValueError:  # Python refuses decimal text past 4 300 digits; hex has no limit
        text = f"{value:#x}"
    return Oversized(text)


def _duration(value: Any, path: str) -> float:
    if isinstance(value, (bool, int, float)):
        raise ConfigError(path, value, "a bare number has no unit", _DURATION)
    if not isinstance(value, (str, dict, timedelta)):
        raise ConfigError(path, value, "not a duration", _DURATION)
    if isinstance(value, str) and len(value) > _LONGEST_DURATION:
        problem = f"is too long for a duration (more than {_LONGEST_DURATION} characters)"
        raise ConfigError(path, Oversized(value, number=False), problem, _DURATION)
    seconds = parse_duration(value, field=path)
    if 0.0 < seconds < _SHORTEST:
        raise ConfigError(
            path, value, "is shorter than 1ns, the finest unit (0s is allowed)", "1ms"
        )
    return seconds


def _policy_fields(
    raw: Any, path: str, notes: list[str], *, inherited: Mapping[str, Any]
) -> dict[str, Any]:
    """Translate one mapping of config fields into `RetryPolicy` keyword arguments."""
    given = _mapping(raw, path or "config", "{attempts: 3, backoff: exponential}")
    for key, value in given.items():
        if key not in _FIELDS:
            problem = f"unknown policy field, known: {', '.join(_FIELDS)}"
            raise ConfigError(_join(path, key), value, problem, "attempts: 3")
    if isinstance(given.get("retry"), Mapping):
        return _step_fields(given, path, notes, inherited=inherited)
    # RetryPolicy validates these itself; _build prefixes its errors with the path.
    kwargs = {key: given[key] for key in _CHECKED_BY_POLICY if key in given}
    if isinstance(kwargs.get("on_failure"), str):
        kwargs["on_failure"] = _ON_FAILURE_WORDS.get(kwargs["on_failure"], kwargs["on_failure"])
    counts = [key for key in _COUNTS if key in given]
    delays = [key for key in _INITIALS if key in given]
    for group in (counts, delays):
        if len(group) > 1:
            problem = f"conflicts with {group[0]}; give only one of {', '.join(group)}"
            raise ConfigError(_join(path, group[1]), given[group[1]], problem, f"{group[0]} alone")
    for key in counts:
        count, low = given[key], 0 if key == "retry" else 1
        if isinstance(count, bool) or not isinstance(count, int) or count < low:
            example = "3, or a per-step mapping {max_attempts: 3}" if key == "retry" else "3"
            raise ConfigError(_join(path, key), count, f"must be an integer >= {low}", example)
        kwargs["attempts"] = count + 1 if key == "retry" else count
    for key in delays:
        kwargs["initial_delay"] = _duration(given[key], _join(path, key))
    if "max_delay" in given:
        kwargs["max_delay"] = _duration(given["max_delay"], _join(path, "max_delay"))
    for key in ("retry_budget", "timeout", "deadline"):
        if key in given:  # null turns an optional limit off, also over the defaults
            kwargs[key] = None if given[key] is None else _duration(given[key], _join(path, key))
    initial_path = _join(path, delays[0]) if delays else None
    if "backoff" in given:
        kwargs["backoff"], initial = _backoff(given["backoff"], _join(path, "backoff"), delays)
        if initial is not None:
            kwargs["initial_delay"], initial_path = initial
        elif "retry" in given and "initial_delay" not in {**inherited, **kwargs}:
            notes.append(
                f"{_join(path, 'backoff')}: a backoff without a delay; the default initial "
                "delay of 1s is used (add delay: 1s to say so)"
            )
    elif "retry" in given and "backoff" not in inherited:
        # The compact call options come from Constellation, whose RFC-006 says "fixed
        # (default)": retry: 5, delay: 1s waits 1, 1, 1, 1, 1, not 1, 2, 4, 8, 16.
        kwargs["backoff"] = FixedBackoff()
    _check_delays(given, path, {**inherited, **kwargs}, initial_path)
    if given.get("on_failure") == "fallback":
        problem = "needs a fallback callable, which config cannot hold"
        raise ConfigError(_join(path, "on_failure"), "fallback", problem, '"raise" or "continue"')
    if "retry_on" in given:
        kwargs["retry_on"] = _retry_on(given["retry_on"], _join(path, "retry_on"))
    if "retry_below" in given:
        # Checked here rather than by RetryPolicy, whose example is the Python spelling.
        below = given["retry_below"]
        if not isinstance(below, bool):
            problem = "must be true or false (a boolean, not text or a number)"
            raise ConfigError(_join(path, "retry_below"), below, problem, "retry_below: true")
        kwargs["retry_below"] = below
    return kwargs


def _step_fields(
    given: Mapping[str, Any], path: str, notes: list[str], *, inherited: Mapping[str, Any]
) -> dict[str, Any]:
    """Fields of a policy written as a seed's per-step block: ``retry: {max_attempts: 3}``.

    The mapping holds that policy's fields; fields beside it (``timeout: 5s``) apply too, but
    one field may not be given both inside and beside it.
    """
    step_path = _join(path, "retry")
    step = _mapping(given["retry"], step_path, "{max_attempts: 3, backoff: exponential}")
    outside = {key: value for key, value in given.items() if key != "retry"}
    for key, value in step.items():
        for other in _spellings(key):
            if other in outside:
                problem = f"is also given beside the retry block, as {other}; give it once"
                raise ConfigError(_join(step_path, key), value, problem, f"{other} alone")
    fields = _policy_fields(outside, path, notes, inherited=inherited)
    inner = _policy_fields(step, step_path, notes, inherited={**inherited, **fields})
    # RetryPolicy checks these fields itself: check them alone, so that an error is on its
    # path inside the block.
    _build({key: inner[key] for key in _CHECKED_BY_POLICY if key in inner}, step_path)
    return {**fields, **inner}


def _spellings(key: str) -> tuple[str, ...]:
    for group in (_COUNTS, _INITIALS):
        if key in group:
            return group
    return (key,)


def _check_delays(
    given: Mapping[str, Any], path: str, fields: Mapping[str, Any], initial_path: str | None
) -> None:
    """Report an initial delay above ``max_delay`` on the field the user wrote, as written.

    `RetryPolicy` would name ``initial_delay`` even when the file sets only ``max_delay`` (and
    inherits the 1s default), or spells the delay ``delay`` or ``backoff.exponential.initial``.
    """
    default = RetryPolicy()
    initial = fields.get("initial_delay", default.initial_delay)
    cap = fields.get("max_delay", default.max_delay)
    if initial <= cap or isinstance(fields.get("backoff"), CustomBackoff):
        return
    where = "the default" if "initial_delay" not in fields else "inherited"
    if initial_path is not None:
        written = _written(given, initial_path[len(path) + 1 if path else 0 :])
        problem = f"exceeds max_delay ({_seconds(cap)})"
        raise ConfigError(initial_path, written, problem, f"at most {_seconds(cap)}")
    if "max_delay" in given:
        problem = f"is shorter than the initial delay ({_seconds(initial)}, {where})"
        example = f"at least {_seconds(initial)}, or a shorter delay"
        raise ConfigError(_join(path, "max_delay"), given["max_delay"], problem, example)


def _written(given: Mapping[str, Any], relative: str) -> Any:
    """The raw value at dotted ``relative`` path inside ``given``."""
    value: Any = given
    for key in relative.split("."):
        value = value[key]
    return value


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _backoff(
    value: Any, path: str, delays: Sequence[str]
) -> tuple[Backoff, tuple[float, str] | None]:
    """Return the strategy and the legacy initial delay given inside it (with its path)."""
    if isinstance(value, str):
        name, options = value, None
    elif isinstance(value, Mapping) and len(value) == 1:
        ((name, options),) = value.items()
    else:
        problem = "must be a strategy name or a mapping of one strategy to its options"
        raise ConfigError(path, value, problem, BACKOFF_EXAMPLE)
    if name not in _OPTIONS:
        known = ", ".join(_OPTIONS)
        raise ConfigError(path, value, f"unknown backoff strategy, known: {known}", BACKOFF_EXAMPLE)
    where = f"{path}.{name}"
    given = _mapping(options, where, BACKOFF_EXAMPLE)
    for key, option in given.items():
        if key not in _OPTIONS[name]:
            problem = f"unknown {name} option, known: {', '.join(_OPTIONS[name])}"
            raise ConfigError(f"{where}.{key}", option, problem, BACKOFF_EXAMPLE)
    initial_key = "delay" if name == "fixed" else "initial"
    initial: tuple[float, str] | None = None
    if initial_key in given:
        if delays:
            problem = f"conflicts with {delays[0]}; give the initial delay once"
            raise ConfigError(f"{where}.{initial_key}", given[initial_key], problem, "1s")
        initial_path = f"{where}.{initial_key}"
        initial = _duration(given[initial_key], initial_path), initial_path
    if name == "linear":
        step = given.get("increment")
        increment = None if step is None else _duration(step, f"{where}.increment")
        return LinearBackoff(increment), initial
    if name == "exponential":
        if "base" in given and "multiplier" in given:
            problem = "conflicts with base; multiplier is its legacy name"
            raise ConfigError(f"{where}.multiplier", given["multiplier"], problem, "base: 2.0")
        key = "multiplier" if "multiplier" in given else "base"
        try:
            return ExponentialBackoff(given.get(key, 2.0)), initial
        except ConfigError as error:  # it names its field "backoff.base"
            raise ConfigError(f"{where}.{key}", error.value, error.problem, "2.0") from None
    if name == "custom":
        listed = given.get("delays")
        if not isinstance(listed, list):
            example = '{custom: {delays: ["500ms", "1s", "5s"]}}'
            raise ConfigError(f"{where}.delays", listed, "must be a list", example)
        parsed = [_duration(item, f"{where}.delays[{i}]") for i, item in enumerate(listed)]
        return CustomBackoff(parsed), initial
    return (FixedBackoff() if name == "fixed" else FibonacciBackoff()), initial


def _retry_on(value: Any, path: str) -> Matcher | None:
    for index, entry in enumerate(value if isinstance(value, list) else [value]):
        where = f"{path}[{index}]" if isinstance(value, list) else path
        # Config holds data only: exception classes and predicates belong in Python code.
        if not isinstance(entry, (str, int, dict, type(None))) or isinstance(entry, bool):
            problem = "must be a matcher name, a status, {pattern: ...} or {status: [...]}"
            raise ConfigError(where, entry, problem, MATCHER_EXAMPLE)
        if isinstance(entry, dict) and entry.get("status", 0) in ([], ()):
            # An empty list would build a matcher that matches nothing: surely not meant.
            problem = "lists no status, so it would never match"
            raise ConfigError(f"{where}.status", entry["status"], problem, "[502, 503]")
    return compile_matcher(value, field=path)


def _build(kwargs: Mapping[str, Any], path: str) -> RetryPolicy:
    try:
        return RetryPolicy(**kwargs)
    except ConfigError as error:
        raise (error.at(path) if path else error) from None
