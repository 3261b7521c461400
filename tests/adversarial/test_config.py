"""Config input that used to escape as something else, or to load when it is wrong.

Row A: an integer of thousands of digits in a YAML or TOML file (a count, a status, a
``{secs, nanos}`` duration, a backoff option, a breaker option) escaped ``load_config`` and
``retrymw check`` as ``ValueError: Exceeds the limit (4300 digits)``, raised by the parser or by
our own conversion. Each is now a `ConfigError` naming the field path, showing the start of the
value and its length (never all of it) and an accepted example; ``retrymw check`` reports it
with its line. Hypothesis properties feed hostile numbers and text of 10**4 to 10**5 characters
into every numeric field: the file loads or raises `ConfigError`, nothing else, in linear time.

Row B: a breaker, budget or throttle keyed by a name that is no policy bound to nothing, and
``retrymw check --strict`` said OK. It is now an error of ``load_config`` and a finding of
``retrymw check`` with its line, suggesting the close match; ``config.policy(name)`` and a
transport's per-request policy name suggest it too.

Row C: ``pacers:`` and ``hedges:``. An unknown option of any section was answered with a
breaker's example; a pacer's ``cost`` did not say to pass ``pacer=`` in code; ``rate: 5`` and
``after: 5`` loaded as 5/s and 5 s where every duration in a file must carry its unit.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrymw import ConfigError, load_config
from retrymw.cli._check import check_data, check_file
from tests.cli.test_cli import run_cli

needs_yaml = pytest.mark.skipif(
    importlib.util.find_spec("yaml") is None, reason="PyYAML (the yaml extra) is not installed"
)

#: 5 000 digits: past Python's int-string conversion limit (4 300) that the parsers hit.
BIG = "9" * 5000
#: However long the value, an error message stays a line or two.
MESSAGE_LIMIT = 400


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path) -> ConfigError:
    """The ConfigError that loading ``path`` raises (anything else fails the test)."""
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return caught.value


def assert_shown_briefly(error: ConfigError, literal: str) -> None:
    """The message shows the value's start and its length, never the whole value."""
    message = str(error)
    assert len(message) < MESSAGE_LIMIT, message
    assert literal[:20] in message
    assert f"({len(literal)} characters)" in message
    assert "expected e.g. " in message


# -- Row A: huge integers in files ---------------------------------------------------------------

# (file text with {n} for the literal, the field path, the line that writes it)
YAML_CASES = [
    pytest.param("retry_defaults:\n  attempts: {n}\n", "retry_defaults.attempts", 2, id="attempts"),
    pytest.param(
        "policies:\n  p:\n    max_attempts: {n}\n", "policies.p.max_attempts", 3, id="max-attempts"
    ),
    pytest.param("policies:\n  p:\n    retry: {n}\n", "policies.p.retry", 3, id="compact-retry"),
    pytest.param(
        "retry_defaults:\n  jitter_factor: {n}\n",
        "retry_defaults.jitter_factor",
        2,
        id="jitter-factor",
    ),
    pytest.param(
        "retry_defaults:\n  backoff: {{exponential: {{base: {n}}}}}\n",
        "retry_defaults.backoff.exponential.base",
        2,
        id="exponential-base",
    ),
    pytest.param(
        "retry_defaults:\n  retry_on:\n    - 429\n    - {n}\n",
        "retry_defaults.retry_on[1]",
        4,
        id="retry-on-status",
    ),
    pytest.param(
        "retry_defaults:\n  timeout: {{secs: {n}, nanos: 0}}\n",
        "retry_defaults.timeout.secs",
        2,
        id="secs",
    ),
    pytest.param(
        "retry_defaults:\n  backoff:\n    custom:\n      delays:\n        - 1s\n"
        "        - {{secs: 1, nanos: {n}}}\n",
        "retry_defaults.backoff.custom.delays[1].nanos",
        6,
        id="custom-delay-nanos",
    ),
    pytest.param(
        "policies:\n  p: {{}}\nbreakers:\n  p:\n    failure_threshold: {n}\n",
        "breakers.p.failure_threshold",
        5,
        id="breaker-option",
    ),
    pytest.param(
        "policies:\n  p: {{}}\nbudgets:\n  p:\n    min_capacity: {n}\n",
        "budgets.p.min_capacity",
        5,
        id="budget-option",
    ),
    pytest.param(
        "policies:\n  p: {{}}\nthrottles:\n  p:\n    k: {n}\n", "throttles.p.k", 5, id="throttle"
    ),
]

