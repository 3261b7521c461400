"""retrymw: observability-first retry middleware for httpx transports and any coroutine or function.

Public names are re-exported here once; implementations live in private modules.
"""

from __future__ import annotations

from typing import Any

from ._config.loader import RetryConfig as RetryConfig
from ._config.loader import load_config as load_config
from ._core.backoff import Backoff as Backoff
from ._core.backoff import CustomBackoff as CustomBackoff
from ._core.backoff import ExponentialBackoff as ExponentialBackoff
from ._core.backoff import FibonacciBackoff as FibonacciBackoff
from ._core.backoff import FixedBackoff as FixedBackoff
from ._core.backoff import LinearBackoff as LinearBackoff
from ._core.clock import Clock as Clock
from ._core.durations import parse_duration as parse_duration
from ._core.errors import CircuitOpenError as CircuitOpenError
from ._core.errors import ConfigError as ConfigError
from ._core.errors import IncompleteStreamError as IncompleteStreamError
from ._core.errors import LoadShedError as LoadShedError
from ._core.errors import PacedError as PacedError
from ._core.errors import RetryBudgetExhausted as RetryBudgetExhausted
from ._core.errors import RetrymwError as RetrymwError
from ._core.events import Attached as Attached
from ._core.events import AttemptFinished as AttemptFinished
from ._core.events import AttemptStarted as AttemptStarted
from ._core.events import BodyRead as BodyRead
from ._core.events import BreakerStateChanged as BreakerStateChanged
from ._core.events import CallFinished as CallFinished
from ._core.events import CallStarted as CallStarted
from ._core.events import FailoverFinished as FailoverFinished
from ._core.events import FailoverStarted as FailoverStarted
from ._core.events import Outcome as Outcome
from ._core.events import RetryDenied as RetryDenied
from ._core.events import RetryScheduled as RetryScheduled
from ._core.exports import publish
from ._core.matchers import Matcher as Matcher
from ._core.matchers import on_exception as on_exception
from ._core.matchers import on_predicate as on_predicate
from ._core.matchers import on_status as on_status
from ._core.policy import Accept as Accept
from ._core.policy import CallState as CallState
from ._core.policy import GiveUp as GiveUp
from ._core.policy import Retry as Retry
from ._core.policy import RetryPolicy as RetryPolicy
from ._engine.resume import ResumeExhausted as ResumeExhausted
from ._engine.resume import resume as resume
from ._engine.retrier import Retrier as Retrier
from ._engine.retrier import retry as retry
from ._http.origins import Origin as Origin
from ._protect.breaker import CircuitBreaker as CircuitBreaker
from ._protect.breaker import CircuitBreakerStatistics as CircuitBreakerStatistics
from ._protect.budget import RetryBudget as RetryBudget
from ._protect.budget import RetryBudgetStatistics as RetryBudgetStatistics
from ._protect.hedge import Hedge as Hedge
from ._protect.hedge import HedgeStatistics as HedgeStatistics
from ._protect.hedge import TargetHedgeStatistics as TargetHedgeStatistics
from ._protect.pacer import Pacer as Pacer
from ._protect.pacer import PacerStatistics as PacerStatistics
from ._protect.targets import PerTarget as PerTarget
from ._protect.throttle import AdaptiveThrottle as AdaptiveThrottle
from ._protect.throttle import AdaptiveThrottleStatistics as AdaptiveThrottleStatistics
from .instrumentation import set_default_instruments as set_default_instruments

__all__ = [
    "Accept",
    "AdaptiveThrottle",
    "AdaptiveThrottleStatistics",
    "Attached",
    "AttemptFinished",
    "AttemptStarted",
    "Backoff",
    "BodyRead",
    "BreakerStateChanged",
    "CallFinished",
    "CallStarted",
    "CallState",
    "CircuitBreaker",
    "CircuitBreakerStatistics",
    "CircuitOpenError",
    "Clock",
    "ConfigError",
    "CustomBackoff",
    "ExponentialBackoff",
    "FailoverFinished",
    "FailoverStarted",
    "FibonacciBackoff",
    "FixedBackoff",
    "GiveUp",
    "Hedge",
    "HedgeStatistics",
    "IncompleteStreamError",
    "LinearBackoff",
    "LoadShedError",
    "Matcher",
    "Origin",
    "Outcome",
    "PacedError",
    "Pacer",
    "PacerStatistics",
    "PerTarget",
    "ResumeExhausted",
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
    "TargetHedgeStatistics",
    "load_config",
    "on_exception",
    "on_predicate",
    "on_status",
    "parse_duration",
    "resume",
    "retry",
    "set_default_instruments",
]

publish(globals(), __all__, __name__)


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("retrymw")
    raise AttributeError(f"module 'retrymw' has no attribute {name!r}")
