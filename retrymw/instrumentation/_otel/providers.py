"""Whether a signal has a real SDK provider: `ProviderWatch`, asked cheaply on every call."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

__all__ = ["IDLE_RECHECK", "ProviderWatch"]

# While nobody listens, the providers are looked at again at most this often (seconds).
IDLE_RECHECK = 1.0


class ProviderWatch:
    """Whether one signal (traces or metrics) has a real SDK provider, asked cheaply per call.

    A real provider, once seen, is kept (it never turns back into the API's proxy); while only
    the API's no-op or proxy provider is there, the answer is reused for `IDLE_RECHECK` seconds,
    since asking the API costs an environment lookup and a clock read a tenth of that. The
    hooks read ``watch.active or watch()``: once active, no call at all.
    """

    __slots__ = ("_given", "_global", "_idle", "_proxy", "active", "idle_until")

    def __init__(
        self,
        given: Any,
        global_provider: Callable[[], Any],
        idle: tuple[type, ...],
        proxy: type | None = None,
    ) -> None:
        self._given = given  # the provider passed to the instrument, or None for the global one
        self._global = global_provider
        self._idle = idle
        self._proxy = proxy  # a given proxy still resolves to the global provider
        self.active = False
        self.idle_until = -math.inf

    def __call__(self) -> bool:
        if self.active:
            return True
        now = time.monotonic()
        if now < self.idle_until:
            return False
        provider = self._given
        if provider is None or (self._proxy is not None and isinstance(provider, self._proxy)):
            provider = self._global()
        if isinstance(provider, self._idle):
            self.idle_until = now + IDLE_RECHECK
            return False
        self.active = True
        return True