# The spellings YAML 1.1 reads as integers, each 5 000 characters or more.
YAML_LITERALS = [
    pytest.param(BIG, id="decimal"),
    pytest.param("1_" + "0" * 5000, id="underscores"),
    pytest.param("+" + BIG, id="plus-sign"),
    pytest.param("-" + BIG, id="minus-sign"),
    pytest.param(BIG + ":00", id="sexagesimal"),
    pytest.param("0x" + "f" * 5000, id="hex"),
    pytest.param("0b" + "1" * 5000, id="binary"),
    pytest.param("0" + "7" * 5000, id="octal"),
]


@needs_yaml
@pytest.mark.parametrize("literal", YAML_LITERALS)
@pytest.mark.parametrize(("template", "field", "line"), YAML_CASES)
def test_a_huge_yaml_integer_is_a_config_error_with_its_path(
    tmp_path: Path, template: str, field: str, line: int, literal: str
) -> None:
    """Every integer spelling of 5 000 digits, in every numeric field, is a ConfigError naming
    the field, showing the literal's start and length, and is a finding on its line."""
    path = write(tmp_path, "big.yaml", template.format(n=literal))
    error = config_error(path)
    assert error.field == field
    assert "out of range (64-bit at most)" in error.problem
    assert_shown_briefly(error, literal)
    (finding,) = check_file(str(path)).errors
    assert (finding.line, finding.message) == (line, str(error))


TOML_CASES = [
    pytest.param("[retry_defaults]\nattempts = {n}\n", "retry_defaults.attempts", 2, id="attempts"),
    pytest.param(
        "[retry_defaults]\nretry_on = [429, {n}]\n",
        "retry_defaults.retry_on[1]",
        2,
        id="retry-on-status",
    ),
    pytest.param(
        "[policies.p]\nbackoff = {{exponential = {{base = {n}}}}}\n",
        "policies.p.backoff.exponential.base",
        2,
        id="inline-table",
    ),
    pytest.param(
        "[policies.p]\ntimeout = {{secs = -{n}}}\n", "policies.p.timeout.secs", 2, id="negative"
    ),
    pytest.param(
        '[policies.p]\n\n[breakers.p]\nfailure_threshold = {n}  # "99"\n',
        "breakers.p.failure_threshold",
        4,
        id="breaker-option",
    ),
    pytest.param(
        '[retry_defaults]\nname = "{n}"  # {n}\nretry_on = [\n  503,\n  {n},\n]\n',
        "retry_defaults.retry_on[1]",
        3,
        id="multi-line-array-after-a-string-of-digits",
    ),
]


@pytest.mark.parametrize("literal", [pytest.param(BIG, id="decimal"), pytest.param("1_" + BIG)])
@pytest.mark.parametrize(("template", "field", "line"), TOML_CASES)
def test_a_huge_toml_integer_is_a_config_error_with_its_path(
    tmp_path: Path, template: str, field: str, line: int, literal: str
) -> None:
    """tomllib's ValueError on a 5 000-digit integer becomes a ConfigError naming the field (an
    inline table's or array's value by its path, on its key's line); a string of digits stays."""
    path = write(tmp_path, "big.toml", template.format(n=literal))
    error = config_error(path)
    assert error.field == field
    assert "out of range (64-bit at most)" in error.problem
    written = f"-{literal}" if "-{n}" in template else literal  # the sign is the literal's
    assert_shown_briefly(error, written)
    (finding,) = check_file(str(path)).errors
    assert (finding.line, finding.message) == (line, str(error))


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        pytest.param(
            f'[retry_defaults]\nname = """x\n{BIG} ""\\"""""\nattempts = {BIG}\n',
            "retry_defaults.attempts",
            4,
            id="after-a-multi-line-string-of-digits",
        ),
        pytest.param(
            f"[retry_defaults]\nname = '''{BIG}'''''\nattempts = {BIG}\n",
            "retry_defaults.attempts",
            3,
            id="after-a-literal-string-of-digits",
        ),
        pytest.param(
            f"[retry_defaults]\nretry_on = [[503], [{BIG}]]\n",
            "retry_defaults.retry_on[1][0]",
            2,
            id="nested-array",
        ),
    ],
)
def test_a_huge_toml_integer_among_strings_of_digits(
    tmp_path: Path, text: str, field: str, line: int
) -> None:
    """Digits inside TOML strings stay text; the integer outside them is reported, on its line."""
    path = write(tmp_path, "strings.toml", text)
    assert config_error(path).field == field
    found = {error.message.split(": ")[0]: error.line for error in check_file(str(path)).errors}
    assert found[field] == line


