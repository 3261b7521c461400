"""Config files read into plain data: YAML or TOML, UTF-8, syntax errors pointing at the line.

This is the only part of loading config that touches the file system or a parser (`tomllib`,
or PyYAML, imported when a YAML file is read); `loader` validates what it returns.

A YAML file is read by a `yaml.SafeLoader` with two guards (`_guarded_loader`): aliases may
bring in at most `MAX_ALIAS_NODES` values in all, so that a kilobyte "billion laughs" file is
refused in milliseconds instead of expanding into gigabytes wherever the data is walked or
shown; and a key written twice in one mapping is an error naming both lines instead of a
silent last-one-wins. `read_document` also returns where each field path is written, for
``retrymw check``: YAML from the parser's node marks, TOML by a best-effort scan of the text
for the key's line (tomllib keeps no positions).

An integer written with more than 64 significant digits is no count, status or option of any
config: it is read as an `Oversized` value (the text as written) instead of being converted,
which Python refuses past 4 300 digits with a ``ValueError``, so that `load_config` reports it
as a `ConfigError` naming its field. PyYAML is asked through its integer constructor; tomllib
has no such hook, so a TOML file whose integer it refuses is read again with the long integers
set aside (`_toml_with_long_integers`).
"""

from __future__ import annotations

import functools
import re
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .._core.errors import ConfigError
from .._core.redact import redact_text

# Private in name because the CLI imports them from `_config`.
__all__ = [
    "LONGEST_INTEGER",
    "MAX_ALIAS_NODES",
    "Document",
    "Oversized",
    "read_config_file",
    "line_of",
    "read_document",
    "too_long",
]

#: At most this many values may come into a YAML document through aliases (``*name``), counted
#: as they would be expanded. A real config reuses a few blocks (``<<: *defaults`` in a hundred
#: policies is a few thousand); a "billion laughs" file needs millions.
MAX_ALIAS_NODES = 100_000

#: An integer literal with more significant digits than this is read as `Oversized`, not
#: converted: the largest 64-bit integer has 19 decimal digits (and 64 binary ones).
LONGEST_INTEGER = 64


@dataclass(frozen=True, slots=True)
class Oversized:
    """A value too long to be any config value, kept as written; shown by its start and length.

    Attributes:
        text: the value as the file writes it (an integer literal, or a text).
        number: whether it is a number, shown without quotes.
    """

    text: str
    number: bool = True

    def __repr__(self) -> str:
        # Redacted before it is cut, so that a cut never leaves half a secret unredacted.
        start = redact_text(self.text)[:20]
        shown = start if self.number else repr(start)
        return f"{shown}… ({len(self.text)} characters)"


def too_long(literal: str) -> bool:
    """Whether integer ``literal`` has more than `LONGEST_INTEGER` significant digits.

    Signs, a ``0x``/``0o``/``0b`` prefix, ``_`` separators and leading zeros do not count.
    """
    body = literal.lstrip("+-")
    if body[:2].lower() in ("0x", "0o", "0b"):
        body = body[2:]
    return len(body.replace("_", "").lstrip("0")) > LONGEST_INTEGER


@dataclass(frozen=True, slots=True)
class Document:
    """A parsed config file: its data and, per field path, the line that writes it.

    Attributes:
        data: the file's content as plain Python data (``{}`` for an empty file).
        lines: field path (``"policies.a.retry_on[2]"``) → 1-based line; paths the reader
            could not place are missing (see `line_of`).
    """

    data: Any
    lines: Mapping[str, int] = field(default_factory=dict)


def read_config_file(path: Path) -> Any:
    """Return the data in a ``.yaml``, ``.yml`` or ``.toml`` file (``{}`` if it holds none).

    Raises:
        ConfigError: see `read_document`.
        ImportError: a YAML file was given and PyYAML is not installed.
    """
    return read_document(path).data


