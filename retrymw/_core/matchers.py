"""The ``retry_on`` vocabulary: one set of matchers for HTTP responses and for exceptions.

A matcher receives a frozen `Outcome` and answers "is this worth retrying?". Matchers compose
with ``|`` (any), ``&`` (all) and ``~`` (not). Only `Exception` subclasses ever reach a matcher:
cancellation, ``KeyboardInterrupt`` and ``SystemExit`` propagate before any matching happens.

Without ``retry_on`` a policy retries any `Exception` except retrymw's own errors and the
programming errors retrying cannot fix (`PROGRAMMING_ERRORS`: ``NameError``, ``TypeError``,
``AttributeError``...); a matcher that names one of them, such as ``retry_on=[TypeError]``,
retries it.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, Union

from .errors import ConfigError, RetrymwError
from .events import Outcome

__all__ = [
    "DEFAULT_VERDICTS",
    "PROGRAMMING_ERRORS",
    "Matcher",
    "MatcherSpec",
    "built_from",
    "compile_matcher",
    "on_exception",
    "on_predicate",
    "on_status",
    "retryable_by_default",
    "status_of",
]

MatcherSpec = Union[
    "Matcher",
    str,
    int,
    type[Exception],
    Callable[[Outcome], bool],
    dict[str, Any],
    Iterable[Any],
]

_EXAMPLE = '["timeout", "network", "5xx", 429, {"pattern": "reset by peer"}, ConnectionError]'


class Matcher:
    """A composable retry condition over an `Outcome`.

    Build matchers with `on_exception`, `on_status`, `on_predicate`, or by listing ``retry_on``
    entries; combine them with ``|``, ``&`` and ``~``.

    Attributes:
        uses_results: whether the matcher can match a returned value (a response), not only an
            exception. When false the drivers skip matching on the success path.

    .. versionadded:: 0.1
    """

    __slots__ = ("_key", "_parts", "_test", "uses_results")

    def __init__(
        self,
        test: Callable[[Outcome], bool],
        key: tuple[Any, ...],
        *,
        uses_results: bool,
        parts: tuple[Matcher, ...] = (),
    ) -> None:
        self._test = test
        self._key = key
        self._parts = parts
        self.uses_results = uses_results

    def __call__(self, outcome: Outcome, /) -> bool:
        """Return whether ``outcome`` should be retried."""
        return self._test(outcome)

    def __or__(self, other: Matcher) -> Matcher:
        return any_of((self, other))

    def __and__(self, other: Matcher) -> Matcher:
        return all_of((self, other))

    def __invert__(self) -> Matcher:
        test = self._test
        if self.uses_results:
            return Matcher(lambda outcome: not test(outcome), ("not", self._key), uses_results=True)
        # An exception-only matcher stays exception-only when negated: ``~on_exception(KeyError)``
        # means "any exception but KeyError", never "every successful result".
        return Matcher(
            lambda outcome: outcome.exception is not None and not test(outcome),
            ("not", self._key),
            uses_results=False,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Matcher) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"<Matcher {_describe(self._key)}>"


def built_from(matcher: Matcher) -> tuple[Any, ...]:
    """How ``matcher`` was built: its kind and arguments (``("status", codes)``, ``("any",
    parts)`` with each part's own), which its equality and repr read too; a configuration
    dump writes its entries back from it."""
    return matcher._key


def _describe(key: tuple[Any, ...]) -> str:
    kind, *args = key
    if kind in ("any", "all"):
        joiner = " | " if kind == "any" else " & "
        return "(" + joiner.join(_describe(part) for part in args[0]) + ")"
    if kind == "not":
        return "~" + _describe(args[0])
    if kind == "exception":
        return "exception(" + ", ".join(t.__qualname__ for t in args[0]) + ")"
    if kind == "status":
        return "status(" + ", ".join(map(str, sorted(args[0]))) + ")"
    if kind == "predicate":
        return f"predicate({getattr(args[0], '__qualname__', args[0])!s})"
    return f"{kind}({', '.join(map(repr, args))})"


def any_of(matchers: Iterable[Matcher]) -> Matcher:
    """Match when any of ``matchers`` matches (nested ``any`` groups are flattened)."""
    parts: list[Matcher] = []
    for matcher in matchers:
        parts.extend(_flatten(matcher, "any"))
    if len(parts) == 1:
        return parts[0]
    tests = tuple(part._test for part in parts)
    # A returned value is only for the parts that match results: the others never match one.
    result_tests = tuple(part._test for part in parts if part.uses_results)

    def any_matches(outcome: Outcome) -> bool:
        for test in tests if outcome.exception is not None else result_tests:
            if test(outcome):
                return True
        return False

    return Matcher(
        any_matches,
        ("any", tuple(part._key for part in parts)),
        uses_results=any(part.uses_results for part in parts),
        parts=tuple(parts),
    )


def all_of(matchers: Iterable[Matcher]) -> Matcher:
    """Match when every one of ``matchers`` matches (nested ``all`` groups are flattened)."""
    parts: list[Matcher] = []
    for matcher in matchers:
        parts.extend(_flatten(matcher, "all"))
    tests = tuple(part._test for part in parts)
    return Matcher(
        lambda outcome: all(test(outcome) for test in tests),
        ("all", tuple(part._key for part in parts)),
        uses_results=all(part.uses_results for part in parts),
        parts=tuple(parts),
    )


def _flatten(matcher: Matcher, kind: str) -> list[Matcher]:
    return list(matcher._parts) if matcher._key[0] == kind else [matcher]


#: Exceptions the implicit "any exception" (no ``retry_on``) does not retry: they say the code is
#: wrong, and the same code raises them again on every attempt. ``NameError`` (with
#: ``UnboundLocalError``), ``AttributeError``, ``TypeError``, ``SyntaxError`` (with
#: ``IndentationError``), ``NotImplementedError`` and ``RecursionError`` are bugs in the code that
#: runs; ``ImportError`` (with ``ModuleNotFoundError``) is a missing or broken module;
#: ``AssertionError`` is a broken invariant. Left in on purpose: ``LookupError`` (``KeyError``,
#: ``IndexError``), ``ValueError`` and ``ArithmeticError``, which often depend on data read from
#: elsewhere (a record not yet replicated, a truncated payload) and can succeed on a later
#: attempt, and ``OSError``/``RuntimeError``, the families of most transient failures.
#: A ``retry_on`` that names one of them (``retry_on=[AssertionError]`` to poll with asserts)
#: retries it: this list only shapes the default.
PROGRAMMING_ERRORS: tuple[type[Exception], ...] = (
    NameError,
    AttributeError,
    TypeError,
    ImportError,
    SyntaxError,
    NotImplementedError,
    RecursionError,
    AssertionError,
)

# retrymw's own errors are left out too: an outer retrier must not retry what an inner one
# already gave up on (RetryBudgetExhausted, CircuitOpenError, ConfigError).
NOT_RETRIED_BY_DEFAULT: tuple[type[Exception], ...] = (RetrymwError, *PROGRAMMING_ERRORS)


#: `retryable_by_default`'s verdict per exception type seen, since it is asked after every
#: failed attempt and the tuple test walks nine classes (about 150 ns; a lookup here, 30).
#: Bounded: past `_VERDICTS_KEPT` types (classes made at run time), the rest are tested each time.
DEFAULT_VERDICTS: dict[type[BaseException], bool] = {}
_VERDICTS_KEPT = 256


def retryable_by_default(exception: BaseException | None) -> bool:
    """Whether the implicit "any exception" rule (no ``retry_on``) retries ``exception``.

    True for every `Exception` except retrymw's own errors and `PROGRAMMING_ERRORS`, which
    retrying cannot fix; ``None`` (a returned value) is never retried.
    """
    if exception is None:
        return False
    kind = type(exception)
    verdict = DEFAULT_VERDICTS.get(kind)
    if verdict is None:
        verdict = not isinstance(exception, NOT_RETRIED_BY_DEFAULT)
        if len(DEFAULT_VERDICTS) < _VERDICTS_KEPT:
            DEFAULT_VERDICTS[kind] = verdict
    return verdict


def status_of(value: object) -> int | None:
    """Return the HTTP status carried by a response or an exception, if any.

    Looks at ``status_code`` and ``status`` (ints), then at ``response.status_code`` (as on
    ``httpx.HTTPStatusError``). Never raises.
    """
    try:
        for attribute in ("status_code", "status"):
            status = getattr(value, attribute, None)
            if isinstance(status, int) and not isinstance(status, bool):
                return status
        response = getattr(value, "response", None)
        status = getattr(response, "status_code", None)
    except Exception:
        # A property that raises (a lazy field, a hostile object) means "no status", never a
        # failed call: the user's outcome stays the outcome.
        return None
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    return None


def on_exception(*types: type[Exception]) -> Matcher:
    """Match exceptions that are instances of any of ``types``.

    Raises:
        ConfigError: a type is not an `Exception` subclass (cancellation is never retried).
    """
    for index, kind in enumerate(types):
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            raise ConfigError(
                f"retry_on[{index}]",
                kind,
                "must be an Exception subclass (BaseException is never retried)",
                "ConnectionError",
            )
    classes = tuple(types)
    return Matcher(
        lambda outcome: isinstance(outcome.exception, classes),
        ("exception", classes),
        uses_results=False,
    )


def on_status(*codes: int) -> Matcher:
    """Match a response or an exception whose HTTP status is one of ``codes``."""
    for index, code in enumerate(codes):
        if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 599:
            raise ConfigError(
                f"retry_on[{index}]", code, "must be an HTTP status from 100 to 599", "503"
            )
    wanted = frozenset(codes)
    return Matcher(lambda outcome: outcome.status in wanted, ("status", wanted), uses_results=True)


def on_predicate(predicate: Callable[[Outcome], bool]) -> Matcher:
    """Match whenever ``predicate(outcome)`` is true; it sees both exceptions and results."""
    if not callable(predicate):
        raise ConfigError("retry_on", predicate, "must be callable", "lambda outcome: ...")
    return Matcher(
        lambda outcome: bool(predicate(outcome)), ("predicate", predicate), uses_results=True
    )


# httpx and its fork httpx2 (which the OpenAI and Anthropic SDKs use): the same exception tree.
_HTTP_FLAVOURS = ("httpx", "httpx2")


def _timeout_types() -> tuple[type[BaseException], ...]:
    # asyncio.TimeoutError is TimeoutError from 3.11 on, a class of its own on 3.10.
    found: list[type[BaseException]] = [TimeoutError, asyncio.TimeoutError]
    # Only look at libraries already imported: an exception cannot come from one that is not.
    for name in _HTTP_FLAVOURS:
        httpx = sys.modules.get(name)
        if httpx is not None:
            found.append(httpx.TimeoutException)
    trio = sys.modules.get("trio")
    if trio is not None:
        found.append(trio.TooSlowError)
    return tuple(found)


def _network_types() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = [ConnectionError]
    for name in _HTTP_FLAVOURS:
        httpx = sys.modules.get(name)
        if httpx is not None:
            found.extend((httpx.NetworkError, httpx.RemoteProtocolError))
    return tuple(found)


def _is_timeout(outcome: Outcome) -> bool:
    return outcome.exception is not None and isinstance(outcome.exception, _timeout_types())


def _is_network(outcome: Outcome) -> bool:
    error = outcome.exception
    return (
        error is not None
        and isinstance(error, _network_types())
        and not _certificate_rejected(error)
    )


def _certificate_rejected(error: BaseException) -> bool:
    """Whether ``error`` comes from a TLS certificate that failed verification.

    httpx reports that as a ``ConnectError`` caused by ``ssl.SSLCertVerificationError``; it
    fails the same way every time, so it is no network failure to retry.
    """
    ssl = sys.modules.get("ssl")
    if ssl is None:  # pragma: no cover - not imported: no TLS error can have been raised
        return False
    cause: BaseException | None = error
    for _ in range(16):  # a chain may be long, or loop
        if cause is None:
            return False
        if isinstance(cause, ssl.SSLCertVerificationError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _is_server_error(outcome: Outcome) -> bool:
    return outcome.status is not None and 500 <= outcome.status <= 599


_NAMED: dict[str, Matcher] = {
    "timeout": Matcher(_is_timeout, ("timeout",), uses_results=False),
    "network": Matcher(_is_network, ("network",), uses_results=False),
    "server_error": Matcher(_is_server_error, ("server_error",), uses_results=True),
    "rate_limit": Matcher(lambda o: o.status == 429, ("rate_limit",), uses_results=True),
}
_NAMED["5xx"] = _NAMED["server_error"]


def _pattern(regex: Any, field: str) -> Matcher:
    if not isinstance(regex, str):
        raise ConfigError(
            f"{field}.pattern", regex, "must be a regular expression string", '"reset by peer"'
        )
    try:
        compiled = re.compile(regex)
    except re.error as error:
        raise ConfigError(
            f"{field}.pattern", regex, f"invalid regular expression ({error})", '"timed? out"'
        ) from None

    def test(outcome: Outcome) -> bool:
        if outcome.exception is None:
            return False
        try:
            text = str(outcome.exception)
        except Exception:
            # An exception whose __str__ raises has no message to search: no match, and the
            # user's exception (not the __str__ error) stays the call's outcome.
            return False
        return compiled.search(text) is not None

    return Matcher(test, ("pattern", regex), uses_results=False)


def _compile_one(spec: Any, field: str) -> Matcher:
    if isinstance(spec, Matcher):
        return spec
    if isinstance(spec, str):
        try:
            return _NAMED[spec]
        except KeyError:
            raise ConfigError(
                field, spec, f"unknown matcher, known: {', '.join(_NAMED)}", '"server_error"'
            ) from None
    if isinstance(spec, bool):
        raise ConfigError(field, spec, "a boolean is not a matcher", _EXAMPLE)
    if isinstance(spec, int):
        try:
            return on_status(spec)
        except ConfigError as error:
            raise ConfigError(field, spec, error.problem, error.example) from None
    if isinstance(spec, type):
        try:
            return on_exception(spec)
        except ConfigError as error:
            raise ConfigError(field, spec, error.problem, error.example) from None
    if isinstance(spec, dict):
        if set(spec) == {"pattern"}:
            return _pattern(spec["pattern"], field)
        if set(spec) == {"status"}:
            codes = spec["status"]
            codes = [codes] if isinstance(codes, int) else codes
            if not isinstance(codes, (list, tuple)):
                raise ConfigError(
                    f"{field}.status", codes, "must be a list of statuses", "[502, 503]"
                )
            try:
                return on_status(*codes)
            except ConfigError as error:
                raise ConfigError(f"{field}.status", codes, error.problem, "[502, 503]") from None
        raise ConfigError(
            field,
            spec,
            "a mapping matcher has one key, pattern or status",
            '{"status": [502, 503]}',
        )
    if callable(spec):
        return on_predicate(spec)
    raise ConfigError(field, spec, "not a matcher", _EXAMPLE)


def compile_matcher(spec: Any, *, field: str = "retry_on") -> Matcher | None:
    """Compile a ``retry_on`` value into one `Matcher`; ``None`` or ``[]`` gives ``None``.

    ``None`` means "any `Exception`" to the policy, except the errors retrying cannot fix
    (see `retryable_by_default` and `PROGRAMMING_ERRORS`).
    """
    if spec is None:
        return None
    if isinstance(spec, (list, tuple, set, frozenset)):
        parts = [_compile_one(entry, f"{field}[{index}]") for index, entry in enumerate(spec)]
        return any_of(parts) if parts else None
    return _compile_one(spec, field)