def test_a_syntax_error_after_a_huge_toml_integer_is_reported(tmp_path: Path) -> None:
    """Reading the file again for its huge integer still finds a later syntax error's line."""
    path = write(tmp_path, "broken.toml", f"[retry_defaults]\nattempts = {BIG}\nretry = = 1\n")
    error = config_error(path)
    assert "not valid TOML at line 3" in error.problem
    assert len(str(error)) < MESSAGE_LIMIT + len(str(path))


def test_a_huge_toml_key_of_digits_is_still_a_key(tmp_path: Path) -> None:
    """A bare key made of digits is text, not a number: beside a huge integer it is kept
    as written, and only the integer is reported."""
    text = f"[retry_defaults]\nattempts = {BIG}\n\n[policies]\n{BIG} = {{attempts = 2}}\n"
    path = write(tmp_path, "keys.toml", text)
    assert config_error(path).field == "retry_defaults.attempts"
    report = check_file(str(path))
    assert [finding.line for finding in report.errors] == [2]
    assert report.policies == [BIG]


@needs_yaml
def test_check_reports_every_huge_integer_with_its_line_and_exits_1(tmp_path: Path) -> None:
    """``retrymw check`` prints one finding per huge integer, on its line, and exits 1 (the
    documented code for an invalid file) without a traceback."""
    text = (
        "retry_defaults:\n"
        f"  attempts: {BIG}\n"
        "  initial_delay: 100ms\n"
        "policies:\n"
        "  payments:\n"
        f"    retry_on: [503, {BIG}]\n"
        "breakers:\n"
        f"  payments: {{failure_threshold: {BIG}}}\n"
    )
    path = write(tmp_path, "big.yaml", text)
    result = run_cli("check", str(path))
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    errors = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    found = [line.removeprefix(f"error: {path}:").split(": ")[:2] for line in errors]
    assert found == [
        ["2", "retry_defaults.attempts"],
        ["6", "policies.payments.retry_on[1]"],
        ["8", "breakers.payments.failure_threshold"],
    ]
    assert all(len(line) < MESSAGE_LIMIT + len(str(path)) for line in errors)
    assert result.stdout.endswith(f"{path}: 3 errors, no warnings\n")


def test_check_reports_a_huge_toml_integer_beside_other_errors(tmp_path: Path) -> None:
    """A huge TOML integer no longer hides the rest of the file: every error is reported."""
    text = f'[retry_defaults]\nattempts = 0\n\n[policies.a]\nretry = {BIG}\njitter = "often"\n'
    path = write(tmp_path, "mixed.toml", text)
    result = run_cli("check", str(path))
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    found = [line.removeprefix(f"error: {path}:").split(": ")[:2] for line in errors]
    assert found == [
        ["2", "retry_defaults.attempts"],
        ["5", "policies.a.retry"],
        ["6", "policies.a.jitter"],
    ]


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"attempts": 10**5000}, id="past-the-str-limit"),
        pytest.param({"attempts": -(10**3000)}, id="within-the-str-limit"),
        pytest.param({"retry_on": [16**5000]}, id="status"),
    ],
)
def test_a_huge_integer_from_code_is_shown_briefly(fields: dict[str, Any]) -> None:
    """A mapping from Python gets the same short rendering (decimal digits, or hexadecimal
    past Python's conversion limit), not ``<int>`` nor hundreds of digits."""
    with pytest.raises(ConfigError) as caught:
        load_config({"retry_defaults": fields})
    message = str(caught.value)
    assert len(message) < MESSAGE_LIMIT
    assert "<int>" not in message
    assert "… (" in message
    assert " characters)" in message


