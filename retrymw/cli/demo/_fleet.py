"""``retrymw demo --fleet N``: N client processes sharing one retry budget on Redis in an outage.

The parent process starts a `FlakyUpstream` and (unless ``--redis URL`` names one) a private
``redis-server`` on a free 127.0.0.1 port, without persistence, in a temporary directory
(`_redis_server`, the launcher the test suite uses too). It then starts two groups of
N client processes at once against the same upstream: one whose budgets are shared through a
`RedisFleet`, one with per-process budgets only. Every client issues its calls on the same
schedule from the same start (call ``i`` at ``start + i / rate``), and a call belongs to the
outage when its scheduled time falls in the outage window: both groups count exactly the same
calls there, so the summary compares their fleet amplification (attempts per outage call,
summed over the group) like with like, and identical runs give the same verdict.

Each client is ``python -c`` running `retrymw.cli.demo._fleet_member.member_main`: it reads its
configuration (one JSON line) from stdin, prints ``ready``, reads the common start time (wall
clock) from stdin, runs its load until the end or SIGTERM, and prints its counts as one JSON
line. The configuration holds the Redis URL, credentials included: it goes through stdin
because a command line is anyone's to read (``ps``, ``/proc/<pid>/cmdline``). The clients and
redis-server run in their own sessions, so a Ctrl-C reaches the parent only; the parent stops
them by pid (SIGTERM, then SIGKILL), on every exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

from ..._core.redact import redact_url
from .._common import EXIT_OK, CliError, human_duration, positive_int, table
from ._redis_server import INSTALL, RedisLaunchError, RedisServerProcess
from ._upstream import FlakyUpstream, UpstreamScript

__all__ = ["Group", "add_fleet_arguments", "fleet_summary", "run_fleet"]

_READY_TIMEOUT = 60.0  # a client imports httpx and redis-py; a loaded machine may be slow
_START_DELAY = 0.3  # between telling the clients the start time and the start itself
_GRACE = 3.0  # the clients' calls in flight get this long after the end
_MEMBER = "from retrymw.cli.demo._fleet_member import member_main; member_main()"
# The directory that holds the retrymw package (one parent per dot of this module's name), put
# on the clients' PYTHONPATH so that they import this very retrymw.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[__name__.count(".")])
_INSTALL = (
    f"--fleet needs Debian's redis-server to start a private Redis ({INSTALL}), "
    "or --redis URL to join a running Redis or Valkey"
)


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--fleet`` and ``--redis`` to the ``demo`` parser."""
    fleet = parser.add_argument_group("fleet (pip install 'retrymw[fleet]')")
    fleet.add_argument(
        "--fleet",
        type=positive_int,
        metavar="N",
        help="N client processes sharing a budget on Redis, and N with per-process budgets, "
        "in the same outage; starts a private redis-server unless --redis is given",
    )
    fleet.add_argument(
        "--redis",
        metavar="URL",
        # From the environment, a password stays off the command line, which `ps` shows.
        default=os.environ.get("RETRYMW_REDIS_URL") or None,
        help="join this Redis or Valkey instead of starting one; without --fleet, this "
        "process's budget and breaker are shared there (namespace demo): run several such "
        "demos (default: $RETRYMW_REDIS_URL, where a password stays off the command line)",
    )


@dataclass(slots=True)
class Group:
    """One group of client processes and what they reported."""

    name: str
    shared: bool
    results: list[dict[str, Any]] = field(default_factory=list)

    def total(self, key: str) -> int:
        """The sum of ``key`` over the reports."""
        return sum(int(result.get(key, 0)) for result in self.results)

    @property
    def amplification(self) -> float | None:
        """Attempts per call started during the outage, over the group; ``None`` without any."""
        calls = self.total("outage_calls")
        return self.total("outage_attempts") / calls if calls else None


