"""The ``retry_on`` vocabulary of DESIGN §3: named matchers, specs, composition and bad specs."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import pytest

from retrymw._core.errors import ConfigError
from retrymw._core.events import Outcome
from retrymw._core.matchers import (
    Matcher,
    compile_matcher,
    on_exception,
    on_predicate,
    on_status,
    status_of,
)

REQUEST = httpx.Request("GET", "https://api.example.test/items")


def response(status: int) -> httpx.Response:
    """A real httpx response with ``status`` to ``REQUEST``."""
    return httpx.Response(status, request=REQUEST)


def status_error(status: int) -> httpx.HTTPStatusError:
    """What ``response.raise_for_status()`` raises for ``status``."""
    return httpx.HTTPStatusError(
        f"Server error '{status}'", request=REQUEST, response=response(status)
    )


class StatusAttributeError(Exception):
    """A client library's error carrying its HTTP status as ``.status`` (aiohttp style)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class StatusCodeAttributeError(Exception):
    """A client library's error carrying its HTTP status as ``.status_code``."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


def failed(exception: Exception, *, attempt: int = 1) -> Outcome:
    """The outcome of an attempt that raised ``exception``, built as the drivers build it."""
    return Outcome(attempt=attempt, exception=exception, status=status_of(exception))


def returned(result: object, *, attempt: int = 1) -> Outcome:
    """The outcome of an attempt that returned ``result``, built as the drivers build it."""
    return Outcome(attempt=attempt, result=result, status=status_of(result))


def matches(spec: Any, outcome: Outcome) -> bool:
    matcher = compile_matcher(spec)
    assert matcher is not None
    return matcher(outcome)


# -- status_of, which the drivers use to fill Outcome.status ---------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(response(503), 503, id="httpx-response"),
        pytest.param(status_error(502), 502, id="httpx-status-error"),
        pytest.param(StatusAttributeError(504), 504, id="status-attribute"),
        pytest.param(StatusCodeAttributeError(500), 500, id="status-code-attribute"),
        pytest.param(ValueError("boom"), None, id="plain-exception"),
        pytest.param("ok", None, id="plain-result"),
        pytest.param(None, None, id="none"),
        pytest.param(StatusAttributeError(True), None, id="bool-status-ignored"),
    ],
)
def test_status_of_finds_the_http_status(value: object, expected: int | None) -> None:
    """`status_of` reads a response's or an exception's status, and ignores non-int statuses."""
    assert status_of(value) == expected


# -- the vocabulary --------------------------------------------------------------------------

VOCABULARY = [
    # "timeout"
    pytest.param("timeout", failed(TimeoutError()), True, id="timeout-TimeoutError"),
    pytest.param(
        "timeout", failed(asyncio.TimeoutError()), True, id="timeout-asyncio.TimeoutError"
    ),
    pytest.param(
        "timeout",
        failed(socket.timeout("timed out")),  # noqa: UP041
        True,
        id="timeout-socket.timeout",
    ),
    pytest.param(
        "timeout",
        failed(httpx.ReadTimeout("read timed out", request=REQUEST)),
        True,
        id="timeout-httpx.ReadTimeout",
    ),
    pytest.param(
        "timeout",
        failed(httpx.ConnectTimeout("connect timed out", request=REQUEST)),
        True,
        id="timeout-httpx.ConnectTimeout",
    ),
    pytest.param(
        "timeout", failed(ConnectionResetError()), False, id="timeout-not-ConnectionReset"
    ),
    pytest.param("timeout", failed(ValueError("timeout")), False, id="timeout-not-word-in-message"),
    pytest.param("timeout", returned(response(504)), False, id="timeout-not-504-response"),
    pytest.param("timeout", returned("ok"), False, id="timeout-not-success"),
    # "network"
    pytest.param(
        "network", failed(ConnectionResetError()), True, id="network-ConnectionResetError"
    ),
    pytest.param(
        "network", failed(ConnectionRefusedError()), True, id="network-ConnectionRefusedError"
    ),
    pytest.param("network", failed(BrokenPipeError()), True, id="network-BrokenPipeError"),
    pytest.param(
        "network",
        failed(httpx.ConnectError("refused", request=REQUEST)),
        True,
        id="network-httpx.ConnectError",
    ),
    pytest.param(
        "network",
        failed(httpx.RemoteProtocolError("peer closed connection", request=REQUEST)),
        True,
        id="network-httpx.RemoteProtocolError",
    ),
    pytest.param(
        "network",
        failed(httpx.ReadError("read failed", request=REQUEST)),
        True,
        id="network-httpx.ReadError",
    ),
    pytest.param("network", failed(TimeoutError()), False, id="network-not-TimeoutError"),
    pytest.param("network", failed(OSError("disk full")), False, id="network-not-OSError"),
    pytest.param(
        "network",
        failed(httpx.ReadTimeout("read timed out", request=REQUEST)),
        False,
        id="network-not-httpx.ReadTimeout",
    ),
    pytest.param("network", returned(response(502)), False, id="network-not-502-response"),
    # "server_error" and its alias "5xx"
    pytest.param("server_error", returned(response(503)), True, id="5xx-response-503"),
    pytest.param("server_error", returned(response(500)), True, id="5xx-response-500"),
    pytest.param("5xx", returned(response(503)), True, id="5xx-alias-response-503"),
    pytest.param("5xx", failed(status_error(502)), True, id="5xx-HTTPStatusError-502"),
    pytest.param(
        "server_error", failed(StatusAttributeError(503)), True, id="5xx-exception-.status"
    ),
    pytest.param(
        "5xx", failed(StatusCodeAttributeError(500)), True, id="5xx-exception-.status_code"
    ),
    pytest.param("5xx", returned(response(200)), False, id="5xx-not-200"),
    pytest.param("5xx", returned(response(429)), False, id="5xx-not-429"),
    pytest.param("5xx", returned(response(499)), False, id="5xx-not-499"),
    pytest.param("5xx", failed(status_error(404)), False, id="5xx-not-HTTPStatusError-404"),
    pytest.param("5xx", failed(StatusAttributeError(404)), False, id="5xx-not-.status-404"),
    pytest.param("5xx", failed(ValueError("500")), False, id="5xx-not-plain-exception"),
    # "rate_limit"
    pytest.param("rate_limit", returned(response(429)), True, id="rate_limit-response-429"),
    pytest.param(
        "rate_limit", failed(status_error(429)), True, id="rate_limit-HTTPStatusError-429"
    ),
    pytest.param("rate_limit", returned(response(503)), False, id="rate_limit-not-503"),
    pytest.param("rate_limit", returned(response(200)), False, id="rate_limit-not-200"),
    # {"pattern": ...} is re.search over str(exception)
    pytest.param(
        {"pattern": "reset by peer"},
        failed(OSError("[Errno 104] Connection reset by peer")),
        True,
        id="pattern-searches-mid-message",
    ),
    pytest.param(
        {"pattern": "^reset"},
        failed(OSError("connection reset")),
        False,
        id="pattern-anchor-respected",
    ),
    pytest.param(
        {"pattern": "timed? out"}, failed(ValueError("it timed out")), True, id="pattern-regex"
    ),
    pytest.param({"pattern": "reset"}, failed(ValueError("refused")), False, id="pattern-no-match"),
    pytest.param({"pattern": "reset"}, returned("reset"), False, id="pattern-ignores-results"),
    # {"status": [...]} and a bare int
    pytest.param({"status": [502, 503]}, returned(response(502)), True, id="status-list-502"),
    pytest.param({"status": [502, 503]}, returned(response(503)), True, id="status-list-503"),
    pytest.param(
        {"status": [502, 503]}, failed(status_error(503)), True, id="status-list-exception"
    ),
    pytest.param({"status": [502, 503]}, returned(response(500)), False, id="status-list-500"),
    pytest.param({"status": [502, 503]}, returned(response(504)), False, id="status-list-504"),
    pytest.param({"status": 503}, returned(response(503)), True, id="status-single-int"),
    pytest.param(503, returned(response(503)), True, id="bare-int-response"),
    pytest.param(503, failed(StatusAttributeError(503)), True, id="bare-int-exception"),
    pytest.param(503, returned(response(502)), False, id="bare-int-other-status"),
    pytest.param(503, failed(ValueError("503")), False, id="bare-int-plain-exception"),
    # an exception class
    pytest.param(KeyError, failed(KeyError("k")), True, id="class-exact"),
    pytest.param(LookupError, failed(KeyError("k")), True, id="class-subclass"),
    pytest.param(KeyError, failed(IndexError()), False, id="class-other"),
    pytest.param(KeyError, returned("ok"), False, id="class-not-success"),
]


@pytest.mark.parametrize(("spec", "outcome", "expected"), VOCABULARY)
def test_vocabulary_entry_matches_the_right_outcomes(
    spec: Any, outcome: Outcome, expected: bool
) -> None:
    """Each DESIGN §3 entry matches exactly the outcomes it names, and not its neighbours'."""
    assert matches(spec, outcome) is expected