@pytest.mark.parametrize(
    ("fields", "field", "value"),
    [
        pytest.param(
            {"initial_delay": f"{BIG}s"}, "retry_defaults.initial_delay", f"{BIG}s", id="seconds"
        ),
        pytest.param(
            {"max_delay": f"1.{BIG}ms"}, "retry_defaults.max_delay", f"1.{BIG}ms", id="fraction"
        ),
        pytest.param(
            {"backoff": {"linear": {"increment": f"{BIG}h"}}},
            "retry_defaults.backoff.linear.increment",
            f"{BIG}h",
            id="increment",
        ),
    ],
)
def test_a_duration_of_thousands_of_digits_is_shown_briefly(
    fields: dict[str, Any], field: str, value: str
) -> None:
    """A duration text of 5 000 digits is refused, its start and length shown, not 500 digits;
    the start is shown redacted, so that a cut never leaks half a secret."""
    with pytest.raises(ConfigError) as caught:
        load_config({"retry_defaults": fields})
    assert caught.value.field == field
    assert_shown_briefly(caught.value, value)
    secret = "https://user:hunter2@example.test/" + value
    with pytest.raises(ConfigError) as redacted:
        load_config({"retry_defaults": {"timeout": secret}})
    assert "hunter2" not in str(redacted.value)
    assert f"({len(secret)} characters)" in str(redacted.value)


# -- Row A: properties -----------------------------------------------------------------------------

# Where a hostile value goes: (YAML template, TOML template); {v} is the value's text.
PLACES = [
    ("retry_defaults:\n  attempts: {v}\n", "[retry_defaults]\nattempts = {v}\n"),
    ("policies:\n  p:\n    retry: {v}\n", "[policies.p]\nretry = {v}\n"),
    ("retry_defaults:\n  jitter_factor: {v}\n", "[retry_defaults]\njitter_factor = {v}\n"),
    ("retry_defaults:\n  initial_delay: {v}\n", "[retry_defaults]\ninitial_delay = {v}\n"),
    ("retry_defaults:\n  retry_on: [429, {v}]\n", "[retry_defaults]\nretry_on = [429, {v}]\n"),
    (
        "retry_defaults:\n  timeout: {{secs: {v}, nanos: {v}}}\n",
        "[retry_defaults]\ntimeout = {{secs = {v}, nanos = {v}}}\n",
    ),
    (
        "retry_defaults:\n  backoff: {{exponential: {{base: {v}, initial: {v}}}}}\n",
        "[retry_defaults]\nbackoff = {{exponential = {{base = {v}, initial = {v}}}}}\n",
    ),
    (
        "retry_defaults:\n  backoff: {{custom: {{delays: [{v}, 1s, {v}]}}}}\n",
        '[retry_defaults]\nbackoff = {{custom = {{delays = [{v}, "1s", {v}]}}}}\n',
    ),
    (
        "policies:\n  p: {{}}\nbreakers:\n  p: {{window: {v}, recovery_timeout: {v}}}\n",
        "[policies.p]\n[breakers.p]\nwindow = {v}\nrecovery_timeout = {v}\n",
    ),
    (
        "policies:\n  p: {{}}\nbudgets:\n  p: {{ratio: {v}, window: {v}}}\n",
        "[policies.p]\n[budgets.p]\nratio = {v}\nwindow = {v}\n",
    ),
    (
        "policies:\n  p: {{}}\npacers:\n  p: {{rate: {v}, burst: {v}, tokens: {v}}}\n",
        "[policies.p]\n[pacers.p]\nrate = {v}\nburst = {v}\ntokens = {v}\n",
    ),
    (
        "policies:\n  p: {{}}\nhedges:\n  p: {{after: {v}, max_extra: {v}, window: {v}}}\n",
        "[policies.p]\n[hedges.p]\nafter = {v}\nmax_extra = {v}\nwindow = {v}\n",
    ),
]

