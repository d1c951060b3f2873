"""Jaeger v2 itself (cmd/jaeger of github.com/jaegertracing/jaeger v1.75.0), the reference
implementation the tests compare spanhouse with: one process on free loopback ports, storing
in memory, in Badger (under its own directory, kept across restarts), in OpenSearch or in
Elasticsearch (the nodes of opensearch_server.py: OpenSearch 2.19.6, Elasticsearch 7.10.2).

scripts/setup.sh --tests builds the binary (tools/jaeger/go.mod pins it) into
${XDG_CACHE_HOME:-~/.cache}/spanhouse/jaeger-v1.75.0/jaeger; JAEGER_BIN names another one.

The configuration is written for each start. It lists only the components the tests need,
each on a port of its own: the OTLP receiver (gRPC and HTTP), the storage exporter,
jaeger_storage, jaeger_query (its HTTP API and UI, and its gRPC API), healthcheckv2 (HTTP
and gRPC) and the collector's own Prometheus metrics. Nothing else is configured, so nothing
else listens: no Jaeger/Zipkin receivers, remote sampling, expvar, zpages or pprof. The file is
JSON, which the collector reads as YAML. jaeger_query's own tracing is off (it would export
OTLP to localhost:4317, wherever that is).

conftest.py's fixtures: `jaeger`, a running Jaeger on the memory store, and `jaeger_factory`,
which makes more (any storage); both skip the test when the binary is not built, and fail it
under CI=true. Each instance's log is attached to the report of a test that fails."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import pytest
import requests

from conftest import tail
from configured_program import ConfiguredProgram, ProgramFactory, cached_binary, not_built
# The fixtures live in conftest.py; also importable from here (`from jaeger_server import
# jaeger_factory`), as the first version of this module had them.
from conftest import jaeger, jaeger_factory  # noqa: F401

JAEGER_VERSION = "v1.75.0"
READY_DEADLINE_S = 60.0
STOP_DEADLINE_S = 30.0
STORAGES = ("memory", "badger", "opensearch", "elasticsearch")
# The stores on a search engine: Jaeger's `opensearch` and `elasticsearch` backends, which take
# the same settings (one Go struct) and write the same documents.
SEARCH_STORAGES = ("opensearch", "elasticsearch")
# The daily index layout (Jaeger's default), spelt out so the tests' expectations are visible.
DATE_LAYOUT = "2006-01-02"


def jaeger_bin() -> Path:
    return cached_binary("JAEGER_BIN", "jaeger", JAEGER_VERSION)


def jaeger_missing() -> Optional[str]:
    """Why Jaeger cannot be run here, or None."""
    return not_built(jaeger_bin(), f"Jaeger {JAEGER_VERSION}",
                     "scripts/setup.sh --tests builds it with Go from tools/jaeger/go.mod")


def _merge(base: dict, extra: dict) -> dict:
    """base with extra merged in, key by key into nested dicts."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