def run_fleet(args: argparse.Namespace, script: UpstreamScript) -> int:
    """Run the fleet demo: a Redis, the upstream, two groups of clients, then the summary."""
    try:
        import httpx  # noqa: F401
        import redis  # noqa: F401
    except ImportError as error:
        raise CliError(f"--fleet needs {error.name}: pip install 'retrymw[fleet,httpx]'") from None
    if args.redis is not None:
        from ...fleet._client import connect

        connect(args.redis, timeout=1.0).close()  # a malformed URL: a ConfigError, redacted
    redis_process = None if args.redis else _redis_process()  # missing binary: fails here
    groups = [Group("shared budget (fleet)", True), Group("per-process budgets", False)]
    try:
        url = args.redis
        if redis_process is not None:
            try:
                redis_process.start()
            except RedisLaunchError as error:
                raise CliError(str(error)) from None
            url = redis_process.url
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: report what we have
            asyncio.run(_Orchestra(args, script, url, groups).main(started=redis_process))
    finally:
        if redis_process is not None:
            redis_process.stop()
    return EXIT_OK


def _redis_process() -> RedisServerProcess:
    """The private redis-server's launcher (not started); a missing binary is a `CliError`."""
    try:
        return RedisServerProcess()
    except RedisLaunchError:
        raise CliError(_INSTALL) from None


class _Orchestra:
    """The parent's asyncio side: the upstream, the clients, the outage lines."""

    def __init__(
        self, args: argparse.Namespace, script: UpstreamScript, url: str, groups: list[Group]
    ) -> None:
        self.args, self.script, self.redis_url, self.groups = args, script, url, groups
        self.upstream = FlakyUpstream(script, rng=Random(args.seed))
        self.processes: list[tuple[Group, asyncio.subprocess.Process]] = []
        self.stopping = False

    def say(self, text: str) -> None:
        print(text, flush=True)

    async def main(self, *, started: RedisServerProcess | None) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, self._on_signal)
            loop.add_signal_handler(signal.SIGTERM, self._on_signal)
        url = await self.upstream.start("127.0.0.1", self.args.upstream_port)
        origin = "joined, not started here"
        if started is not None and started.process is not None:
            origin = f"redis-server pid {started.process.pid}, started here, stopped at the end"
        try:
            self.say(f"redis: {redact_url(self.redis_url)} ({origin})")
            self.say(f"upstream: {redact_url(url)} ({self.script.describe()})")
            self.say(self._load_line())
            await self._spawn(url)
            begin = time.time() + _START_DELAY
            for _, process in self.processes:
                assert process.stdin is not None
                process.stdin.write(f"{begin!r}\n".encode())
                await process.stdin.drain()
            self.say(f"clients: {len(self.processes)} processes, starting together")
            if self.stopping:  # Ctrl-C while they started: they stop at once and report
                self._stop_clients()
            await asyncio.sleep(max(0.0, begin - time.time()))
            self.upstream.restart_script()
            watcher = asyncio.ensure_future(self._watch_outage(begin))
            try:
                await self._collect()
            finally:
                watcher.cancel()
        finally:
            for _, process in self.processes:  # anything still running (a second Ctrl-C)
                await _stop_async(process)
            await self.upstream.close()
            self.say(fleet_summary(self.groups, self.script, self.args))

    def _load_line(self) -> str:
        args = self.args
        return (
            f"load: {args.fleet} processes share one budget per target through Redis, "
            f"{args.fleet} keep per-process budgets; each {args.rate:g} calls/s for "
            f"{human_duration(args.duration)}, {args.attempts} attempts, default retry budget"
        )

    async def _spawn(self, url: str) -> None:
        namespace = f"demo-{uuid.uuid4().hex[:8]}"  # a fresh bucket for every run
        env = dict(os.environ)
        env.pop("RETRYMW_REDIS_URL", None)  # the URL goes through stdin, to the shared group only
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        outage = self.script.outage
        for group in self.groups:
            for _ in range(self.args.fleet):
                config = {
                    "url": url,
                    "redis": self.redis_url if group.shared else None,
                    "namespace": namespace,
                    "rate": self.args.rate,
                    "attempts": self.args.attempts,
                    "duration": self.args.duration,
                    "outage": None if outage is None else [outage.start, outage.duration],
                }
                process = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", _MEMBER,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                )  # fmt: skip
                self.processes.append((group, process))
                assert process.stdin is not None
                process.stdin.write(f"{json.dumps(config)}\n".encode())
                await process.stdin.drain()
        for _, process in self.processes:
            assert process.stdout is not None
            line = await asyncio.wait_for(process.stdout.readline(), _READY_TIMEOUT)
            if line.strip() != b"ready":
                raise CliError("a client process failed to start (run it with RETRYMW_DEBUG=1)")

    async def _collect(self) -> None:
        bound = self.args.duration + _GRACE + 30.0
        for group, process in self.processes:
            try:
                out, _ = await asyncio.wait_for(process.communicate(), bound)
            except asyncio.TimeoutError:
                continue
            with contextlib.suppress(ValueError):
                group.results.append(json.loads(out.decode().strip().splitlines()[-1]))

    async def _watch_outage(self, begin: float) -> None:
        outage = False
        while True:
            await asyncio.sleep(0.1)
            if self.upstream.in_outage() != outage:
                outage = not outage
                what = "begins: every request fails with 503" if outage else "ends"
                self.say(f"[{time.time() - begin:6.1f}s] upstream outage {what}")

    def _on_signal(self) -> None:
        if self.stopping:  # the second Ctrl-C: stop waiting
            raise KeyboardInterrupt
        self.stopping = True
        self.say("stopping: the clients finish their calls in flight and report")
        self._stop_clients()

    def _stop_clients(self) -> None:
        for _, process in self.processes:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)