_digits = st.integers(min_value=10**4, max_value=10**5).map(lambda n: "9" * n)


@st.composite
def hostile_numbers(draw: st.DrawFn) -> str:
    """A number (or a number-like text) of 10**4 to 10**5 characters, as a file may write it."""
    digits = draw(_digits)
    form = draw(
        st.sampled_from(
            [
                "{d}",
                "-{d}",
                "+{d}",
                "1_{d}",
                "0x{d}",
                "0o7{d}",
                "0b1{d}",
                "{d}.5",
                "0.{d}",
                "1e{d}",
                "{d}e-{d}",
                "{d}s",
                "1.{d}ms",
                "{d}:30",
                '"{d}"',
                '"{d}s"',
                '"1h{d}m"',
                '"-{d}s"',
            ]
        )
    )
    return form.format(d=digits if "b1" not in form else "1" * len(digits))


@st.composite
def hostile_text(draw: st.DrawFn) -> str:
    """Random text padded to 10**4 to 10**5 characters with digits (so numbers are long)."""
    head = draw(st.text(max_size=20))
    return head + "9" * draw(st.integers(min_value=10**4, max_value=10**5))


def loads_or_refuses(path: Path) -> None:
    """Load ``path``: success and ConfigError are the only outcomes; the message is short."""
    message = ""
    try:
        load_config(path)
    except ConfigError as error:
        message = str(error)
    assert len(message) < 2_000
    report = check_file(str(path))  # never raises either
    assert all(len(finding.message) < 2_000 for finding in report.errors)


@needs_yaml
@settings(deadline=None, max_examples=25)
@given(place=st.sampled_from(PLACES), value=st.one_of(hostile_numbers(), hostile_text()))
def test_hostile_yaml_values_load_or_raise_config_error(
    tmp_path_factory: pytest.TempPathFactory, place: tuple[str, str], value: str
) -> None:
    """Any huge number or text in any numeric field of a YAML file: loads or ConfigError."""
    path = tmp_path_factory.mktemp("yaml") / "hostile.yaml"
    path.write_text(place[0].format(v=value), encoding="utf-8")
    loads_or_refuses(path)


@settings(deadline=None, max_examples=25)
@given(place=st.sampled_from(PLACES), value=st.one_of(hostile_numbers(), hostile_text()))
def test_hostile_toml_values_load_or_raise_config_error(
    tmp_path_factory: pytest.TempPathFactory, place: tuple[str, str], value: str
) -> None:
    """Any huge number or text in any numeric field of a TOML file: loads or ConfigError."""
    path = tmp_path_factory.mktemp("toml") / "hostile.toml"
    path.write_text(place[1].format(v=value), encoding="utf-8")
    loads_or_refuses(path)