@pytest.mark.parametrize(("spec", "outcome", "expected"), VOCABULARY)
def test_vocabulary_entry_in_a_list_behaves_the_same(
    spec: Any, outcome: Outcome, expected: bool
) -> None:
    """A one-entry ``retry_on`` list matches the same outcomes as the entry itself."""
    assert matches([spec], outcome) is expected


def test_predicate_sees_the_outcome() -> None:
    """A callable spec is a predicate called with the outcome, exceptions and results alike."""
    seen: list[Outcome] = []

    def late_or_retry_me(outcome: Outcome) -> bool:
        seen.append(outcome)
        return outcome.attempt >= 2 or outcome.result == "retry-me"

    first, second = failed(ValueError("x"), attempt=1), failed(ValueError("x"), attempt=2)
    assert matches(late_or_retry_me, first) is False
    assert matches(late_or_retry_me, second) is True
    assert matches(late_or_retry_me, returned("retry-me")) is True
    assert matches(late_or_retry_me, returned("fine")) is False
    assert seen[:2] == [first, second]


def test_predicate_result_is_coerced_to_bool() -> None:
    """A predicate returning a truthy non-bool value still yields a plain `bool`."""
    matcher = on_predicate(lambda outcome: outcome.attempt)  # type: ignore[arg-type,return-value]
    assert matcher(failed(ValueError(), attempt=3)) is True
    assert matcher(Outcome(attempt=0)) is False


