"""Helpers shared by the ``retrymw`` subcommands: exit codes, argument types, text tables."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from typing import IO

from .._core.durations import parse_duration
from .._core.errors import ConfigError

__all__ = [
    "EXIT_CODES",
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "duration",
    "fraction",
    "human_duration",
    "optional_duration",
    "percent",
    "port",
    "positive_float",
    "positive_duration",
    "positive_int",
    "rate",
    "silence",
    "table",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

EXIT_CODES = """\
exit codes:
  0  success
  1  validation or run failure (invalid config, port in use, missing extra)
  2  usage error (unknown option, bad option value)"""


class CliError(Exception):
    """A failure reported as one line on stderr, with exit code 1."""


def duration(text: str) -> float:
    """Parse a command-line duration such as ``"5s"``, ``"250ms"`` or ``"1m30s"``.

    Like config files, the command line wants a unit: ``"20"`` is rejected.

    Raises:
        argparse.ArgumentTypeError: not a duration; argparse reports it as a usage error.
    """
    try:
        return parse_duration(text)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(
            f"{error.problem}: {text!r} (e.g. 5s, 250ms, 1m30s)"
        ) from None


def positive_duration(text: str) -> float:
    """Parse a duration longer than zero, for how long something runs (``--duration``).

    Raises:
        argparse.ArgumentTypeError: not a duration, or zero; argparse reports a usage error.
    """
    value = duration(text)
    if value <= 0.0:
        raise argparse.ArgumentTypeError(f"must be longer than 0s: {text!r} (e.g. 5s, 20s, 1m)")
    return value


def optional_duration(text: str) -> float | None:
    """Parse a duration, or ``"none"``/``"off"`` for a limit that is turned off."""
    if text.strip().lower() in ("none", "off"):
        return None
    return duration(text)


def positive_int(text: str) -> int:
    """Parse an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r} (e.g. 1, 4)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1: {text!r} (e.g. 1, 4)")
    return value


def positive_float(text: str) -> float:
    """Parse a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (e.g. 50, 2.5)") from None
    if not 0.0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0: {text!r} (e.g. 50, 2.5)")
    return value


def rate(text: str) -> float:
    """Parse a call rate in ``(0, 100000]`` calls per second."""
    value = positive_float(text)
    if value > 100_000.0:
        raise argparse.ArgumentTypeError(f"must be at most 100000 calls/s: {text!r} (e.g. 50)")
    return value


def port(text: str) -> int:
    """Parse a TCP port number; ``0`` asks the system for a free one."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r} (e.g. 9464, or 0)") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be within [0, 65535]: {text!r} (e.g. 9464, or 0)")
    return value


def fraction(text: str) -> float:
    """Parse a share in ``[0, 1]``, written ``0.2`` or ``20%``."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a number or percentage: {text!r} (e.g. 0.1 or 10%)"
        ) from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(
            f"must be within [0, 1] (or 0%-100%): {text!r} (e.g. 0.1 or 10%)"
        )
    return value


def silence(stream: IO[str]) -> None:
    """Point ``stream``'s file descriptor at ``os.devnull`` once its reader has gone away.

    After ``EPIPE`` (``retrymw demo | head``), the Python documentation's note on SIGPIPE
    redirects stdout to devnull: the text still buffered, and the interpreter's final flush,
    then go nowhere instead of raising ``BrokenPipeError`` again on the way out. A stream
    without a file descriptor (a ``StringIO``) is left alone.
    """
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, descriptor)
    finally:
        os.close(devnull)


def human_duration(seconds: float) -> str:
    """Format seconds for people: ``0s``, ``250ms``, ``1.5s``, ``2m30s``, ``1h5m``."""
    if not math.isfinite(seconds):
        return "∞"
    if seconds == 0:
        return "0s"
    if seconds < 1.0:
        millis = seconds * 1000.0
        return f"{millis:.3g}ms" if millis >= 1.0 else f"{millis:.2g}ms"
    if seconds < 60.0:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes}m" if minutes else f"{hours}h"


def percent(share: float) -> str:
    """Format a share in ``[0, 1]`` as a percentage with sensible precision.

    Only a share of exactly 1 reads ``100%``: 9,996 successes of 10,000 are ``99.9%``, so that
    a failure is never rounded away.
    """
    value = share * 100.0
    if value in (0.0, 100.0) or value >= 10.0:
        return f"{min(value, 99.9) if value < 100.0 else value:.1f}%".replace(".0%", "%")
    return f"{value:.2g}%"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, align: str = "") -> str:
    """Render a plain-text table with a rule under the header.

    Args:
        header: the column titles.
        rows: the cells, as text.
        align: one character per column, ``"<"`` or ``">"``; left by default.

    Returns:
        The table, without a trailing newline.
    """
    widths = [len(title) for title in header]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    aligns = align[: len(header)].ljust(len(header), "<")

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(width) if mode == ">" else cell.ljust(width)
            for cell, width, mode in zip(cells, widths, aligns, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("─" * width for width in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)])