def read_document(path: Path) -> Document:
    """Read a ``.yaml``, ``.yml`` or ``.toml`` file into a `Document`.

    Raises:
        ConfigError: an unknown suffix, text that is not UTF-8, a syntax error, a key given
            twice, or aliases that expand past `MAX_ALIAS_NODES`; the message names the file
            and, when the parser gives one, the line.
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
        return _read_toml(path, text)
    return _read_yaml(path, text)


def line_of(lines: Mapping[str, int], path: str) -> int | None:
    """The line of field ``path``, or of its nearest enclosing field that has one.

    ``policies.a.backoff.exponential.base`` falls back to ``policies.a.backoff`` when the
    reader placed only that (a TOML inline table), and ``delays[3]`` to ``delays``.
    """
    while path:
        line = lines.get(path)
        if line is not None:
            return line
        cut = max(path.rfind("."), path.rfind("["))
        path = path[:cut] if cut > 0 else ""
    return None


def _read_toml(path: Path, text: str) -> Document:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - tomli is a dependency on 3.10 only
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise _toml_error(path, text, error) from None
    except ValueError:  # an integer past Python's int-string limit, which tomllib converts
        data = _toml_with_long_integers(path, text, tomllib)
    return Document(data, _toml_lines(text))


def _toml_error(path: Path, text: str, error: ValueError) -> ConfigError:
    found = re.search(r"line (\d+)", str(error))
    line = None if found is None else int(found[1])
    return _syntax_error(path, "TOML", str(error), text, line)


# The TOML tokens a long integer may hide in (strings, comments), then the bare words (keys,
# numbers, dates, booleans). A multi-line string may end in two more quotes ("""""), and no
# alternative can match the same text two ways, so that a failed try costs one pass.
_TOML_TOKEN = re.compile(
    r'(?P<skip>"""(?:[^"\\]|\\[\s\S]|"(?!""))*"{3,5}'
    r"|'''(?:[^']|'(?!''))*'{3,5}"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'[^'\n]*'"
    r"|#[^\n]*)"
    r"|(?P<word>[A-Za-z0-9_.:+-]+)"
)
_TOML_INTEGER = re.compile(r"[+-]?(?:0x[0-9A-Fa-f_]+|0o[0-7_]+|0b[01_]+|[0-9_]+)")


def _toml_with_long_integers(path: Path, text: str, tomllib: ModuleType) -> Any:
    """Read ``text`` with each integer of more than `LONGEST_INTEGER` digits as `Oversized`.

    Each such integer is replaced by a string holding a marker no file can know (random per
    read), the text is parsed again, and the markers are put back as `Oversized` values (or,
    for a bare key made of digits, as the key's own text). One scan and one parse: linear.

    Raises:
        ConfigError: the text is not valid TOML, or holds an integer this scan did not find.
    """
    marker = secrets.token_hex(16)
    literals: list[str] = []

    def set_aside(match: re.Match[str]) -> str:
        word = match.group()
        if match.lastgroup != "word" or not _TOML_INTEGER.fullmatch(word) or not too_long(word):
            return word
        literals.append(word)
        return f'"{marker}:{len(literals) - 1}"'

    try:
        data = tomllib.loads(_TOML_TOKEN.sub(set_aside, text))
    except tomllib.TOMLDecodeError as error:
        raise _toml_error(path, text, error) from None
    except ValueError:  # an integer the scan missed: still a ConfigError, naming the file
        problem = f"not valid TOML: an integer has more than {LONGEST_INTEGER} digits"
        raise ConfigError(str(path), path.name, problem, "valid TOML") from None
    _put_back(data, f"{marker}:", literals)
    return data


def _put_back(data: dict[str, Any], marker: str, literals: list[str]) -> None:
    """Replace, in place, each ``marker`` string in ``data`` by the literal it stands for."""

    def literal(text: Any) -> str | None:
        is_marker = isinstance(text, str) and text.startswith(marker)
        return literals[int(text[len(marker) :])] if is_marker else None

    stack: list[dict[str, Any] | list[Any]] = [data]
    while stack:
        container = stack.pop()
        if isinstance(container, list):
            for index, value in enumerate(container):
                found = literal(value)
                if found is not None:
                    container[index] = Oversized(found)
                elif isinstance(value, (dict, list)):
                    stack.append(value)
            continue
        # A bare key of digits is text: it keeps its place and its own spelling.
        renamed = {literal(key) or key: value for key, value in container.items()}
        container.clear()
        for key, value in renamed.items():
            found = literal(value)
            container[key] = value if found is None else Oversized(found)
            if isinstance(value, (dict, list)):
                stack.append(value)


def _read_yaml(path: Path, text: str) -> Document:
    try:
        import yaml
    except ImportError:
        message = "reading YAML config files needs PyYAML: pip install 'retrymw[yaml]'"
        raise ImportError(message) from None
    try:
        loader = _guarded_loader()(text)
    except yaml.reader.ReaderError as error:  # the reader checks every character up front
        line = text.count("\n", 0, error.position) + 1
        message = f"character #x{error.character:04x} is not allowed: {error.reason}"
        raise _syntax_error(path, "YAML", message, text, line) from None
    try:
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        message = getattr(error, "problem", None) or str(error)
        raise _syntax_error(path, "YAML", message, text, mark and mark.line + 1) from None
    finally:
        loader.dispose()
    lines: dict[str, int] = {}
    if node is not None:
        _node_lines(node, "", lines)
    return Document({} if data is None else data, lines)  # {}: an empty or all-comment file


