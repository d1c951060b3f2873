"""Shared fixtures for the spanhouse end-to-end tests.

Every test talks to a real `spanhouse serve` process started on a fresh data
directory under pytest's tmp_path, on free 127.0.0.1 ports. The process's
stderr goes to a file next to the data directory; it is attached to the report
of any failing test that used the process.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Optional

import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
E2E_DIR = Path(__file__).resolve().parent

READY_DEADLINE_S = 60.0
STOP_DEADLINE_S = 60.0
POLL_DEADLINE_S = 20.0


def spanhouse_bin() -> str:
    return os.environ.get("SPANHOUSE_BIN") or str(REPO_ROOT / "build" / "spanhouse")


def clean_env(extra: Optional[dict] = None) -> dict:
    """The test process's environment without SPANHOUSE_* and OTEL_* settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SPANHOUSE_") and not k.startswith("OTEL_")}
    if extra:
        env.update(extra)
    return env


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (bound to port 0 together, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL the child if the test runner dies, so nothing is left behind."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # pragma: no cover - best effort only
        pass


def tail(text: str, n: int = 6000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def describe_response(resp: requests.Response) -> str:
    body = resp.content[:4000]
    try:
        body_text = body.decode("utf-8")
    except UnicodeDecodeError:
        body_text = repr(body)
    return (f"{resp.request.method} {resp.request.url} -> HTTP {resp.status_code} "
            f"headers={dict(resp.headers)} body={body_text!r}")


class Spanhouse:
    """One spanhouse serve process (and its restarts) on one data directory."""

    def __init__(self, workdir: Path, name: str = "spanhouse", data_dir: Optional[Path] = None,
                 config: Optional[Path] = None, env: Optional[dict] = None,
                 extra_args: tuple = (), ca_cert: Optional[Path] = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.data_dir = Path(data_dir) if data_dir else self.workdir / f"{name}-data"
        self.stderr_path = self.workdir / f"{name}.stderr.log"
        self.stdout_path = self.workdir / f"{name}.stdout.log"
        self.config = config
        self.env = clean_env(env)
        self.extra_args = tuple(extra_args)
        self.proc: Optional[subprocess.Popen] = None
        self.otlp_port = 0
        self.query_port = 0
        self.grpc_port = 0  # OTLP/gRPC
        self.zipkin_port = 0
        self.starts = 0
        self.exit_codes: list[int] = []
        self.reaped = False  # the exit of the current process has been recorded
        # Set: both listeners speak HTTPS with a certificate this file vouches for.
        self.ca_cert = ca_cert
        self.verify = str(ca_cert) if ca_cert else True
        self.session = requests.Session()
        self.session.verify = self.verify
        if ca_cert:
            # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a session's verify.
            self.session.trust_env = False

    # ---- addresses ----
    @property
    def scheme(self) -> str:
        return "https" if self.ca_cert else "http"

    @property
    def otlp_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.otlp_port}"

    @property
    def traces_url(self) -> str:
        return f"{self.otlp_url}/v1/traces"

    @property
    def grpc_target(self) -> str:
        """host:port of the OTLP/gRPC listener (TLS when ca_cert is set)."""
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def zipkin_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.zipkin_port}/api/v2/spans"

    @property
    def query_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.query_port}"

    @property
    def healthz_url(self) -> str:
        return f"{self.query_url}/healthz"

    @property
    def readyz_url(self) -> str:
        """200 once every listener is up; /healthz answers as soon as the query API is."""
        return f"{self.query_url}/readyz"

    def trace_url(self, trace_id: str) -> str:
        return f"{self.query_url}/api/traces/{trace_id}"

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # ---- logs ----
    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no stderr file)"

    def stdout_text(self) -> str:
        try:
            return self.stdout_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no stdout file)"

    def diagnostics(self) -> str:
        state = "not started"
        if self.proc is not None:
            rc = self.proc.poll()
            state = f"pid {self.proc.pid} " + ("running" if rc is None else f"exited with {rc}")
        return (f"--- {self.name}: {state}, data dir {self.data_dir}, otlp {self.otlp_url}, "
                f"query {self.query_url}, exit codes so far {self.exit_codes}\n"
                f"--- {self.name} stderr ({self.stderr_path}):\n{tail(self.stderr_text())}\n"
                f"--- {self.name} stdout ({self.stdout_path}):\n{tail(self.stdout_text())}")

    # ---- lifecycle ----
    def command(self) -> list[str]:
        cmd = [spanhouse_bin(), "serve", "--data-dir", str(self.data_dir),
               "--otlp-http-listen", f"127.0.0.1:{self.otlp_port}",
               "--query-listen", f"127.0.0.1:{self.query_port}",
               "--otlp-grpc-listen", f"127.0.0.1:{self.grpc_port}",
               "--zipkin-listen", f"127.0.0.1:{self.zipkin_port}",
               "--log-level", "info"]
        if self.config is not None:
            cmd += ["--config", str(self.config)]
        return cmd + list(self.extra_args)

    def start(self, keep_ports: bool = False) -> "Spanhouse":
        assert not self.running(), "spanhouse already running"
        for attempt in range(3):
            if not (keep_ports and self.otlp_port and attempt == 0):
                self.otlp_port, self.query_port, self.grpc_port, self.zipkin_port = free_ports(4)
            self.starts += 1
            for path in (self.stderr_path, self.stdout_path):
                with open(path, "ab") as f:
                    f.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
            err = open(self.stderr_path, "ab")
            out = open(self.stdout_path, "ab")
            try:
                self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=err, env=self.env, cwd=str(self.workdir),
                                             preexec_fn=_die_with_parent)
            finally:
                err.close()
                out.close()
            self.reaped = False
            if self._wait_ready():
                return self
            # A port taken between free_ports() and bind: try again on other ports.
            if self.proc.poll() is not None and "ddress already in use" in (
                    self.stderr_text() + self.stdout_text()):
                continue
            break
        if self.proc.poll() is not None:
            msg = f"spanhouse exited with {self.proc.returncode} before becoming ready\n"
        else:
            msg = f"spanhouse was not ready (/readyz) within {READY_DEADLINE_S:.0f}s\n"
        msg += self.diagnostics()
        self.kill()
        pytest.fail(msg, pytrace=False)

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + READY_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.exit_codes.append(self.proc.returncode)
                self.reaped = True
                return False
            try:
                # Not /healthz: that answers while the receivers are still binding.
                r = requests.get(self.readyz_url, timeout=2, verify=self.verify)
                if r.status_code == 200 and r.text.split("\n", 1)[0] == "ready":
                    return True
            except requests.RequestException:
                pass
            time.sleep(0.05)
        return False

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_DEADLINE_S) -> int:
        """Sends `sig` and waits for the exit; returns the exit code (kills and fails on timeout)."""
        assert self.proc is not None, "spanhouse was never started"
        if self.reaped:
            return self.proc.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                pytest.fail(f"spanhouse did not exit within {timeout:.0f}s of "
                            f"{signal.Signals(sig).name}\n{self.diagnostics()}", pytrace=False)
        rc = self.proc.returncode
        self.exit_codes.append(rc)
        self.reaped = True
        for path in (self.stderr_path, self.stdout_path):
            with open(path, "ab") as f:
                f.write(f"===== exited with {rc}\n".encode())
        return rc

    def stop_ok(self, sig: int = signal.SIGTERM) -> None:
        rc = self.stop(sig)
        assert rc == 0, f"spanhouse exited with {rc} after {signal.Signals(sig).name}, want 0\n" \
                        f"{self.diagnostics()}"

    def restart(self) -> "Spanhouse":
        """SIGTERM (asserting exit 0), then start again on the same data directory."""
        if self.running():
            self.stop_ok()
        return self.start(keep_ports=True)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            self.exit_codes.append(self.proc.returncode)
            self.reaped = True

    # ---- HTTP helpers ----
    def post_traces(self, body: bytes, content_type: str = "application/json",
                    encoding: Optional[str] = None, timeout: float = 30) -> requests.Response:
        headers = {"Content-Type": content_type}
        if encoding:
            headers["Content-Encoding"] = encoding
        return self.session.post(self.traces_url, data=body, headers=headers, timeout=timeout)

    def get_trace(self, trace_id: str, timeout: float = 30) -> requests.Response:
        return self.session.get(self.trace_url(trace_id), timeout=timeout)

    def wait_for_trace(self, trace_id: str, done: Callable[[dict], bool],
                       deadline_s: float = POLL_DEADLINE_S, what: str = "") -> dict:
        """Polls GET /api/traces/{id} until done(parsed body) holds; fails with the last body."""
        deadline = time.monotonic() + deadline_s
        last = "no response"
        while True:
            try:
                r = self.get_trace(trace_id)
                last = describe_response(r)
                if r.status_code == 200:
                    doc = r.json()
                    if done(doc):
                        return doc
                elif r.status_code != 404:
                    pytest.fail(f"unexpected answer while polling trace {trace_id}: {last}\n"
                                f"{self.diagnostics()}", pytrace=False)
            except (requests.RequestException, ValueError) as e:
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() >= deadline:
                pytest.fail(f"trace {trace_id} {what or 'did not become complete'} within "
                            f"{deadline_s:.0f}s; last answer: {last}\n{self.diagnostics()}",
                            pytrace=False)
            time.sleep(0.1)


