"""Run the dashboards and rules against a real Prometheus: the harness of tests/test_dashboards.py.

Three parts:

* PromQL helpers that read the dashboard JSON and the rules file (expressions, variables,
  metric and label names) for the lint tests;
* `PrometheusServer`, a real ``prometheus`` binary on 127.0.0.1 with a throwaway storage
  directory, and `MetricsEndpoint`, a prometheus_client ``/metrics`` server on 127.0.0.1;
* `Workload`, which drives retrymw (`Retrier`, `CircuitBreaker`, `RetryBudget`,
  `PrometheusInstrument`, all on `FakeClock`s) through a healthy → brownout → outage →
  recovery storyline, so every panel has something to show; its `InboundTraffic` also sends
  requests, first attempts and retries, through the WSGI server companion
  (`RetryLayerWSGIMiddleware`), for the inbound retry share.

`live_stack` puts them together; ``dashboards/render_preview.py`` reuses it for the PNG preview.
Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import functools
import json
import math
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, start_http_server

from retrymw import CircuitBreaker, Pacer, PerTarget, Retrier, RetryBudget, RetryPolicy
from retrymw._core.events import Attached, BreakerStateChanged
from retrymw._core.instruments import Instrument
from retrymw._protect.pacer import RateLimits
from retrymw._protect.throttle import AdaptiveThrottle
from retrymw.fleet import RedisFleet
from retrymw.instrumentation import PrometheusInstrument
from retrymw.instrumentation import _names as names
from retrymw.server import ATTEMPT_HEADER, RetryLayerWSGIMiddleware
from retrymw.testing import FakeClock
from tests.calls import call_as
from tests.redis_server import redis_server

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "dashboards" / "retrymw-overview.json"
RULES = ROOT / "dashboards" / "retrymw.rules.yml"
RULE_TESTS = ROOT / "dashboards" / "retrymw.rules.test.yml"
DOCKER = ROOT / "docker"

JOB = "retrymw-harness"
#: Calls are counted by the call histogram's ``_count``: the last scrape is complete once it
#: holds every call the process made.
CALLS = names.count_of(names.CALL_DURATION)

# -- dashboard and PromQL helpers -----------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_METRIC = re.compile(r"(?<![\w:])retrymw_[a-z_]+(?![\w:])")
_MATCHER = re.compile(r'([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")')
_RANGE_FUNCTION = re.compile(r"\b(rate|irate|increase)\s*\(")
_LABEL_VALUES = re.compile(r"^label_values\(\s*(?:(?P<match>.+?)\s*,\s*)?(?P<label>\w+)\s*\)$")


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the dashboard: a panel target or an annotation."""

    where: str
    expr: str
    panel: dict[str, Any] = field(repr=False)


