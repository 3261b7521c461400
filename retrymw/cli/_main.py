"""The ``retrymw`` command: ``demo``, ``plan``, ``check`` and ``simulate``.

Each subcommand adds its arguments and runs itself: the private modules ``_plan``, ``_check``
and ``_simulate``, and the demo application's folder ``demo/``; this module builds the parser,
maps errors to one line on stderr and returns the exit code:

* ``0``: success;
* ``1``: a validation or run failure (invalid config, a port already in use, a missing extra);
* ``2``: a usage error (unknown option, bad option value).

.. versionadded:: 0.1
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .._core.errors import ConfigError
from . import _check, _plan, _simulate, demo
from ._common import EXIT_CODES, EXIT_FAILURE, EXIT_USAGE, CliError, silence

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]

_DESCRIPTION = """\
retrymw: observability-first retry middleware. This command shows it at work (demo), explains
a policy's delay timeline (plan), validates config files (check) and compares policies in a
simulated retry storm (simulate)."""

_EPILOG = f"""\
examples:
  retrymw demo                        a flaky upstream, retries, /metrics and traces (20 s)
  retrymw plan --attempts 5 --jitter full
  retrymw plan policies.yaml --policy payments --json
  retrymw check policies.yaml
  retrymw simulate --scenario outage

{EXIT_CODES}
Set RETRYMW_DEBUG=1 to see the traceback behind an error message."""


class _Parser(argparse.ArgumentParser):
    """An `ArgumentParser` whose usage errors are one line that points at ``--help``."""

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one line on stderr and exit with the usage error code."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """Return the ``retrymw`` argument parser with every subcommand.

    Returns:
        The parser; each subcommand sets ``handler`` on the parsed namespace.
    """
    parser = _Parser(
        prog="retrymw",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    for module in (demo, _plan, _check, _simulate):
        sub = commands.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.DESCRIPTION,
            epilog=f"{module.EPILOG}\n{EXIT_CODES}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(sub)
        sub.set_defaults(handler=module.run, parser=sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``retrymw`` command and return its exit code.

    Args:
        argv: the arguments after the program name; ``sys.argv[1:]`` when ``None``.

    Returns:
        ``0`` on success, ``1`` on a validation or run failure, ``2`` on a usage error.
    """
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        handler: Handler | None = getattr(args, "handler", None)
        if handler is None:
            parser.error("choose a command: demo, plan, check or simulate")
        if extra:  # reported by the subcommand, so that the message names it
            args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exit_:  # --help, --version and usage errors
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    prefix = f"retrymw {args.command}: error:"
    try:
        return handler(args)
    except BrokenPipeError:  # `retrymw plan | head`: the reader has what it wanted
        silence(sys.stdout)
        return 0
    except ConfigError as error:  # an option value the command could not use: a usage error
        if os.environ.get("RETRYMW_DEBUG"):
            raise
        hint = f"(see 'retrymw {args.command} --help')"
        print(f"{prefix} {_one_line(error)} {hint}", file=sys.stderr)
        return EXIT_USAGE
    except (CliError, ImportError, OSError) as error:
        if os.environ.get("RETRYMW_DEBUG"):
            raise
        print(f"{prefix} {_one_line(error)}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside the demo's own handling
        print(f"retrymw {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # a bug: still one line, with the way to see more
        if os.environ.get("RETRYMW_DEBUG"):
            raise
        hint = "set RETRYMW_DEBUG=1 for the traceback"
        print(f"{prefix} {type(error).__name__}: {_one_line(error)} ({hint})", file=sys.stderr)
        return EXIT_FAILURE


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        text = f"{error.filename}: {error.strerror}"
    return text


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("retrymw")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