def cpu_seconds(run: Callable[[], object]) -> float:
    """The least process time of three runs of ``run``."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def refuse(path: Path) -> None:
    with pytest.raises(ConfigError):
        load_config(path)


def check(path: Path) -> None:
    assert check_file(str(path)).errors


@pytest.mark.parametrize("run", [pytest.param(refuse, id="load"), pytest.param(check, id="check")])
@pytest.mark.parametrize(
    ("suffix", "template"),
    [
        pytest.param(
            ".yaml", "retry_defaults:\n  retry_on: [429, {n}]\n", id="yaml", marks=needs_yaml
        ),
        pytest.param(".toml", "[retry_defaults]\nretry_on = [429, {n}]\n", id="toml"),
    ],
)
def test_refusing_a_huge_integer_takes_linear_time(
    tmp_path: Path, suffix: str, template: str, run: Callable[[Path], None]
) -> None:
    """Ten times the digits cost at most ~30 times the work (linear: ~10; the quadratic
    conversion to text, or a parser re-run per literal, would be ~100)."""
    small = write(tmp_path, f"small{suffix}", template.format(n="7" * 20_000))
    large = write(tmp_path, f"large{suffix}", template.format(n="7" * 200_000))
    floor = 0.002  # below this, process_time is too coarse to divide by
    ratio = cpu_seconds(lambda: run(large)) / max(cpu_seconds(lambda: run(small)), floor)
    assert ratio < 30, ratio


# -- Row B: protection keyed by a name that is no policy ------------------------------------------

POLICIES = {"payments": {"attempts": 5}, "search": {"attempts": 2}}


@pytest.mark.parametrize(
    ("section", "options"),
    [
        pytest.param("breakers", {"failure_threshold": 5}, id="breaker"),
        pytest.param("budgets", {"ratio": 0.1}, id="budget"),
        pytest.param("throttles", {"k": 2.0}, id="throttle"),
    ],
)
def test_protection_for_a_misspelt_policy_is_an_error(section: str, options: Any) -> None:
    """``breakers.paymnts`` (no such policy) is a ConfigError that suggests the close match
    and lists the policy names, instead of a breaker bound to nothing."""
    with pytest.raises(ConfigError) as caught:
        load_config({"policies": POLICIES, section: {"paymnts": options}})
    error = caught.value
    assert error.field == f"{section}.paymnts"
    assert error.value == "paymnts"
    assert "did you mean 'payments'?" in str(error)
    assert "default, payments, search" in str(error)
    # A misspelt entry with a bad option reports the option first: fixing it is one step.
    bad = {"paymnts": {**options, "clock": "now"}}
    with pytest.raises(ConfigError) as first:
        load_config({"policies": POLICIES, section: bad})
    assert first.value.field == f"{section}.paymnts.clock"


def test_protection_without_a_close_match_lists_the_policies() -> None:
    """A name like no policy at all gets no suggestion, only the list of names."""
    with pytest.raises(ConfigError) as caught:
        load_config({"policies": POLICIES, "budgets": {"zzz": {}}})
    assert "did you mean" not in str(caught.value)
    assert "default, payments, search" in str(caught.value)


def test_protection_binds_to_policies_and_to_the_defaults_name() -> None:
    """The names protection may use are the policies' keys and the defaults' name, which is
    ``default`` unless ``retry_defaults`` sets one; then ``default`` names nothing."""
    config = load_config({"policies": POLICIES, "breakers": {"default": {}, "search": {}}})
    assert config.retrier().breaker is config.breaker("default")
    assert config.retrier("search").breaker is config.breaker("search")
    named = load_config({"retry_defaults": {"name": "api"}, "budgets": {"api": {}}})
    assert named.retrier().budget is named.budget("api")
    with pytest.raises(ConfigError, match=r"a policy name: api$") as caught:
        load_config({"retry_defaults": {"name": "api"}, "breakers": {"default": {}}})
    assert caught.value.field == "breakers.default"


def test_an_unknown_policy_name_suggests_the_close_match() -> None:
    """``config.policy(name)``, ``retrier`` and ``transport`` suggest the close match."""
    config = load_config({"policies": POLICIES})
    for lookup in (config.policy, config.retrier, config.transport):
        with pytest.raises(KeyError, match="did you mean 'payments'") as caught:
            lookup("paymnts")
        assert "known policies: payments, search" in str(caught.value)


def test_a_per_request_policy_name_suggests_the_close_match() -> None:
    """A request asking for policy ``paymnts`` fails before sending, suggesting ``payments``."""
    config = load_config({"policies": POLICIES})
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    transport = config.transport("search", httpx.MockTransport(handler))
    with httpx.Client(transport=transport) as client:
        with pytest.raises(ConfigError, match=r"did you mean 'payments'\?") as caught:
            client.get("https://api.example.test/", extensions={"retrymw": "paymnts"})
        assert client.get("https://api.example.test/").status_code == 200
    assert "known: payments, search" in caught.value.problem
    assert len(sent) == 1


MISSPELT = """\
policies:
  payments: {attempts: 5}
  search: {attempts: 2}
breakers:
  payments: {failure_threshold: 5}
  paymnts: {failure_threshold: 3}
budgets:
  serch: {ratio: 0.1}
throttles:
  reports: {k: 2.0}