def load_dashboard() -> dict[str, Any]:
    """The overview dashboard, parsed."""
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def load_rules() -> dict[str, Any]:
    """The rules file, parsed."""
    return yaml.safe_load(RULES.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def panels(dashboard: dict[str, Any], *, rows: bool = False) -> list[dict[str, Any]]:
    """Every panel, those nested in collapsed rows included; row panels only if ``rows``."""
    found: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        if panel.get("type") != "row" or rows:
            found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def queries(dashboard: dict[str, Any]) -> list[Query]:
    """Every panel target's and annotation's expression."""
    found = [
        Query(
            f"panel {panel['id']} {panel['title']!r} target {target['refId']}",
            target["expr"],
            panel,
        )
        for panel in panels(dashboard)
        for target in panel.get("targets", [])
    ]
    found += [
        Query(f"annotation {annotation['name']!r}", annotation["expr"], annotation)
        for annotation in dashboard["annotations"]["list"]
        if "expr" in annotation
    ]
    return found


def variables(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """The templating variables."""
    return list(dashboard["templating"]["list"])


def variable_query(variable: dict[str, Any]) -> str:
    """A query variable's ``label_values(...)`` text (both the string and the structured form)."""
    query = variable["query"]
    return str(query["query"] if isinstance(query, dict) else query)


def parse_label_values(query: str) -> tuple[str | None, str]:
    """Split ``label_values(selector, label)`` into its selector (or None) and label."""
    found = _LABEL_VALUES.match(query.strip())
    if found is None:
        raise ValueError(f"not a label_values() query: {query!r}")
    return found["match"], found["label"]


def rule_exprs(rules: dict[str, Any]) -> dict[str, str]:
    """Every rule's expression, by recorded series or alert name."""
    return {
        rule.get("record") or rule["alert"]: rule["expr"]
        for group in rules["groups"]
        for rule in group["rules"]
    }


def substitute(expr: str, values: dict[str, str]) -> str:
    """Replace Grafana variables (``$name``, ``${name}``, ``[[name]]``) by ``values[name]``."""

    def replace(found: re.Match[str]) -> str:
        name = found["a"] or found["b"] or found["c"]
        return values[name]

    return re.sub(r"\$\{(?P<a>\w+)\}|\$(?P<b>\w+)|\[\[(?P<c>\w+)\]\]", replace, expr)


def _without_strings(expr: str) -> str:
    return _STRING.sub('""', expr)


def metric_names(expr: str) -> set[str]:
    """The ``retrymw_*`` series an expression selects (label names and strings excluded)."""
    bare = _GROUPING.sub("", _MATCHERS.sub("", _without_strings(expr)))
    return set(_METRIC.findall(bare))


def contract_name(series: str) -> str:
    """The contract metric a series belongs to (``x_bucket``/``_sum``/``_count`` → ``x``)."""
    specs = (*names.METRICS, *names.PACER_METRICS)
    histograms = {spec.prometheus for spec in specs if spec.kind == "histogram"}
    for suffix in ("_bucket", "_sum", "_count"):
        base = series.removesuffix(suffix)
        if base != series and base in histograms:
            return base
    return series


def label_names(expr: str) -> set[str]:
    """Label names used in matchers and in ``by``/``without``/``on`` clauses."""
    found = {match[0] for match in _MATCHER.findall(expr)}
    for clause in _GROUPING.findall(_without_strings(expr)):
        inner = clause[clause.index("(") + 1 : -1]
        found |= {label.strip() for label in inner.split(",") if label.strip()}
    return found


def label_matchers(expr: str) -> list[tuple[str, str, str]]:
    """Every ``label op "value"`` matcher, value unquoted."""
    return [(label, op, json.loads(value)) for label, op, value in _MATCHER.findall(expr)]


def ranges(expr: str) -> list[str]:
    """The contents of every ``[...]`` range selector."""
    return re.findall(r"\[([^\]]*)\]", _without_strings(expr))


def _blank_strings(expr: str) -> str:
    """``expr`` with every string literal's content blanked, offsets unchanged."""
    return _STRING.sub(lambda found: '"' + " " * (len(found[0]) - 2) + '"', expr)


def range_function_spans(expr: str) -> list[tuple[int, int]]:
    """(open, close) parenthesis offsets of each rate/irate/increase call's arguments."""
    text = _blank_strings(expr)
    spans: list[tuple[int, int]] = []
    for found in _RANGE_FUNCTION.finditer(text):
        depth, start = 0, found.end() - 1
        for index in range(start, len(text)):
            depth += {"(": 1, ")": -1}.get(text[index], 0)
            if depth == 0:
                spans.append((start, index))
                break
    return spans


def counters_outside_range_functions(expr: str) -> list[str]:
    """Cumulative series (``*_total`` counters, a histogram's ``_count``, ``_sum`` and
    ``_bucket``) selected outside any rate/irate/increase."""
    spans = range_function_spans(expr)
    bare = _MATCHERS.sub(lambda found: " " * len(found[0]), _blank_strings(expr))
    return [
        found[0]
        for found in _METRIC.finditer(bare)
        if found[0].endswith(("_total", "_count", "_sum", "_bucket"))
        and not any(a < found.start() < b for a, b in spans)
    ]


# -- a real Prometheus and a /metrics endpoint ----------------------------------------------------


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Loopback only: never let an http_proxy variable route these requests elsewhere.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url: str, timeout: float = 5.0) -> bytes:
    """GET a 127.0.0.1 URL."""
    if urllib.parse.urlsplit(url).hostname != "127.0.0.1":
        raise ValueError(f"the harness only talks to 127.0.0.1, not {url!r}")
    with _opener.open(url, timeout=timeout) as response:
        return response.read()  # type: ignore[no-any-return]


class MetricsEndpoint:
    """prometheus_client's ``/metrics`` server for a fresh registry, on 127.0.0.1:<free port>."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._server, self._thread = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self.port = int(self._server.server_port)

    @property
    def address(self) -> str:
        """``host:port`` for a scrape config."""
        return f"127.0.0.1:{self.port}"

    def sample_sum(self, metric: str) -> float:
        """The sum of a metric's samples as the registry holds them now."""
        return sum(
            sample.value
            for family in self.registry.collect()
            for sample in family.samples
            if sample.name == metric
        )

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class PrometheusError(RuntimeError):
    """Prometheus did not start, or an API call failed."""


class PrometheusServer:
    """A real ``prometheus`` on 127.0.0.1 scraping ``target`` (job `JOB`), or each address of
    a job → address mapping, with ``rule_files``.

    It scrapes and evaluates the rules every ``interval``.
    """

    def __init__(
        self,
        binary: str,
        workdir: Path,
        target: str | dict[str, str],
        rule_files: list[Path],
        *,
        interval: str = "1s",
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "evaluation_interval": interval,
            },
            "rule_files": [str(path) for path in rule_files],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": [address]}]}
                for job, address in (
                    target.items() if isinstance(target, dict) else [(JOB, target)]
                )
            ],
        }
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config), encoding="utf-8")
        self.log = workdir / "prometheus.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait (at most ``timeout`` seconds) until it is ready."""
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--enable-feature=exemplar-storage",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise PrometheusError(f"prometheus exited early:\n{self.log_tail()}")
            try:
                http_get(f"{self.url}/-/ready", timeout=1.0)
                return
            except OSError:
                time.sleep(0.1)
        raise PrometheusError(f"prometheus not ready after {timeout:g}s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Terminate the server (kill it if it does not stop within 10 s)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def log_tail(self, lines: int = 30) -> str:
        """The end of the server's log."""
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def api(self, path: str, **params: Any) -> Any:
        """GET ``/api/v1/<path>`` and return its ``data``; raise `PrometheusError` on an error."""
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            body = json.loads(http_get(f"{self.url}/api/v1/{path}?{query}", timeout=10.0))
        except urllib.error.HTTPError as error:
            body = json.loads(error.read() or b"{}")
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('error', body)}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """Evaluate an instant query now (or at Unix time ``at``); the vector's samples (a scalar
        becomes one sample)."""
        data = self.api("query", query=expr, **({} if at is None else {"time": at}))
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]  # type: ignore[no-any-return]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """Evaluate a range query; the matrix's series."""
        data = self.api("query_range", query=expr, start=start, end=end, step=step)
        return data["result"]  # type: ignore[no-any-return]

    def value(self, expr: str, at: float | None = None) -> float:
        """The value of an expression that yields exactly one sample (now, or at ``at``)."""
        result = self.query(expr, at)
        if len(result) != 1:
            raise PrometheusError(f"{expr!r} gave {len(result)} samples, expected one")
        return float(result[0]["value"][1])

    def wait_until(self, predicate: Callable[[], bool], what: str, timeout: float) -> None:
        """Poll ``predicate`` every 0.25 s until it holds; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise PrometheusError(f"timed out after {timeout:g}s waiting for {what}")
            time.sleep(0.25)


# -- the workload ---------------------------------------------------------------------------------


class ServiceUnavailable(Exception):
    """The simulated upstream answered 503."""


class BadRequest(Exception):
    """The simulated upstream rejected the request: not retryable."""


@dataclass(frozen=True)
class Phase:
    """A stretch of the storyline, in scenario seconds."""

    name: str
    start: float
    end: float
    payments_failure: float
    inventory_down: bool


#: The storyline: 60 scenario seconds. The test plays it 5x faster than the preview.
STORY = (
    Phase("healthy", 0.0, 15.0, payments_failure=0.03, inventory_down=False),
    Phase("brownout", 15.0, 30.0, payments_failure=0.15, inventory_down=False),
    Phase("outage", 30.0, 45.0, payments_failure=0.97, inventory_down=True),
    Phase("recovery", 45.0, 60.0, payments_failure=0.03, inventory_down=False),
)
STORY_SECONDS = STORY[-1].end


class Overloaded(Exception):
    """The simulated upstream answered 429 Too Many Requests: an explicit overload refusal
    (its status is evidence of load for `AdaptiveThrottle`)."""

    status_code = 429


RETRYABLE = (ConnectionError, TimeoutError, ServiceUnavailable, Overloaded)
#: The payments upstream's requests limit per second, as its rate-limit headers say: far above
#: what its calls offer (about 40 ms each, one after another), so its pacer never holds one back
#: and the storyline's draws stay what the other panels were tuned on; the incidents' baseline
#: (`INCIDENTS`, drawn in the preview) is the one paced at its limit.
PAYMENTS_LIMIT = 1000.0


class InboundTraffic:
    """Callers of services behind the WSGI server companion, retrying 503s at their own layer.

    Each logical request is sent through `RetryLayerWSGIMiddleware` (in process, no socket) with
    the attempt header, 1 first, then 2 and 3 while the service answers 503, as a retrymw
    transport with ``attempt_header=`` would send them; one in ten callers sends no header. The
    service fails with the probability `serve` is given. `counts` is the harness's own tally
    per service and attempt kind, to compare the metric with.

    Args:
        registry: the registry the middleware counts in.
        services: the services' names (one middleware each).
        seed: seeds the failures and the callers without a header (a `Random` of its own, so
            the workloads' other random sequences stay what they were).
    """

    ROUTE = "/orders/{order_id}"
    ATTEMPTS = 3

    def __init__(self, registry: CollectorRegistry, services: tuple[str, ...], seed: int) -> None:
        self.rng = Random(seed)
        self.apps = {
            service: RetryLayerWSGIMiddleware(
                self._app, service=service, registry=registry, route=self._route
            )
            for service in services
        }
        self.counts: dict[tuple[str, names.InboundAttempt], int] = {}
        self._key = "HTTP_" + ATTEMPT_HEADER.upper().replace("-", "_")

    @staticmethod
    def _app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        failing = environ["harness.failing"]
        start_response("503 Service Unavailable" if failing else "200 OK", [])
        return [b""]

    @classmethod
    def _route(cls, environ: dict[str, Any]) -> str:
        return cls.ROUTE

    def _send(self, service: str, attempt: int | None, failing: bool) -> str:
        environ: dict[str, Any] = {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": "/orders/42",
            "harness.failing": failing,
        }
        if attempt is not None:
            environ[self._key] = str(attempt)
        statuses: list[str] = []
        body = self.apps[service](environ, lambda status, headers, *_: statuses.append(status))
        list(body)  # served in full, as a WSGI server would
        kind: names.InboundAttempt = (
            "unknown" if attempt is None else "first" if attempt == 1 else "retry"
        )
        self.counts[service, kind] = self.counts.get((service, kind), 0) + 1
        return statuses[0]

    def serve(self, service: str, failure: float, requests: int) -> None:
        """``requests`` logical requests to ``service``, which answers 503 with ``failure``."""
        rng = self.rng
        for _ in range(requests):
            marked = rng.random() >= 0.1
            for attempt in range(1, self.ATTEMPTS + 1):
                status = self._send(service, attempt if marked else None, rng.random() < failure)
                if not status.startswith("503"):
                    break

    def retry_share(self, service: str) -> float:
        """Retries / (first attempts + retries) the callers of ``service`` sent."""
        retries = self.counts.get((service, "retry"), 0)
        return retries / (retries + self.counts.get((service, "first"), 0))


class Workload:
    """Drives retrymw through success, retry, exhaustion, budget, throttle and breaker scenarios.

    Every `step` makes one round of calls: ``checkout`` → payments (flaky, cross-call budget:
    retries, exhaustion, throttling, a few non-retryable failures), ``checkout`` → inventory
    (behind a circuit breaker), ``search`` (no budget: exhaustion, deadline) and ``reports`` (a
    per-call ``retry_budget``), while the ``checkout`` service receives requests from callers
    that retry its 503s (`InboundTraffic`; it fails as payments does). Time is virtual: each
    `FakeClock` advances by the simulated latencies and backoffs, and by ``scenario_step`` per
    step, so nothing really sleeps.
    """

    def __init__(
        self, registry: CollectorRegistry, *, seed: int = 6, fleet: RedisFleet | None = None
    ) -> None:
        self.rng = Random(seed)
        self.scenario_time = 0.0
        self.fleet = fleet
        instruments = (PrometheusInstrument(registry=registry),)
        self.clocks = {name: FakeClock() for name in ("payments", "inventory", "search", "reports")}
        retry_on = list(RETRYABLE)
        self.payments = Retrier(
            RetryPolicy(
                name="checkout",
                attempts=3,
                initial_delay="100ms",
                max_delay="2s",
                jitter="full",
                retry_on=retry_on,
            ),
            budget=RetryBudget(clock=self.clocks["payments"]),
            throttle=AdaptiveThrottle(
                name="payments", clock=self.clocks["payments"], rng=Random(seed + 2)
            ),
            # One pacer per host, learning the limit (`step` tells it the upstream's headers),
            # so the Pacing row has a wait, a limit and a rate for payments.internal.
            pacer=PerTarget(Pacer(name="payments", clock=self.clocks["payments"])),
            instruments=instruments,
            clock=self.clocks["payments"],
            rng=Random(seed + 1),
        )
        self.inventory = Retrier(
            RetryPolicy(
                name="checkout",
                attempts=3,
                backoff="fixed",
                initial_delay="50ms",
                retry_on=retry_on,
            ),
            breaker=CircuitBreaker(
                name="checkout",
                failure_threshold=5,
                failure_rate_threshold=0.9,
                recovery_timeout="4s",
                clock=self.clocks["inventory"],
            ),
            budget=None,
            instruments=instruments,
            clock=self.clocks["inventory"],
        )
        self.search = Retrier(
            RetryPolicy(
                name="search", attempts=4, initial_delay="200ms", deadline="2s", retry_on=retry_on
            ),
            budget=None,
            # A throttle, so the rejection-probability panel has a series to draw.
            throttle=AdaptiveThrottle(name="search", clock=self.clocks["search"], rng=Random(seed)),
            instruments=instruments,
            clock=self.clocks["search"],
        )
        self.reports = Retrier(
            RetryPolicy(
                name="reports",
                attempts=10,
                initial_delay="1s",
                retry_budget="3s",
                retry_on=retry_on,
            ),
            budget=None,
            instruments=instruments,
            clock=self.clocks["reports"],
        )
        # Announce every policy and protection, as a Retrier does (Instrument.attached): each
        # series exists from creation, the first trip included. Announcing twice is harmless.
        for retrier in (self.payments, self.inventory, self.search, self.reports):
            announce(instruments[0], retrier)
        # An idle budget of its own makes the fleet report (members, sync age, leases): the
        # storyline's budgets stay per process, so its figures are one process's.
        self.fleet_budget = RetryBudget()
        if fleet is not None:
            fleet.attach(self.fleet_budget, target="storyline")
        self.inbound = InboundTraffic(registry, ("checkout",), seed + 100)
        self.calls = 0
        self.tracer: Any = None
        try:
            from opentelemetry.sdk.trace import TracerProvider
        except ImportError:  # pragma: no cover - the SDK is in the tests group
            pass
        else:
            # A private provider, never the global one: sampled spans make the instrument attach
            # trace-id exemplars, which is what the latency panels' exemplar toggle shows.
            self.tracer = TracerProvider().get_tracer("retrymw.tests.harness")

    @property
    def phase(self) -> Phase:
        """The storyline's phase at the current scenario time."""
        for phase in STORY:
            if self.scenario_time < phase.end:
                return phase
        return STORY[-1]

    def _upstream(
        self, clock: FakeClock, failure: float, *, slow: float = 0.0
    ) -> Callable[[], str]:
        rng = self.rng

        def attempt() -> str:
            latency = rng.lognormvariate(-3.2, 0.5) + slow  # median 40 ms
            if rng.random() >= failure:
                clock.advance(latency)
                return "ok"
            kind = rng.random()
            if kind < 0.15:
                clock.advance(1.0)
                raise TimeoutError("upstream timed out after 1s")
            clock.advance(latency / 4)
            if kind < 0.3:
                raise ConnectionResetError("connection reset by peer")
            if kind < 0.33:
                raise BadRequest("400 Bad Request")
            raise ServiceUnavailable("503 Service Unavailable")

        return attempt

    def _call(self, retrier: Retrier, upstream: Callable[[], str], target: str) -> None:
        self.calls += 1
        # Failures are the point: the metrics record them.
        with suppress(Exception):
            call_as(retrier, upstream, operation="GET", target=target)

    def step(self, scenario_step: float) -> None:
        """One round of calls, then advance every clock by ``scenario_step`` virtual seconds."""
        phase = self.phase
        clocks = self.clocks
        payments = self._upstream(clocks["payments"], phase.payments_failure)
        inventory = self._upstream(clocks["inventory"], 1.0 if phase.inventory_down else 0.02)
        search = self._upstream(clocks["search"], 0.45, slow=0.3)
        reports = self._upstream(clocks["reports"], 0.6)
        span = self.tracer.start_as_current_span if self.tracer is not None else None
        for _ in range(20):
            if span is not None:
                with span("checkout"):
                    self._call(self.payments, payments, "payments.internal")
            else:  # pragma: no cover
                self._call(self.payments, payments, "payments.internal")
        self._teach_payments_limit()
        for _ in range(10):
            self._call(self.inventory, inventory, "inventory.internal")
        for _ in range(4):
            self._call(self.search, search, "search.internal")
        self._call(self.reports, reports, "reports.internal")
        self.inbound.serve("checkout", phase.payments_failure, 5)
        for clock in clocks.values():
            clock.advance(scenario_step)
        self.scenario_time += scenario_step
        if self.fleet is not None:
            # A retry's worth of demand per step: the lease panel draws the fleet's spending.
            self.fleet_budget.record_success()
            self.fleet_budget.try_acquire()
            self.fleet.sync()

    def _teach_payments_limit(self) -> None:
        """Tell the payments pacer the upstream's rate-limit headers, as the HTTP transports
        read ``x-ratelimit-limit-requests`` on every answer: `PAYMENTS_LIMIT` requests/s."""
        pacers = self.payments.pacer
        assert isinstance(pacers, PerTarget)
        pacer = pacers.get("payments.internal")
        if pacer is not None:
            pacer.learn(self.clocks["payments"].now(), limits=RateLimits(requests=PAYMENTS_LIMIT))

    def run(self, seconds: float, *, period: float = 0.2) -> tuple[float, float]:
        """Play the whole storyline over ``seconds`` of real time; return its (start, end)."""
        steps = max(1, round(seconds / period))
        scenario_step = STORY_SECONDS / steps
        started = time.time()
        for index in range(steps):
            self.step(scenario_step)
            # Pace against the start, so slow steps do not stretch the storyline.
            time.sleep(max(0.0, started + (index + 1) * period - time.time()))
        return started, time.time()


def announce(instrument: Instrument, retrier: Retrier) -> None:
    """Announce a Retrier's policy and shared protections to ``instrument`` (`Attached`)."""
    name = retrier.policy.name
    for subject in (retrier.policy, retrier.breaker, retrier.budget, retrier.throttle):
        if subject is not None:
            instrument.attached(Attached(name, "", subject))


# -- incidents on virtual time ---------------------------------------------------------------------
#
# Alerts judge minutes (5m windows, `for: 10m`); a test has seconds. The incident run plays on
# virtual time as fast as it can and scrapes its own registries every 15 virtual seconds
# (`Recording`); a real Prometheus loads what it would have stored (``promtool tsdb
# create-blocks-from openmetrics``) as history, and the rules are evaluated on it every 15 s as
# its rule manager would (`IncidentStack.alert_spans`). Windows, rates and `for:` keep their
# real meaning, and no step waits for the wall clock, so a loaded machine changes nothing.

_DURATION = re.compile(r"(\d+)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass(frozen=True)
class Incident:
    """One dependency's trouble, in virtual seconds.

    Attributes:
        name: the policy's name (and the circuit's, or its prefix with one breaker per host).
        description: what happens, for test ids and messages.
        failure: the failure probability of an attempt to host ``host`` at time ``t``.
        windows: the (start, end) virtual seconds the incident lasts; none for a healthy run.
        hosts: how many hosts the policy calls (each its own target, breaker, budget and
            throttle when more than one, as a transport has).
        overload: failed attempts are 429 overload refusals rather than 503s.
        troubled: the hosts the incident touches (the others stay healthy).
        limit: the requests limit per second the dependency's rate-limit headers announce:
            the policy has a pacer that learns it (`IncidentWorkload.step` tells it, as the
            HTTP transports read ``x-ratelimit-limit-requests``); ``None``: no pacer.
    """

    name: str
    description: str
    failure: Callable[[float, int], float]
    windows: tuple[tuple[float, float], ...] = ()
    hosts: int = 1
    overload: bool = False
    troubled: tuple[int, ...] = (0,)
    limit: float | None = None

    def target_of(self, host: int) -> str:
        """The target label of host ``host``."""
        return f"{self.name}.internal" if self.hosts == 1 else f"h{host}.{self.name}.internal"

    @property
    def target(self) -> str:
        """The target of the host in trouble."""
        return self.target_of(self.troubled[0])

    @property
    def targets(self) -> tuple[str, ...]:
        """Every target of the policy."""
        return tuple(self.target_of(host) for host in range(self.hosts))

    def circuit_of(self, host: int) -> str:
        """The circuit label of host ``host``: ``name``, or ``name:<target>`` per host."""
        return self.name if self.hosts == 1 else f"{self.name}:{self.target_of(host)}"

    @property
    def circuit(self) -> str:
        """The circuit of the host in trouble."""
        return self.circuit_of(self.troubled[0])

    def owners(self, host: int) -> set[str]:
        """The labels an alert about host ``host`` carries: its target and its circuit."""
        return {self.target_of(host), self.circuit_of(host)}


def _during(windows: tuple[tuple[float, float], ...], then: float, otherwise: float) -> Any:
    """A failure function: ``then`` inside ``windows``, ``otherwise`` outside."""

    def failure(t: float, host: int) -> float:
        return then if any(start <= t < end for start, end in windows) else otherwise

    return failure


#: Virtual length of the incident run: 18 minutes.
INCIDENT_SECONDS = 18 * 60.0
#: The baseline failure rate of a healthy dependency.
HEALTHY = 0.01
_BRIEF = ((180.0, 185.0), (480.0, 485.0), (780.0, 785.0))
_OUTAGE = ((120.0, 300.0),)
_BROWNOUT = ((120.0, INCIDENT_SECONDS),)
_DEAD_HOST = ((120.0, 720.0),)
_OVERLOAD = ((120.0, 600.0),)
#: The six incident shapes of issue 31, each its own policy, played at once.
INCIDENTS = (
    Incident(
        "baseline",
        "a healthy baseline: 1% of the attempts fail, paced at the dependency's 10/s limit",
        _during((), 0, HEALTHY),
        limit=10.0,
    ),
    Incident(
        "brief",
        "brief outages: down 5 s at 3, 8 and 13 minutes",
        _during(_BRIEF, 1.0, HEALTHY),
        _BRIEF,
    ),
    Incident(
        "outage",
        "a 3-minute total outage: down from 2 to 5 minutes",
        _during(_OUTAGE, 1.0, HEALTHY),
        _OUTAGE,
    ),
    Incident(
        "brownout",
        "a 10% brownout: from 2 minutes on, 10% of the attempts fail",
        _during(_BROWNOUT, 0.10, HEALTHY),
        _BROWNOUT,
    ),
    Incident(
        "deadhost",
        "one dead host of five: h0 down from 2 to 12 minutes, the others healthy",
        lambda t, host: _during(_DEAD_HOST, 1.0, HEALTHY)(t, host) if host == 0 else HEALTHY,
        _DEAD_HOST,
        hosts=5,
    ),
    Incident(
        "overload",
        "a 429 overload: 60% of the attempts refused with 429 from 2 to 10 minutes",
        _during(_OVERLOAD, 0.6, HEALTHY),
        _OVERLOAD,
        overload=True,
    ),
)


class Tally:
    """The truth, counted outside retrymw by the attempt functions: per target, the calls, the
    calls that made at least one attempt (admitted), and the attempts; and circuit trips (from
    the breakers' own listeners)."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.admitted_calls: dict[str, int] = {}
        self.attempts: dict[str, int] = {}
        self.trips: dict[str, int] = {}

    def call(self, target: str, attempts: int) -> None:
        """One call of ``target`` that made ``attempts`` attempts."""
        self.calls[target] = self.calls.get(target, 0) + 1
        self.attempts[target] = self.attempts.get(target, 0) + attempts
        if attempts:
            self.admitted_calls[target] = self.admitted_calls.get(target, 0) + 1

    def tripped(self, event: BreakerStateChanged) -> None:
        """A breaker listener: count closed → open trips."""
        if (event.previous_state, event.state) == ("closed", "open"):
            self.trips[event.circuit] = self.trips.get(event.circuit, 0) + 1

    def admitted(self, target: str) -> int:
        """Calls of ``target`` that made at least one attempt."""
        return self.admitted_calls.get(target, 0)

    def refused(self, target: str) -> int:
        """Calls of ``target`` refused before any attempt."""
        return self.calls.get(target, 0) - self.admitted(target)

    def amplification(self, target: str) -> float:
        """Attempts per admitted call of ``target``."""
        return self.attempts.get(target, 0) / self.admitted(target)


class IncidentWorkload:
    """The six incident shapes at once, each its own policy with a breaker, a budget and a
    throttle (per host for the dead host of five), through one metric path (`instruments`).

    Every virtual second each policy makes ``rate`` calls (spread over its hosts), and, on the
    Prometheus path, a service of the same name receives one request (`InboundTraffic`, failing
    as the dependency does). `play` runs it on virtual time; `Tally` keeps the truth, counted
    outside retrymw, to compare the dashboards with.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None,
        *,
        instruments: tuple[Instrument, ...] | None = None,
        seed: int = 17,
        rate: int = 4,
        fleet: RedisFleet | None = None,
    ) -> None:
        self.rng = Random(seed)
        self.rate = rate
        self.fleet = fleet
        # An idle budget of its own makes the fleet report (members, sync age): the incidents'
        # budgets stay per process, so the alerts judge what one process did.
        self.fleet_budget = RetryBudget()
        if fleet is not None:
            fleet.attach(self.fleet_budget, target="incidents")
        self.tally = Tally()
        if instruments is None:
            assert registry is not None
            instruments = (PrometheusInstrument(registry=registry),)
        self.clocks = {incident.name: FakeClock() for incident in INCIDENTS}
        self.retriers: dict[str, Retrier] = {}
        for index, incident in enumerate(INCIDENTS):
            clock = self.clocks[incident.name]
            breaker = CircuitBreaker(
                name=incident.name,
                # 8 failures in a row: an outage trips it in a second, a 10% brownout
                # (0.1**8 per attempt) never. The rate rule gives the panels a threshold.
                failure_threshold=8,
                failure_rate_threshold=0.6,
                window=50,
                minimum_calls=20,
                recovery_timeout="10s",
                clock=clock,
            )
            breaker.add_listener(self.tally.tripped)
            budget = RetryBudget(ratio=0.5, min_capacity=100, clock=clock)
            throttle = AdaptiveThrottle(name=incident.name, clock=clock, rng=Random(seed + index))
            per_host = incident.hosts > 1
            pacer = None if incident.limit is None else Pacer(name=incident.name, clock=clock)
            self.retriers[incident.name] = retrier = Retrier(
                RetryPolicy(
                    name=incident.name,
                    attempts=3,
                    initial_delay="200ms",
                    max_delay="2s",
                    jitter="full",
                    retry_on=list(RETRYABLE),
                ),
                breaker=PerTarget(breaker) if per_host else breaker,
                budget=PerTarget(budget) if per_host else budget,
                throttle=PerTarget(throttle) if per_host else throttle,
                # Per target, as a transport's pacers are: their gauges carry the host.
                pacer=None if pacer is None else PerTarget(pacer),
                instruments=(*instruments,),
                clock=clock,
                rng=Random(seed + 10 + index),
            )
            for instrument in instruments:
                announce(instrument, retrier)
        self.inbound = (
            None
            if registry is None
            else InboundTraffic(
                registry, tuple(incident.name for incident in INCIDENTS), seed + 100
            )
        )
        self.time = 0.0

    def _call(self, incident: Incident, host: int) -> None:
        clock, rng = self.clocks[incident.name], self.rng
        failure = incident.failure
        made = 0

        def attempt() -> str:
            nonlocal made
            made += 1
            failing = rng.random() < failure(clock.now(), host)
            clock.advance(rng.lognormvariate(-3.9, 0.4) / (4 if failing else 1))  # ~20 ms
            if failing:
                if incident.overload:
                    raise Overloaded("429 Too Many Requests")
                raise ServiceUnavailable("503 Service Unavailable")
            return "ok"

        with suppress(Exception):  # failures are the point: the metrics record them
            call_as(
                self.retriers[incident.name],
                attempt,
                operation="GET",
                target=incident.target_of(host),
            )
        self.tally.call(incident.target_of(host), made)

    def step(self) -> None:
        """One virtual second: ``rate`` calls per policy, then every clock catches up."""
        self.time += 1.0
        for incident in INCIDENTS:
            for index in range(self.rate * max(1, incident.hosts // 2)):
                self._call(incident, index % incident.hosts)
            if incident.limit is not None:
                self._teach_limit(incident)
            if self.inbound is not None:
                self.inbound.serve(incident.name, incident.failure(self.time, 0), 1)
        for clock in self.clocks.values():
            clock.advance(max(0.0, self.time - clock.now()))
        if self.fleet is not None:
            # A retry's worth of demand per step: the lease panel draws the fleet's spending.
            self.fleet_budget.record_success()
            self.fleet_budget.try_acquire()
            self.fleet.sync()

    def _teach_limit(self, incident: Incident) -> None:
        """Tell the incident's pacers its dependency's limit, as its answers' headers would."""
        assert incident.limit is not None
        pacers = self.retriers[incident.name].pacer
        now = self.clocks[incident.name].now()
        assert isinstance(pacers, PerTarget)
        for target in incident.targets:
            pacer = pacers.get(target)
            if pacer is not None:
                pacer.learn(now, limits=RateLimits(requests=incident.limit))


# -- everything together --------------------------------------------------------------------------


@dataclass
class LiveStack:
    """A Prometheus that has scraped a full `Workload` storyline.

    ``start`` and ``end`` bound the storyline and ``complete`` is when Prometheus was known to
    hold all of it (Unix times): a query that must see the whole run, and only it, is evaluated
    at ``complete``, whenever the test asking runs.
    """

    prometheus: PrometheusServer
    endpoint: MetricsEndpoint
    workload: Workload
    start: float
    end: float
    complete: float


@contextmanager
def live_stack(binary: str, workdir: Path, *, seconds: float = 12.0) -> Iterator[LiveStack]:
    """Start the endpoint and Prometheus, play the storyline, wait for the last scrape."""
    with ExitStack() as stack:
        endpoint = MetricsEndpoint()
        stack.callback(endpoint.close)
        prometheus = PrometheusServer(binary, workdir, endpoint.address, [RULES])
        stack.callback(prometheus.stop)
        prometheus.start()
        # Service discovery hands over the target after about 5 s: start playing once scraped.
        prometheus.wait_until(
            functools.partial(_up, prometheus), "the first scrape of the endpoint", timeout=30.0
        )
        workload = Workload(endpoint.registry, fleet=_fleet(stack, workdir))
        start, end = workload.run(seconds)
        # The workload has stopped: once a scrape has seen every call and every inbound
        # request, Prometheus is complete.
        for metric in (CALLS, names.INBOUND_REQUESTS.prometheus):
            total = endpoint.sample_sum(metric)
            prometheus.wait_until(
                functools.partial(_scraped, prometheus, total, metric),
                f"a scrape with all {total:g} {metric}",
                timeout=20.0,
            )
        yield LiveStack(prometheus, endpoint, workload, start, end, complete=time.time())


def _fleet(stack: ExitStack, workdir: Path) -> RedisFleet:
    """A fleet on a real redis-server of its own, synced by the workload's steps."""
    directory = workdir / "redis"
    directory.mkdir(exist_ok=True)
    server = stack.enter_context(redis_server(directory))
    fleet = RedisFleet(server.url, namespace="harness", sync_interval="250ms", start=False)
    stack.callback(fleet.close)
    return fleet


def _scraped(
    prometheus: PrometheusServer, total: float, metric: str = CALLS, job: str = JOB
) -> bool:
    result = prometheus.query(f'sum({metric}{{job="{job}"}})')
    return bool(result) and float(result[0]["value"][1]) >= total


def _up(prometheus: PrometheusServer, job: str = JOB) -> bool:
    return bool(prometheus.query(f'up{{job="{job}"}} == 1'))


#: The scrape job of the OpenTelemetry path's endpoint in the incident run.
OTEL_JOB = "retrymw-otel"
#: The incident run's scrape and rule evaluation interval, in virtual seconds.
INCIDENT_INTERVAL = 15.0


@dataclass
class MetricPath:
    """One export path of the incident run: the registry it exports to, its job and workload."""

    name: str
    job: str
    registry: CollectorRegistry
    workload: IncidentWorkload
    instance: str


def _otel_path(stack: ExitStack) -> tuple[CollectorRegistry, tuple[Instrument, ...]]:
    """A registry fed by `OpenTelemetryInstrument` through OpenTelemetry's own Prometheus
    exporter (`PrometheusMetricReader`, collected when scraped), as an application exporting
    OTel metrics has."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider

    from retrymw.instrumentation import OpenTelemetryInstrument

    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(metric_readers=[reader])
    stack.callback(provider.shutdown)
    return registry, (OpenTelemetryInstrument(meter_provider=provider),)


class Recording:
    """What a Prometheus scraping the paths every `INCIDENT_INTERVAL` virtual seconds would have
    stored, written as OpenMetrics with timestamps for ``promtool tsdb create-blocks-from``.

    The incident run plays on virtual time as fast as it can (nothing waits for the wall
    clock, so a loaded machine changes nothing), scrapes itself on that clock, and Prometheus
    loads the result as history: ``base`` is the Unix time of virtual second 0.
    """

    def __init__(self, base: float) -> None:
        self.base = base
        # family name → (type, lines), lines in scrape order (each series' samples ascending).
        self.families: dict[str, tuple[str, list[str]]] = {}

    def scrape(self, path: MetricPath, at: float) -> None:
        """Record ``path``'s retrymw samples and its ``up`` at virtual second ``at``."""
        stamp = f"{self.base + at:.3f}"
        scraped = {"job": path.job, "instance": path.instance}
        for family in path.registry.collect():
            if not family.name.startswith("retrymw_"):
                continue
            _, lines = self.families.setdefault(family.name, (family.type, []))
            for sample in family.samples:
                labels = {**sample.labels, **scraped}
                lines.append(f"{sample.name}{_labels(labels)} {_number(sample.value)} {stamp}")
        _, up = self.families.setdefault("up", ("gauge", []))
        up.append(f"up{_labels(scraped)} 1 {stamp}")

    def write(self, path: Path) -> None:
        """The OpenMetrics text: each family's samples together, then ``# EOF``."""
        with path.open("w", encoding="utf-8") as out:
            for name, (kind, lines) in self.families.items():
                out.write(f"# TYPE {name} {kind}\n")
                out.writelines(line + "\n" for line in lines)
            out.write("# EOF\n")


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items()) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def play(paths: list[MetricPath], recording: Recording, seconds: float = INCIDENT_SECONDS) -> None:
    """Play ``seconds`` virtual seconds of every path's workload side by side, scraping each
    every `INCIDENT_INTERVAL` (from second 0, before the first call: every announced series is
    seen at its start value) and once more at the end."""
    every = round(INCIDENT_INTERVAL)
    for second in range(round(seconds) + 1):
        if second % every == 0:
            for path in paths:
                recording.scrape(path, float(second))
        if second < seconds:
            for path in paths:
                path.workload.step()


def _inline(expr: str, records: dict[str, str]) -> str:
    """``expr`` with every recorded series replaced by its rule's expression, in parentheses."""
    pattern = re.compile(r"(?<![\w:])(" + "|".join(map(re.escape, records)) + r")(?![\w:])")
    for _ in range(3):  # records of records
        expr = pattern.sub(lambda found: f"({records[found[1]]})", expr)
    return expr


def _seconds(duration: str) -> float:
    return float(sum(int(n) * _UNITS[unit] for n, unit in _DURATION.findall(duration)))


@dataclass
class IncidentStack:
    """A Prometheus holding a whole `IncidentWorkload` run through both export paths, scraped on
    the run's virtual clock; ``endpoint``'s registry and ``workload`` are the prometheus_client
    path's. ``start`` and ``end`` are the Unix times of the run's first and last virtual second."""

    prometheus: PrometheusServer
    workload: IncidentWorkload
    start: float
    end: float
    paths: dict[str, MetricPath] = field(default_factory=dict)
    rules: dict[str, Any] = field(default_factory=dict)

    def fired(self, job: str = JOB) -> set[tuple[str, str]]:
        """(alert name, target or circuit) of every alert of ``job`` that fired at any time."""
        return set(self.alert_spans(job))

    def alert_spans(self, job: str = JOB) -> dict[tuple[str, str], list[tuple[float, float]]]:
        """When each alert of ``job`` was firing, as Prometheus's rule manager evaluating every
        `INCIDENT_INTERVAL` would have had it: (alert name, target or circuit) → (from, to)
        spans in the run's virtual seconds. An alert is pending from the first evaluation its
        expression holds, firing once it held for its ``for:``, resolved at the first that it
        does not."""
        records = {
            rule["record"]: rule["expr"]
            for group in self.rules["groups"]
            for rule in group["rules"]
            if "record" in rule
        }
        spans: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for group in self.rules["groups"]:
            for rule in group["rules"]:
                if "alert" not in rule:
                    continue
                expr = _inline(rule["expr"], records)
                hold = _seconds(rule.get("for", "0s"))
                result = self.prometheus.query_range(expr, self.start, self.end, INCIDENT_INTERVAL)
                for series in result:
                    labels = series["metric"]
                    if labels.get("job") != job:
                        continue
                    owner = labels.get(names.LABEL_TARGET) or labels[names.LABEL_CIRCUIT]
                    times = [float(t) - self.start for t, _ in series["values"]]
                    for began, ended in _runs(times):
                        if ended - began >= hold:
                            spans.setdefault((rule["alert"], owner), []).append(
                                (began + hold, ended)
                            )
        return spans


def _runs(times: list[float]) -> list[tuple[float, float]]:
    """Consecutive evaluation times (one `INCIDENT_INTERVAL` apart) as (first, last) runs."""
    runs: list[tuple[float, float]] = []
    for at in times:
        if runs and at - runs[-1][1] <= INCIDENT_INTERVAL * 1.5:
            runs[-1] = (runs[-1][0], at)
        else:
            runs.append((at, at))
    return runs


@contextmanager
def incident_stack(
    binary: str, workdir: Path, *, rules: Path = RULES, fleet: bool = True
) -> Iterator[IncidentStack]:
    """Play the incidents on virtual time through both paths, load what a Prometheus scraping
    them would have stored into a real one, and evaluate ``rules`` on it (`alert_spans`)."""
    with ExitStack() as stack:
        registry = CollectorRegistry()
        otel_registry, otel_instruments = _otel_path(stack)
        workload = IncidentWorkload(registry, fleet=_fleet(stack, workdir) if fleet else None)
        otel = IncidentWorkload(None, instruments=otel_instruments)
        paths = {
            JOB: MetricPath("prometheus", JOB, registry, workload, "app-prometheus:9464"),
            OTEL_JOB: MetricPath("otel", OTEL_JOB, otel_registry, otel, "app-otel:9464"),
        }
        # Three hours ago, on a scrape boundary: history Prometheus loads, within retention.
        base = (int(time.time()) // 3600 - 3) * 3600.0
        recording = Recording(base)
        play(list(paths.values()), recording)
        source = workdir / "incidents.om.txt"
        recording.write(source)
        data = workdir / "data"
        subprocess.run(
            [
                shutil.which("promtool") or "promtool",
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                str(source),
                str(data),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        prometheus = PrometheusServer(binary, workdir, {}, [])
        stack.callback(prometheus.stop)
        prometheus.start()
        loaded = yaml.safe_load(rules.read_text(encoding="utf-8"))
        yield IncidentStack(prometheus, workload, base, base + INCIDENT_SECONDS, paths, loaded)