class Jaeger(ConfiguredProgram):
    """One Jaeger v2 process (and its restarts, on the same ports and the same data)."""

    stop_deadline_s = STOP_DEADLINE_S
    ready_deadline_s = READY_DEADLINE_S
    LOG_NAME = "jaeger.log"

    def __init__(self, root: Path, storage: str = "memory", search_url: Optional[str] = None,
                 index_prefix: str = "", create_mappings: bool = True, start: bool = True,
                 name: str = "jaeger", shards: int = 1, replicas: int = 0,
                 storage_options: Optional[dict] = None, opensearch_url: Optional[str] = None):
        """storage: memory, badger, opensearch or elasticsearch. For the last two: the node's
        URL (search_url, or opensearch_url, its older name), an index prefix ("" for none;
        Jaeger adds the "-"), whether Jaeger creates its index templates, and the shards and
        replicas of its daily indices (1 and 0 suit a one-node cluster; Jaeger's defaults are
        5 and 1). storage_options: merged into the backend's settings (e.g.
        {"tags_as_fields": {"all": True}})."""
        if storage not in STORAGES:
            raise ValueError(f"storage {storage!r}: one of {', '.join(STORAGES)}")
        search_url = search_url or opensearch_url
        if storage in SEARCH_STORAGES and not search_url:
            raise ValueError(f"storage {storage} needs search_url")
        self.binary = jaeger_bin()
        why = jaeger_missing()
        if why:
            raise RuntimeError(why)
        self.storage = storage
        self.search_url = search_url
        self.index_prefix = index_prefix
        self.create_mappings = create_mappings
        self.shards = shards
        self.replicas = replicas
        self.storage_options = storage_options or {}
        self._init_files(root, name)
        if start:
            self.start()

    # ---- addresses ----
    @property
    def query_url(self) -> str:
        """The query API (/api/traces, /api/services...) and the UI."""
        return f"http://127.0.0.1:{self.ports['query_http']}"

    @property
    def query_grpc_address(self) -> str:
        return f"127.0.0.1:{self.ports['query_grpc']}"

    @property
    def otlp_http_url(self) -> str:
        """POST {otlp_http_url}/v1/traces."""
        return f"http://127.0.0.1:{self.ports['otlp_http']}"

    @property
    def otlp_grpc_address(self) -> str:
        return f"127.0.0.1:{self.ports['otlp_grpc']}"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['health_http']}/status"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['metrics']}/metrics"

    @property
    def badger_dir(self) -> Path:
        return self.root / "badger"

    # The conftest's failure hook shows the log of what a test's factories started.
    @property
    def stderr_path(self) -> Path:
        return self.log_path

    # ---- configuration ----
    PORT_NAMES = ("otlp_grpc", "otlp_http", "query_http", "query_grpc", "health_http",
                  "health_grpc", "metrics")

    def backend_config(self) -> dict:
        if self.storage == "memory":
            backend = {"memory": {"max_traces": 100000}}
        elif self.storage == "badger":
            backend = {"badger": {
                "ephemeral": False,
                "directories": {"keys": str(self.badger_dir / "keys"),
                                "values": str(self.badger_dir / "values")},
                "ttl": {"spans": "72h"},
            }}
        else:
            # One struct for both backends. v1.75's keys (internal/storage/elasticsearch/
            # config): version (0, the default: the first digit of GET /'s version.number, or
            # 7 for an OpenSearch 1-3, told by its tagline; so no setting is needed for
            # Elasticsearch 7.10.2), indices.index_prefix
            # ("" by default; "p" names p-jaeger-span-DATE), indices.{spans,services,
            # dependencies,sampling}.{date_layout,rollover_frequency,shards,replicas}
            # (2006-01-02, day, 5, 1), create_mappings (true), tags_as_fields.{all,include,
            # config_file,dot_replacement} (false, "", "", "@"; span.kind and error are
            # object fields whatever they say), use_aliases, use_ilm (false), max_span_age
            # (72h: the reader looks no further back).
            daily = {"date_layout": DATE_LAYOUT, "rollover_frequency": "day",
                     "shards": self.shards, "replicas": self.replicas}
            backend = {self.storage: {
                "server_urls": [self.search_url],
                "create_mappings": self.create_mappings,
                "indices": {"index_prefix": self.index_prefix, "spans": daily,
                            "services": daily, "dependencies": daily, "sampling": daily},
            }}
        if self.storage_options:
            kind = next(iter(backend))
            backend[kind] = _merge(backend[kind], self.storage_options)
        return backend

    def config(self) -> dict:
        p = self.ports
        return {
            "service": {
                "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
                "pipelines": {"traces": {"receivers": ["otlp"], "processors": ["batch"],
                                         "exporters": ["jaeger_storage_exporter"]}},
                "telemetry": {
                    "resource": {"service.name": "jaeger"},
                    "logs": {"level": "info"},
                    "metrics": {"level": "basic", "readers": [{"pull": {"exporter": {
                        "prometheus": {"host": "127.0.0.1", "port": p["metrics"]}}}}]},
                },
            },
            "extensions": {
                "jaeger_storage": {"backends": {"store": self.backend_config()}},
                "jaeger_query": {
                    "storage": {"traces": "store"},
                    "enable_tracing": False,
                    "http": {"endpoint": f"127.0.0.1:{p['query_http']}"},
                    "grpc": {"endpoint": f"127.0.0.1:{p['query_grpc']}"},
                },
                "healthcheckv2": {
                    "use_v2": True,
                    "http": {"endpoint": f"127.0.0.1:{p['health_http']}"},
                    "grpc": {"endpoint": f"127.0.0.1:{p['health_grpc']}"},
                },
            },
            "receivers": {"otlp": {"protocols": {
                "grpc": {"endpoint": f"127.0.0.1:{p['otlp_grpc']}"},
                "http": {"endpoint": f"127.0.0.1:{p['otlp_http']}"},
            }}},
            "processors": {"batch": {"timeout": "100ms"}},
            "exporters": {"jaeger_storage_exporter": {"trace_storage": "store"}},
        }

    def not_ready(self, deadline_s: float, last: str) -> str:
        return f"{self.name} did not answer GET /api/services within {deadline_s:.0f} s (last: {last})"

    def _wait_ready(self, deadline_s: float) -> tuple[bool, str]:
        deadline = time.monotonic() + deadline_s
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False, f"exited with {self.proc.returncode}"
            try:
                r = requests.get(f"{self.query_url}/api/services", timeout=5)
                last = f"HTTP {r.status_code} {r.text[:300]!r}"
                # The extensions (jaeger_query) start before the receivers: wait for those too.
                if r.status_code == 200 and all(
                        self._accepts(self.ports[p]) for p in ("otlp_grpc", "otlp_http")):
                    return True, last
            except requests.RequestException as e:
                last = f"{type(e).__name__}: {e}"
            time.sleep(0.1)
        return False, last

    # ---- logs ----
    def diagnostics(self) -> str:
        return (f"--- {self.name} stderr ({self.log_path}): Jaeger {JAEGER_VERSION}, "
                f"{self.storage} store, {self.state()}, ports {self.ports}, "
                f"config {self.config_path}, "
                f"exit codes so far {self.exit_codes}\n{tail(self.log_text())}")

    # ---- HTTP helpers ----
    def post_otlp_json(self, body: bytes, timeout: float = 30) -> requests.Response:
        return requests.post(f"{self.otlp_http_url}/v1/traces", data=body,
                             headers={"Content-Type": "application/json"}, timeout=timeout)

    def get_trace(self, trace_id: str, timeout: float = 30) -> requests.Response:
        return requests.get(f"{self.query_url}/api/traces/{trace_id}", timeout=timeout)

    def wait_for_trace(self, trace_id: str, n_spans: int, deadline_s: float = 30.0) -> dict:
        """Polls GET /api/traces/{id} until the trace has n_spans spans; its first trace."""
        deadline = time.monotonic() + deadline_s
        last = "no answer"
        while True:
            try:
                r = self.get_trace(trace_id)
                last = f"HTTP {r.status_code} {r.text[:2000]!r}"
                if r.status_code == 200:
                    data = r.json().get("data") or []
                    if data and len(data[0].get("spans") or []) >= n_spans:
                        return data[0]
            except (requests.RequestException, ValueError) as e:
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() >= deadline:
                pytest.fail(f"trace {trace_id} did not have {n_spans} spans in {self.name} within "
                            f"{deadline_s:.0f} s; last answer: {last}\n{self.diagnostics()}",
                            pytrace=False)
            time.sleep(0.2)


class JaegerFactory(ProgramFactory):
    """Jaegers under one directory, all stopped at teardown (conftest.py's jaeger_factory)."""

    def __init__(self, root: Path):
        super().__init__(root, Jaeger)

    def __call__(self, name: str = "jaeger", start: bool = True, **kwargs) -> Jaeger:
        return self._add(name, start, **kwargs)
