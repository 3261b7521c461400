"""Helpers of the fleet's fault tests: a lying proxy in front of a real redis-server.

`proxy` puts a `tests.resp_server.RespServer` between a fleet and a real redis-server: every
command is forwarded, and ``tamper`` may change what the store answers to the fleet's scripts
(``EVALSHA``) while it is switched on. `mutate_numbers` rewrites every number in a reply,
whatever its shape (an array of integers, or numbers inside a string), so an attack does not
depend on how the fleet lays out its replies.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from tests.fleet.conftest import RedisServer
from tests.resp_server import DEFAULT, Command, Forward, RespServer

__all__ = ["Tamper", "mutate_numbers", "proxy", "wait_for"]

_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def wait_for(predicate: Callable[[], bool], limit: float) -> bool:
    """Poll ``predicate`` every 10 ms for at most ``limit`` seconds; its last answer."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def mutate_numbers(reply: Any, change: Callable[[int], Any]) -> Any:
    """``reply`` with every integer (and every number inside a string) replaced by ``change``."""
    if isinstance(reply, bool):
        return reply
    if isinstance(reply, int):
        return change(reply)
    if isinstance(reply, list):
        return [mutate_numbers(item, change) for item in reply]
    if isinstance(reply, bytes):
        return _NUMBER.sub(lambda found: str(change(int(float(found.group())))).encode(), reply)
    return reply


class Tamper:
    """What the proxy does to the fleet's script replies: ``answer`` while ``on``, counted."""

    def __init__(self, answer: Callable[[Any], Any]) -> None:
        self.answer = answer
        self.on = threading.Event()
        self.tampered = 0

    def __call__(self, command: Command) -> Any:
        if command.name != "EVALSHA" or not self.on.is_set():
            return DEFAULT
        return Forward(self._change)

    def _change(self, reply: Any) -> Any:
        self.tampered += 1
        return self.answer(reply)


@contextlib.contextmanager
def proxy(server: RedisServer, handler: Callable[[Command], Any]) -> Iterator[RespServer]:
    """A `RespServer` forwarding to ``server`` through ``handler``; stopped on exit."""
    with RespServer(handler, upstream=("127.0.0.1", server.port)) as front:
        yield front