def trace_span_ids(doc: dict) -> list[str]:
    """All spanIDs in a Jaeger response (with repeats, if any)."""
    ids = []
    for trace in doc.get("data") or []:
        for span in trace.get("spans") or []:
            ids.append(span.get("spanID"))
    return ids


class SpanhouseFactory:
    def __init__(self, workdir: Path, clickhouse=None):
        """`clickhouse`: a ClickHouseServer the instances store in (storage.engine clickhouse),
        each in a database of its own; None: the embedded engine."""
        self.workdir = Path(workdir)
        self.instances: list[Spanhouse] = []
        self.clickhouse = clickhouse

    def __call__(self, name: str = "spanhouse", start: bool = True, **kwargs) -> Spanhouse:
        if self.clickhouse is not None:
            kwargs["extra_args"] = tuple(kwargs.get("extra_args", ())) + (
                "--clickhouse-url", self.clickhouse.url)
            env = dict(kwargs.get("env") or {})
            env["SPANHOUSE_CLICKHOUSE_DATABASE"] = self.clickhouse.new_database()
            kwargs["env"] = env
        sh = Spanhouse(self.workdir, name=name, **kwargs)
        self.instances.append(sh)
        if start:
            sh.start()
        return sh

    def teardown(self) -> None:
        """SIGTERM every running instance and assert exit 0; kill whatever is left."""
        problems = []
        try:
            for sh in self.instances:
                if sh.running():
                    sh.proc.send_signal(signal.SIGTERM)
            for sh in self.instances:
                if sh.proc is None or sh.reaped:
                    continue
                try:
                    sh.proc.wait(timeout=STOP_DEADLINE_S)
                except subprocess.TimeoutExpired:
                    problems.append(f"{sh.name} did not exit within {STOP_DEADLINE_S:.0f}s of "
                                    f"SIGTERM\n{sh.diagnostics()}")
                    continue
                rc = sh.proc.returncode
                sh.exit_codes.append(rc)
                sh.reaped = True
                if rc != 0:
                    problems.append(f"{sh.name} exited with {rc} after SIGTERM at teardown, "
                                    f"want 0\n{sh.diagnostics()}")
        finally:
            for sh in self.instances:
                sh.kill()
                sh.session.close()
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def spanhouse_factory(tmp_path, request):
    # A module that runs on every backend says so: pytestmark = pytest.mark.usefixtures("backend").
    clickhouse = request.getfixturevalue("backend") if "backend" in request.fixturenames else None
    factory = SpanhouseFactory(tmp_path, clickhouse=clickhouse)
    request.node._spanhouse_factories = getattr(request.node, "_spanhouse_factories", []) + [factory]
    yield factory
    factory.teardown()


