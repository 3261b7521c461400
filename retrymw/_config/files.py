"""Config files read into plain data: YAML or TOML, UTF-8, syntax errors pointing at the line.

This is the only part of loading config that touches the file system or a parser (`tomllib`,
or PyYAML, imported when a YAML file is read); `_config` validates what it returns.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from .._core.errors import ConfigError

# Private in name because the CLI imports it from `_config`, which re-exports it.
__all__ = ["_read"]


def _read(path: Path) -> Any:
    """Return the data in a ``.yaml``, ``.yml`` or ``.toml`` file (``{}`` if it holds none).

    Raises:
        ConfigError: an unknown suffix, text that is not UTF-8, or a syntax error; the message
            names the file and, for a syntax error, quotes its line when the parser gives one.
        ImportError: a YAML file was given and PyYAML is not installed.
    """
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml"):
        raise ConfigError(str(path), path.name, "unknown config file type", "a .yaml or .toml file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        bad = error.object[error.start : error.end]
        raise ConfigError(str(path), bad, "not UTF-8 text", "a UTF-8 file") from None
    if suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - tomli is a dependency on 3.10 only
            import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            found = re.search(r"line (\d+)", str(error))
            line = None if found is None else int(found[1])
            raise _syntax_error(path, "TOML", str(error), text, line) from None
    try:
        import yaml
    except ImportError:
        message = "reading YAML config files needs PyYAML: pip install 'retrymw[yaml]'"
        raise ImportError(message) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        message = getattr(error, "problem", None) or str(error)
        raise _syntax_error(path, "YAML", message, text, mark and mark.line + 1) from None
    return {} if data is None else data  # an empty or all-comment file


def _syntax_error(path: Path, kind: str, message: str, text: str, line: int | None) -> ConfigError:
    if line is None:
        return ConfigError(str(path), path.name, f"not valid {kind}: {message}", f"valid {kind}")
    lines = text.splitlines()
    found = lines[line - 1].strip() if 1 <= line <= len(lines) else "<end of file>"
    problem = f"not valid {kind} at line {line}: {message}"
    return ConfigError(str(path), found, problem, f"valid {kind}")