"""


@needs_yaml
def test_check_reports_protection_for_unknown_policies_with_lines(tmp_path: Path) -> None:
    """``retrymw check`` (also ``--strict``) fails on each misspelt name, on its line, with
    the suggestion; it used to say OK."""
    path = write(tmp_path, "misspelt.yaml", MISSPELT)
    for args in (["check"], ["check", "--strict"]):
        result = run_cli(*args, str(path))
        assert result.returncode == 1, result.stdout
        errors = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
        found = [line.removeprefix(f"error: {path}:").split(": ")[:2] for line in errors]
        assert found == [
            ["6", "breakers.paymnts"],
            ["8", "budgets.serch"],
            ["10", "throttles.reports"],
        ]
        assert "did you mean 'payments'?" in errors[0]
        assert "did you mean 'search'?" in errors[1]
        assert "did you mean" not in errors[2]
        assert result.stdout.endswith(f"{path}: 3 errors, no warnings\n")


def test_check_still_reports_a_bad_option_of_a_misspelt_entry() -> None:
    """Both the name and the entry's bad option are findings: every error, not the first."""
    report = check_data(
        {"policies": {"payments": {}}, "breakers": {"paymnts": {"failure_threshold": 0}}}
    )
    assert sorted(finding.message.split(": ")[0] for finding in report.errors) == [
        "breakers.paymnts",
        "breakers.paymnts.failure_threshold",
    ]


def test_check_accepts_protection_named_like_the_defaults() -> None:
    """``default`` (or the defaults' own name) is a policy name for check too."""
    named = {"retry_defaults": {"name": "api"}, "policies": {"p": {}}, "budgets": {"api": {}}}
    assert check_data(named).errors == []
    report = check_data({"retry_defaults": {"name": "api"}, "budgets": {"default": {}}})
    (finding,) = report.errors
    assert finding.message.startswith("budgets.default: names no policy")
    assert finding.message.endswith("a policy name: api")


def test_a_huge_name_or_many_policies_keep_the_message_short() -> None:
    """Suggestions are bounded: with a 2 000-character name and 2 000 policies the message is
    the field path plus a line (the known names are listed up to a limit, with their count)."""
    policies: dict[str, Any] = {f"policy-{i}": {} for i in range(2_000)}
    name = "policy-" + "x" * 2_000
    with pytest.raises(ConfigError) as caught:
        load_config({"policies": policies, "breakers": {name: {}}})
    assert len(str(caught.value)) < len(caught.value.field) + 1_000
    assert "did you mean" not in str(caught.value)
    assert "(2001 names)" in str(caught.value)
    with pytest.raises(ConfigError, match="did you mean 'policy-7'") as near:
        load_config({"policies": policies, "breakers": {"policy_7": {}}})
    assert len(str(near.value)) < 1_500


def test_a_policy_without_jitter_of_its_own_keeps_it_unset_through_a_round_trip() -> None:
    """`to_mapping` once wrote ``jitter: false`` for a policy that left jitter unset: loaded
    back, the policy had chosen "no jitter", and a transport given it retried in lockstep."""
    from retrymw._config.loader import to_mapping
    from retrymw._core.policy import RetryPolicy

    unset = RetryPolicy(name="api")
    loaded = load_config({"policies": {"api": to_mapping(unset)}}).policy("api")
    assert not loaded.sets_jitter
    assert loaded.with_default_jitter("full").jitter == "full"
    chosen = RetryPolicy(name="api", jitter=False)
    again = load_config({"policies": {"api": to_mapping(chosen)}}).policy("api")
    assert again.sets_jitter
    assert not again.with_default_jitter("full").jitter


def test_a_budgets_blip_is_a_duration_in_config() -> None:
    """`blip` was passed through raw: ``blip: 5`` (no unit) made a 5 s budget where every other
    duration in a file must carry its unit, and ``"5s"`` reached the budget unparsed."""
    loaded = load_config({"policies": {"api": {}}, "budgets": {"api": {"blip": "500ms"}}})
    assert loaded.budget("api").statistics().blip == 0.5
    with pytest.raises(ConfigError, match=r"budgets\.api\.blip"):
        load_config({"policies": {"api": {}}, "budgets": {"api": {"blip": 5}}}).budget("api")


# Row C: pacers and hedges in a file.