async def _stop_async(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        await process.wait()


def fleet_summary(groups: list[Group], script: UpstreamScript, args: argparse.Namespace) -> str:
    """The closing summary: per group, the outage's calls, attempts and fleet amplification."""
    outage = script.outage
    window = "no outage" if outage is None else f"outage {outage}"
    rows = []
    for group in groups:
        amplification = group.amplification
        rows.append(
            [
                group.name,
                f"{len(group.results)}/{args.fleet}",
                str(group.total("outage_calls")),
                str(group.total("outage_attempts")),
                "-" if amplification is None else f"{amplification:.3f}x",
                str(group.total("denied")),
                str(group.total("unfinished")),
            ]
        )
    header = [
        "group", "reported", "calls", "attempts", "amplification", "denied (whole run)",
        "unfinished",
    ]  # fmt: skip
    lines = ["", f"fleet summary (calls scheduled during the {window}):", ""]
    lines.append(table(header, rows, align="<>>>>>>"))
    shared, alone = (group.amplification for group in groups)
    lines.append("")
    for group in groups:
        value = group.amplification
        shown = "n/a (no call during an outage)" if value is None else f"{value:.3f}x"
        lines.append(f"fleet amplification, {group.name}: {shown}")
    if shared is not None and alone is not None:
        lines.append(_verdict(groups, shared, alone))
    leased = groups[0].total("tokens_leased")
    degraded = sum(bool(result.get("degraded")) for result in groups[0].results)
    members = max((int(r.get("members", 0)) for r in groups[0].results), default=0)
    lines.append(
        f"fleet health: {members} members seen, {degraded} degraded at the end, "
        f"{leased} budget tokens leased"
    )
    return "\n".join(lines)


def _verdict(groups: list[Group], shared: float, alone: float) -> str:
    """What the two groups' attempts over the same calls say (both counted the same calls)."""
    saved = groups[1].total("outage_attempts") - groups[0].total("outage_attempts")
    if saved > 0:
        return (
            f"measured: sharing made {saved} fewer attempts in the same outage: one bucket for "
            "the fleet instead of one per process"
        )
    return (
        f"measured: sharing did not lower it here ({shared:.3f}x vs {alone:.3f}x). A shared "
        "budget lends at most what the per-process budgets would (their floor credit, 2 "
        "retries each, until one floor of 10 for the fleet), so with fewer than 5 processes "
        "the two spend alike; sharing pays where per-process floors add up, with many "
        "low-rate processes (try --fleet 10 --rate 1 --duration 14s --outage 4s:10s)"
    )