def test_predicate_cannot_mutate_the_outcome() -> None:
    """The outcome a predicate receives is frozen."""

    def meddle(outcome: Outcome) -> bool:
        outcome.attempt = 99  # type: ignore[misc]
        return True

    outcome = failed(ValueError())
    with pytest.raises(AttributeError):
        matches(meddle, outcome)
    assert outcome.attempt == 1


def test_list_means_any_of() -> None:
    """A ``retry_on`` list matches when any one of its entries matches."""
    matcher = compile_matcher(["timeout", 503, KeyError])
    assert matcher is not None
    assert matcher(failed(TimeoutError()))
    assert matcher(returned(response(503)))
    assert matcher(failed(KeyError("k")))
    assert not matcher(failed(ValueError()))
    assert not matcher(returned(response(200)))


@pytest.mark.parametrize("spec", [pytest.param(None, id="none"), pytest.param([], id="empty-list")])
def test_empty_spec_compiles_to_none(spec: Any) -> None:
    """``None`` and ``[]`` compile to ``None``, which the policy reads as "any Exception"."""
    assert compile_matcher(spec) is None


@pytest.mark.parametrize(
    ("matcher", "uses_results"),
    [
        pytest.param(compile_matcher("timeout"), False, id="timeout"),
        pytest.param(compile_matcher("network"), False, id="network"),
        pytest.param(compile_matcher({"pattern": "x"}), False, id="pattern"),
        pytest.param(on_exception(KeyError), False, id="exception"),
        pytest.param(compile_matcher("5xx"), True, id="5xx"),
        pytest.param(compile_matcher("rate_limit"), True, id="rate_limit"),
        pytest.param(on_status(503), True, id="status"),
        pytest.param(on_predicate(lambda outcome: True), True, id="predicate"),
        pytest.param(on_exception(KeyError) | on_status(503), True, id="any-with-status"),
        pytest.param(on_exception(KeyError) & on_status(503), False, id="all-with-exception"),
    ],
)
def test_uses_results_says_whether_results_can_match(
    matcher: Matcher | None, uses_results: bool
) -> None:
    """`uses_results` is true exactly for matchers that can match a returned value."""
    assert matcher is not None
    assert matcher.uses_results is uses_results


# -- composition -----------------------------------------------------------------------------


def test_or_matches_either_side() -> None:
    """``a | b`` matches what ``a`` or ``b`` matches, and nothing else."""
    matcher = on_exception(KeyError) | on_status(503)
    assert matcher(failed(KeyError("k")))
    assert matcher(returned(response(503)))
    assert not matcher(failed(ValueError()))
    assert not matcher(returned(response(200)))


def test_and_needs_both_sides() -> None:
    """``a & b`` matches only what both ``a`` and ``b`` match."""
    matcher = on_exception(OSError) & on_predicate(lambda outcome: outcome.attempt < 3)
    assert matcher(failed(ConnectionResetError(), attempt=1))
    assert not matcher(failed(ConnectionResetError(), attempt=3))
    assert not matcher(failed(ValueError(), attempt=1))
    assert not matcher(returned("ok", attempt=1))