@pytest.mark.parametrize(
    ("section", "option", "example"),
    [
        ("breakers", "speed", "failure_threshold: 5"),
        ("budgets", "speed", "ratio: 0.3"),
        ("throttles", "speed", "k: 2.0"),
        ("pacers", "speed", 'rate: "50/s"'),
        ("hedges", "name", "after: p95"),
    ],
)
def test_an_unknown_option_is_answered_with_an_example_of_its_own_section(
    section: str, option: str, example: str
) -> None:
    """Every section's unknown option was answered "expected e.g. failure_threshold: 5", a
    breaker option that is as unknown to a pacer or a hedge as the typo itself."""
    with pytest.raises(ConfigError) as caught:
        load_config({"policies": {"llm": {}}, section: {"llm": {option: 3}}})
    assert caught.value.field == f"{section}.llm.{option}"
    assert f"expected e.g. {example}" in str(caught.value)


def test_a_pacers_cost_in_a_file_says_to_pass_the_pacer_in_code() -> None:
    """``cost`` is a callable: the error names the path and how to do it instead (``pacer=``)."""
    with pytest.raises(ConfigError) as caught:
        load_config({"policies": {"llm": {}}, "pacers": {"llm": {"cost": "len"}}})
    assert caught.value.field == "pacers.llm.cost"
    assert "pacer=Pacer(" in str(caught.value)


@pytest.mark.parametrize(
    ("section", "option", "value", "example"),
    [
        ("pacers", "rate", 5, '"50/s"'),
        ("pacers", "tokens", 10000, '"10000/min"'),
        ("pacers", "rate", 2.5, '"50/s"'),
        ("hedges", "after", 5, '"p95" or "50ms"'),
        ("hedges", "after", 0.05, '"p95" or "50ms"'),
    ],
)
def test_a_bare_number_for_a_rate_or_a_hedge_delay_has_no_unit(
    section: str, option: str, value: float, example: str
) -> None:
    """``rate: 5`` and ``after: 5`` loaded (5/s, 5 s) where every other duration in a file
    must carry its unit (``after: 5`` meant 5 ms as often as 5 s); now a ConfigError."""
    with pytest.raises(ConfigError) as caught:
        load_config({"policies": {"llm": {}}, section: {"llm": {option: value}}})
    assert caught.value.field == f"{section}.llm.{option}"
    assert "a bare number has no unit" in str(caught.value)
    assert f"expected e.g. {example}" in str(caught.value)


@needs_yaml
def test_check_reports_pacer_and_hedge_errors_with_their_lines(tmp_path: Path) -> None:
    text = (
        "policies:\n"
        "  llm: {}\n"
        "pacers:\n"
        "  llm:\n"
        "    rate: 5\n"
        "hedges:\n"
        "  llm:\n"
        "    after: p150\n"
        "  lm: {}\n"
    )
    report = check_file(str(write(tmp_path, "retry.yaml", text)))
    found = sorted((f.line, f.message.split(": ")[0]) for f in report.errors)
    assert found == [(5, "pacers.llm.rate"), (8, "hedges.llm.after"), (9, "hedges.lm")]


@pytest.mark.parametrize(
    ("section", "option", "text"),
    [
        ("pacers", "rate", "5{pad}/s"),
        ("pacers", "tokens", "1/{pad}"),
        ("hedges", "after", "p9{pad}"),
        ("hedges", "after", "1{pad}ms"),
    ],
)
def test_refusing_a_huge_rate_or_hedge_delay_takes_linear_time(
    section: str, option: str, text: str
) -> None:
    """A rate or ``after`` of 10**5 characters is a short ConfigError, and ten times the text
    costs at most ~30 times the work (linear: ~10; quadratic: ~100)."""

    def refuse_text(n: int) -> None:
        value = text.format(pad="9" * n)
        with pytest.raises(ConfigError) as caught:
            load_config({"policies": {"p": {}}, section: {"p": {option: value}}})
        assert caught.value.field == f"{section}.p.{option}"
        assert len(str(caught.value)) < 1_000

    floor = 0.002  # below this, process_time is too coarse to divide by
    small = max(cpu_seconds(lambda: refuse_text(20_000)), floor)
    ratio = cpu_seconds(lambda: refuse_text(200_000)) / small
    assert ratio < 30, ratio
