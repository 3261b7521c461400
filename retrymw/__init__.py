"""retrymw: observability-first retry middleware for httpx transports and any coroutine or function.

Public names are re-exported here once; implementations live in private modules.
"""

from __future__ import annotations

from typing import Any

from ._backoff import Backoff as Backoff
from ._backoff import CustomBackoff as CustomBackoff
from ._backoff import ExponentialBackoff as ExponentialBackoff
from ._backoff import FibonacciBackoff as FibonacciBackoff
from ._backoff import FixedBackoff as FixedBackoff
from ._backoff import LinearBackoff as LinearBackoff
from ._breaker import CircuitBreaker as CircuitBreaker
from ._breaker import CircuitBreakerRegistry as CircuitBreakerRegistry
from ._breaker import CircuitBreakerStatistics as CircuitBreakerStatistics
from ._budget import RetryBudget as RetryBudget
from ._budget import RetryBudgetStatistics as RetryBudgetStatistics
from ._clock import Clock as Clock
from ._config import RetryConfig as RetryConfig
from ._config import load_config as load_config
from ._durations import parse_duration as parse_duration
from ._errors import CircuitOpenError as CircuitOpenError
from ._errors import ConfigError as ConfigError
from ._errors import RetryBudgetExhausted as RetryBudgetExhausted
from ._errors import RetrymwError as RetrymwError
from ._events import AttemptFinished as AttemptFinished
from ._events import AttemptStarted as AttemptStarted
from ._events import BreakerStateChanged as BreakerStateChanged
from ._events import CallFinished as CallFinished
from ._events import CallStarted as CallStarted
from ._events import Outcome as Outcome
from ._events import RetryDenied as RetryDenied
from ._events import RetryScheduled as RetryScheduled
from ._matchers import Matcher as Matcher
from ._matchers import on_exception as on_exception
from ._matchers import on_predicate as on_predicate
from ._matchers import on_status as on_status
from ._policy import Accept as Accept
from ._policy import CallState as CallState
from ._policy import GiveUp as GiveUp
from ._policy import Retry as Retry
from ._policy import RetryPolicy as RetryPolicy
from ._retrier import Retrier as Retrier
from ._retrier import retry as retry
from .instrumentation import set_default_instruments as set_default_instruments

__all__ = [
    "Accept",
    "AttemptFinished",
    "AttemptStarted",
    "Backoff",
    "BreakerStateChanged",
    "CallFinished",
    "CallStarted",
    "CallState",
    "CircuitBreaker",
    "CircuitBreakerRegistry",
    "CircuitBreakerStatistics",
    "CircuitOpenError",
    "Clock",
    "ConfigError",
    "CustomBackoff",
    "ExponentialBackoff",
    "FibonacciBackoff",
    "FixedBackoff",
    "GiveUp",
    "LinearBackoff",
    "Matcher",
    "Outcome",
    "Retrier",
    "Retry",
    "RetryBudget",
    "RetryBudgetExhausted",
    "RetryBudgetStatistics",
    "RetryConfig",
    "RetryDenied",
    "RetryPolicy",
    "RetryScheduled",
    "RetrymwError",
    "load_config",
    "on_exception",
    "on_predicate",
    "on_status",
    "parse_duration",
    "retry",
    "set_default_instruments",
]

# Reprs, tracebacks and docs show `retrymw.RetryPolicy`, never `retrymw._policy.RetryPolicy`.
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("retrymw._"):
        _obj.__module__ = "retrymw"
del _name, _obj


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("retrymw")
    raise AttributeError(f"module 'retrymw' has no attribute {name!r}")