def test_invert_of_exception_matcher_matches_other_exceptions_only() -> None:
    """``~on_exception(KeyError)`` matches any other exception but never a successful result."""
    matcher = ~on_exception(KeyError)
    assert matcher(failed(ValueError()))
    assert not matcher(failed(KeyError("k")))
    assert not matcher(returned("ok"))
    assert not matcher(returned(None))
    assert not matcher(returned(response(200)))
    assert matcher.uses_results is False


def test_double_invert_is_the_original() -> None:
    """``~~m`` matches exactly what ``m`` matches."""
    matcher = ~~on_exception(KeyError)
    assert matcher(failed(KeyError("k")))
    assert not matcher(failed(ValueError()))
    assert not matcher(returned("ok"))


def test_invert_of_status_matcher_matches_other_statuses() -> None:
    """``~on_status(404)`` matches a response with another status and not a 404."""
    matcher = ~on_status(404)
    assert matcher(returned(response(503)))
    assert not matcher(returned(response(404)))
    assert not matcher(failed(status_error(404)))


def test_composed_matcher_combines_named_entries() -> None:
    """Named entries compose too: ``(timeout | 5xx) & ~429`` as a worked example."""
    timeout, server_error = compile_matcher("timeout"), compile_matcher("5xx")
    assert timeout is not None
    assert server_error is not None
    matcher = (timeout | server_error) & ~on_status(429)
    assert matcher(failed(TimeoutError()))
    assert matcher(returned(response(502)))
    assert not matcher(returned(response(429)))
    assert not matcher(failed(ValueError()))


def test_nested_any_groups_flatten() -> None:
    """``(a | b) | c`` and ``a | (b | c)`` are one flat group of three parts."""
    a, b, c = on_exception(KeyError), on_status(503), on_exception(TimeoutError)
    left, right = (a | b) | c, a | (b | c)
    assert repr(left).count(" | ") == 2
    assert left == right
    assert hash(left) == hash(right)


def test_nested_all_groups_flatten() -> None:
    """``(a & b) & c`` is one flat group of three parts."""
    a, b, c = on_exception(OSError), on_status(503), on_predicate(bool)
    combined = (a & b) & c
    assert repr(combined).count(" & ") == 2
    assert combined == a & (b & c)


def test_mixed_groups_do_not_flatten_into_each_other() -> None:
    """``(a & b) | c`` keeps the ``&`` group intact as one part of the ``|`` group."""
    a, b, c = on_exception(OSError), on_status(503), on_status(429)
    combined = (a & b) | c
    assert repr(combined).count(" | ") == 1
    assert repr(combined).count(" & ") == 1
    assert combined != a & (b | c)


# -- equality --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("timeout", "timeout", id="name"),
        pytest.param("5xx", "server_error", id="alias"),
        pytest.param(503, 503, id="int"),
        pytest.param({"status": [502, 503]}, {"status": [503, 502]}, id="status-order"),
        pytest.param({"pattern": "reset"}, {"pattern": "reset"}, id="pattern"),
        pytest.param(KeyError, KeyError, id="class"),
        pytest.param(
            ["timeout", {"status": [502, 503]}, KeyError],
            ("timeout", {"status": [502, 503]}, KeyError),
            id="list-and-tuple",
        ),
    ],
)
def test_equal_specs_compile_to_equal_matchers(first: Any, second: Any) -> None:
    """Matchers compiled from equal specs compare and hash equal."""
    assert compile_matcher(first) == compile_matcher(second)
    assert hash(compile_matcher(first)) == hash(compile_matcher(second))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("timeout", "network", id="names"),
        pytest.param(502, 503, id="ints"),
        pytest.param({"pattern": "reset"}, {"pattern": "refused"}, id="patterns"),
        pytest.param(KeyError, ValueError, id="classes"),
        pytest.param(["timeout", 503], ["timeout", 502], id="lists"),
    ],
)
def test_different_specs_compile_to_different_matchers(first: Any, second: Any) -> None:
    """Matchers compiled from different specs are not equal."""
    assert compile_matcher(first) != compile_matcher(second)


def test_predicates_are_equal_only_when_the_function_is_the_same() -> None:
    """Predicate matchers are equal when they wrap the same callable, not merely a similar one."""

    def first(outcome: Outcome) -> bool:
        return True

    def second(outcome: Outcome) -> bool:
        return True

    assert on_predicate(first) == on_predicate(first)
    assert on_predicate(first) != on_predicate(second)