@pytest.fixture
def spanhouse(spanhouse_factory) -> Spanhouse:
    """A running spanhouse on a fresh data dir; SIGTERMed at teardown (exit 0 asserted)."""
    return spanhouse_factory()


# Where the suites parametrised by backend store: the embedded engine, and a real
# ClickHouse server (Debian's clickhouse-server 18.16, started once per session).
BACKENDS = ["chdb", "clickhouse"]


@pytest.fixture(scope="session")
def clickhouse_server(tmp_path_factory):
    """One real ClickHouse server for the session; each spanhouse on it gets a database."""
    from clickhouse_server import ClickHouseServer
    server = ClickHouseServer(tmp_path_factory.mktemp("clickhouse"))
    counter = iter(range(1, 1 << 30))
    server.new_database = lambda: f"e2e_{next(counter)}"
    yield server
    server.stop()


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    """The store a module's spanhouse writes to: None (embedded) or a ClickHouseServer."""
    if request.param == "chdb":
        return None
    return request.getfixturevalue("clickhouse_server")


def _search_node(tmp_path_factory, engine: str):
    """A started node of `engine` (opensearch_server.py), for a module-scoped fixture to yield
    and stop; skips the test when its launcher is not built, except under CI, which builds it."""
    from opensearch_server import NODE_CLASSES, launcher_missing
    why = launcher_missing(engine)
    if why:
        if os.environ.get("CI"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return NODE_CLASSES[engine](tmp_path_factory.mktemp(engine))


@pytest.fixture(scope="module")
def opensearch(tmp_path_factory):
    """One real OpenSearch 2.19.6 node (opensearch_server.py) shared by a module's tests;
    skipped when tests/opensearch is not built, except under CI, which builds it."""
    server = _search_node(tmp_path_factory, "opensearch")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def elasticsearch(tmp_path_factory):
    """One real Elasticsearch 7.10.2 node (OSS, no x-pack; opensearch_server.py) shared by a
    module's tests; skipped when tests/elasticsearch is not built, except under CI."""
    server = _search_node(tmp_path_factory, "elasticsearch")
    yield server
    server.stop()


# The search engines a test parametrised by `search_store` runs on: what spanhouse migrates
# from and Jaeger's other store (the last Apache-2.0 Elasticsearch), each a real node.
SEARCH_ENGINES = ["opensearch", "elasticsearch"]


@pytest.fixture(scope="module", params=SEARCH_ENGINES, ids=SEARCH_ENGINES)
def search_store(request):
    """The module's `opensearch` or `elasticsearch` node (the same object those fixtures give),
    so a test written once runs on both; `.engine` and `.version` say which one it has."""
    return request.getfixturevalue(request.param)


def _program_factory(tmp_path, request, missing, make):
    """A factory of reference programs (configured_program.ProgramFactory) for one test: the
    test is skipped when `missing()` says the program is not built, except under CI, which
    builds it; the failure hook below attaches the logs of its instances to the report."""
    why = missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    factory = make(tmp_path)
    request.node._spanhouse_factories = (getattr(request.node, "_spanhouse_factories", [])
                                         + [factory])
    return factory


@pytest.fixture
def jaeger_factory(tmp_path, request):
    """Makes Jaeger v2 processes (jaeger_server.Jaeger, the reference implementation) under
    tmp_path, stopped at teardown."""
    from jaeger_server import JaegerFactory, jaeger_missing
    factory = _program_factory(tmp_path, request, jaeger_missing, JaegerFactory)
    yield factory
    factory.teardown()


@pytest.fixture
def jaeger(jaeger_factory):
    """A running Jaeger v2 storing in memory."""
    return jaeger_factory()


@pytest.fixture
def otelcol_factory(tmp_path, request):
    """Makes OpenTelemetry Collectors (otelcol_server.Collector: OTLP in, the loadbalancing
    exporter out) under tmp_path, stopped at teardown."""
    from otelcol_server import CollectorFactory, otelcol_missing
    factory = _program_factory(tmp_path, request, otelcol_missing, CollectorFactory)
    yield factory
    factory.teardown()


@pytest.fixture(scope="module")
def module_spanhouse(tmp_path_factory, request):
    """One spanhouse shared by the tests of a module."""
    factory = SpanhouseFactory(tmp_path_factory.mktemp(request.module.__name__.split(".")[-1]))
    request.module._spanhouse_factories = [factory]
    sh = factory()
    yield sh
    factory.teardown()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    factories = list(getattr(item, "_spanhouse_factories", []))
    factories += list(getattr(item.module, "_spanhouse_factories", []) if item.module else [])
    seen = set()
    for factory in factories:
        for sh in factory.instances:
            if id(sh) in seen:
                continue
            seen.add(id(sh))
            if f"--- {sh.name} stderr ({sh.stderr_path})" in report.longreprtext:
                continue  # the failure message already shows it
            report.sections.append((f"{sh.name} stderr", sh.diagnostics()))


def otlp_json_span(trace_id: str, span_id: str, name: str = "op", parent: str = "",
                   start_ns: Optional[int] = None, dur_ns: int = 1_000_000,
                   attributes: Optional[list] = None) -> dict:
    start_ns = start_ns if start_ns is not None else time.time_ns()
    span = {"traceId": trace_id, "spanId": span_id, "name": name, "kind": 1,
            "startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(start_ns + dur_ns)}
    if parent:
        span["parentSpanId"] = parent
    if attributes:
        span["attributes"] = attributes
    return span


def otlp_json_request(spans: list, service: str = "e2e-service") -> bytes:
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": "e2e"}, "spans": spans}],
    }]}).encode()


def otlp_value(v) -> dict:
    """An OTLP/JSON AnyValue for a Python value: bool, int, float, bytes, list, dict, None (an
    empty value) or str."""
    if v is None:
        return {}
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, bytes):
        return {"bytesValue": base64.b64encode(v).decode()}
    if isinstance(v, list):
        return {"arrayValue": {"values": [otlp_value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": otlp_value(x)}
                                           for k, x in v.items()]}}
    return {"stringValue": v}


def otlp_attrs(d: dict) -> list:
    """OTLP/JSON attributes (KeyValue list) of a dict, in its order."""
    return [{"key": k, "value": otlp_value(v)} for k, v in d.items()]