@functools.cache
def _guarded_loader() -> type[Any]:
    """The `yaml.SafeLoader` subclass with the alias and duplicate-key guards (built once)."""
    import yaml
    from yaml.composer import ComposerError
    from yaml.constructor import ConstructorError

    class GuardedLoader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            # id(node) → how many values the node stands for once its aliases are expanded.
            self.expanded: dict[int, int] = {}
            self.composed = 0  # values composed so far, aliases counted expanded
            self.aliased = 0  # of which brought in by aliases

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()  # type: ignore[no-untyped-call]
                target = self.anchors.get(event.anchor)
                if target is not None:  # an undefined alias is the composer's own error
                    size = self.expanded.get(id(target))
                    if size is None:  # &a [*a]: the anchor's node is still being composed
                        raise ComposerError(
                            None, None, f"alias *{event.anchor} refers to itself", event.start_mark
                        )
                    self.aliased += size
                    if self.aliased > MAX_ALIAS_NODES:
                        problem = (
                            f"aliases expand to more than {MAX_ALIAS_NODES} values "
                            f"(refused at *{event.anchor}; a 'billion laughs' file?)"
                        )
                        raise ComposerError(None, None, problem, event.start_mark)
                    self.composed += size
                return super().compose_node(parent, index)
            start = self.composed
            node = super().compose_node(parent, index)
            self.composed += 1
            self.expanded[id(node)] = self.composed - start
            return node

        def construct_yaml_int(self, node: Any) -> Any:
            literal = self.construct_scalar(node)
            if isinstance(literal, str) and too_long(literal):
                return Oversized(literal)  # see the module documentation
            return super().construct_yaml_int(node)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: dict[tuple[str, str], Any] = {}
                for key_node, _ in node.value:
                    # Merge keys (<<) may be overridden by design; compare written scalars only.
                    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                        continue
                    first = seen.setdefault((key_node.tag, key_node.value), key_node)
                    if first is not key_node:
                        problem = (
                            f"key {key_node.value[:80]!r} appears twice in one mapping, at line "
                            f"{first.start_mark.line + 1} and line {key_node.start_mark.line + 1}"
                        )
                        raise ConstructorError(None, None, problem, key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

    GuardedLoader.add_constructor("tag:yaml.org,2002:int", GuardedLoader.construct_yaml_int)
    return GuardedLoader


def _node_lines(node: Any, path: str, lines: dict[str, int]) -> None:
    """Record the line of every field path under ``node`` (the first one written wins).

    Aliased nodes are walked once per path that reaches them: the composer has already
    bounded that to `MAX_ALIAS_NODES` in all.
    """
    import yaml

    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and not key_node.tag.endswith(":merge"):
                child = f"{path}.{key_node.value}" if path else str(key_node.value)
                # The key's line, which is also the value's for every block-style field.
                lines.setdefault(child, key_node.start_mark.line + 1)
                _node_lines(value_node, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _node_lines(item, f"{path}[{index}]", lines)


_TOML_HEADER = re.compile(r"\s*\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_PART = re.compile(r"[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'")
_TOML_KEY = re.compile(rf"\s*((?:{_TOML_PART.pattern})(?:\s*\.\s*(?:{_TOML_PART.pattern}))*)\s*=")


def _toml_lines(text: str) -> dict[str, int]:
    """Best effort: the line of each ``[table]`` header and ``key =`` assignment, by path.

    Inline tables and multi-line arrays are placed at their key's line; an array of tables
    (``[[x]]``) is placed at its first header.
    """
    lines: dict[str, int] = {}
    table: list[str] = []
    depth = 0  # open brackets and braces of a multi-line value: its lines hold no keys
    for number, line in enumerate(text.splitlines(), start=1):
        if depth == 0:
            header = _TOML_HEADER.match(line)
            if header is not None:
                table = _toml_parts(header[1])
                lines.setdefault(".".join(table), number)
                continue
            key = _TOML_KEY.match(line)
            if key is not None:
                parts = [*table, *_toml_parts(key[1])]
                for end in range(len(table) + 1, len(parts) + 1):  # a.b.c = 1 writes a.b too
                    lines.setdefault(".".join(parts[:end]), number)
        depth = max(depth + _toml_depth(line), 0)
    return lines


def _toml_parts(dotted: str) -> list[str]:
    return [part.strip("\"'") for part in _TOML_PART.findall(dotted)]


def _toml_depth(line: str) -> int:
    """How many brackets and braces ``line`` leaves open, ignoring strings and comments."""
    code = re.sub(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'", '""', line).split("#", 1)[0]
    return code.count("[") + code.count("{") - code.count("]") - code.count("}")


def _syntax_error(path: Path, kind: str, message: str, text: str, line: int | None) -> ConfigError:
    # A parser's message may quote a whole token (a 100 000-character tag): keep its start.
    if len(message) > _LONGEST_MESSAGE:
        message = f"{redact_text(message)[: _LONGEST_MESSAGE - 1]}…"
    if line is None:
        return ConfigError(str(path), path.name, f"not valid {kind}: {message}", f"valid {kind}")
    lines = text.splitlines()
    found: object = lines[line - 1].strip() if 1 <= line <= len(lines) else "<end of file>"
    if isinstance(found, str) and len(found) > _LONGEST_MESSAGE:
        found = Oversized(found, number=False)
    problem = f"not valid {kind} at line {line}: {message}"
    return ConfigError(str(path), found, problem, f"valid {kind}")


_LONGEST_MESSAGE = 200