def test_matcher_is_not_equal_to_other_types() -> None:
    """A matcher never equals a non-matcher, even its own spec."""
    assert compile_matcher("timeout") != "timeout"


# -- bad specs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param(["timeout", "bogus"], "retry_on[1]", id="unknown-name"),
        pytest.param("bogus", "retry_on", id="unknown-name-alone"),
        pytest.param([KeyboardInterrupt], "retry_on[0]", id="KeyboardInterrupt"),
        pytest.param(["network", SystemExit], "retry_on[1]", id="SystemExit"),
        pytest.param([asyncio.CancelledError], "retry_on[0]", id="CancelledError"),
        pytest.param([BaseException], "retry_on[0]", id="BaseException"),
        pytest.param([int], "retry_on[0]", id="non-exception-class"),
        pytest.param([99], "retry_on[0]", id="status-99"),
        pytest.param(["timeout", 600], "retry_on[1]", id="status-600"),
        pytest.param([True], "retry_on[0]", id="bool"),
        pytest.param(False, "retry_on", id="bool-alone"),
        pytest.param([{"pattern": "("}], "retry_on[0].pattern", id="bad-regex"),
        pytest.param([{"pattern": 5}], "retry_on[0].pattern", id="non-string-regex"),
        pytest.param([{"pattern": "x", "status": 503}], "retry_on[0]", id="extra-keys"),
        pytest.param([{"statuses": [503]}], "retry_on[0]", id="unknown-key"),
        pytest.param([{}], "retry_on[0]", id="empty-mapping"),
        pytest.param([{"status": [502, 600]}], "retry_on[0].status", id="status-list-600"),
        pytest.param([{"status": "502"}], "retry_on[0].status", id="status-string"),
        pytest.param([{"status": [True]}], "retry_on[0].status", id="status-list-bool"),
        pytest.param([object()], "retry_on[0]", id="object"),
        pytest.param([["timeout"]], "retry_on[0]", id="nested-list"),
    ],
)
def test_bad_spec_raises_config_error_naming_the_path(spec: Any, field: str) -> None:
    """A bad ``retry_on`` entry is a `ConfigError` whose message starts with the entry's path."""
    with pytest.raises(ConfigError) as excinfo:
        compile_matcher(spec)
    assert excinfo.value.field == field
    assert str(excinfo.value).startswith(f"{field}: ")
    assert excinfo.value.example
    assert excinfo.value.example in str(excinfo.value)


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(
            lambda: on_exception(KeyboardInterrupt),  # type: ignore[arg-type]
            id="on_exception-BaseException",
        ),
        pytest.param(
            lambda: on_exception(KeyError, "KeyError"),  # type: ignore[arg-type]
            id="on_exception-string",
        ),
        pytest.param(lambda: on_status(99), id="on_status-99"),
        pytest.param(lambda: on_status(600), id="on_status-600"),
        pytest.param(lambda: on_status(True), id="on_status-bool"),
        pytest.param(
            lambda: on_predicate("not callable"),  # type: ignore[arg-type]
            id="on_predicate-not-callable",
        ),
    ],
)
def test_bad_builder_arguments_raise_config_error(build: Any) -> None:
    """The builder functions reject what `compile_matcher` rejects, with a `ConfigError`."""
    with pytest.raises(ConfigError):
        build()


@pytest.mark.parametrize("code", [pytest.param(100, id="100"), pytest.param(599, id="599")])
def test_status_bounds_are_inclusive(code: int) -> None:
    """Statuses 100 and 599 are valid matcher statuses."""
    assert on_status(code)(returned(response(code)))


def test_an_or_asks_only_its_result_matchers_about_a_returned_value() -> None:
    """`uses_results=False` means "never matches a returned value": an ``|`` does not ask such a
    part about one (the transports match every response), and still asks it about errors."""
    asked: list[str] = []

    def exceptions_only(outcome: Outcome) -> bool:
        asked.append("exceptions_only")
        return True

    matcher = Matcher(exceptions_only, ("predicate", "exceptions_only"), uses_results=False) | (
        on_status(503)
    )
    assert matcher(Outcome(1, 0.0, None, httpx.Response(503), 503))
    assert not matcher(Outcome(1, 0.0, None, httpx.Response(200), 200))
    assert asked == []
    assert matcher(Outcome(1, 0.0, ValueError("x")))
    assert asked == ["exceptions_only"]
