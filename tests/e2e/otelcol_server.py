"""The OpenTelemetry Collector as the front of several spanhouse nodes: one process on free
loopback ports that takes OTLP (gRPC and HTTP) and hands each trace to one node with the
contrib `load_balancing` exporter (`loadbalancing` before v0.161; `routing_key: traceID`, a
static list of the nodes' OTLP/gRPC addresses).

scripts/setup.sh --tests builds it (scripts/setup_otelcol.sh, from tools/otelcol/builder.yaml
with the OpenTelemetry Collector Builder) into
${XDG_CACHE_HOME:-~/.cache}/spanhouse/otelcol-v0.161.0/otelcol; OTELCOL_BIN names another one.

The configuration is written for each start and lists only what the tests need: the OTLP
receiver and the loadbalancing exporter. Each node gets its own OTLP exporter inside the
loadbalancing one, with a queue and retries of its own, so a node that is briefly away gets
its traces once it is back, and no trace moves to the other node meanwhile. The collector's own
metrics are off (they would listen on 8888, wherever that is). The file is JSON, which the
collector reads as YAML.

conftest.py's fixture `otelcol_factory` makes them; it skips the test when the binary is not
built, and fails it under CI=true. Each instance's log is attached to the report of a test
that fails."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import requests

from conftest import tail
from configured_program import ConfiguredProgram, ProgramFactory, cached_binary, not_built

OTELCOL_VERSION = "v0.161.0"
READY_DEADLINE_S = 60.0
STOP_DEADLINE_S = 30.0


def otelcol_bin() -> Path:
    return cached_binary("OTELCOL_BIN", "otelcol", OTELCOL_VERSION)


def otelcol_missing() -> Optional[str]:
    """Why the collector cannot be run here, or None."""
    return not_built(otelcol_bin(), f"the OpenTelemetry Collector {OTELCOL_VERSION}",
                     "scripts/setup.sh --tests builds it with Go (scripts/setup_otelcol.sh)")


class Collector(ConfiguredProgram):
    """One collector process in front of `backends` (host:port of each node's OTLP/gRPC)."""

    stop_deadline_s = STOP_DEADLINE_S
    ready_deadline_s = READY_DEADLINE_S
    LOG_NAME = "otelcol.log"
    PORT_NAMES = ("otlp_grpc", "otlp_http")

    def __init__(self, root: Path, backends: list[str], routing_key: str = "traceID",
                 name: str = "otelcol", start: bool = True):
        if not backends:
            raise ValueError("the loadbalancing exporter needs at least one backend")
        self.binary = otelcol_bin()
        why = otelcol_missing()
        if why:
            raise RuntimeError(why)
        self.backends = list(backends)
        self.routing_key = routing_key
        self._init_files(root, name)
        if start:
            self.start()

    # ---- addresses ----
    @property
    def otlp_http_url(self) -> str:
        """POST {otlp_http_url}/v1/traces."""
        return f"http://127.0.0.1:{self.ports['otlp_http']}"

    @property
    def otlp_grpc_address(self) -> str:
        return f"127.0.0.1:{self.ports['otlp_grpc']}"

    # ---- configuration ----
    def config(self) -> dict:
        p = self.ports
        # One OTLP/gRPC exporter per node (plain text on loopback), each with its own queue and
        # retries: a node's failure is retried to that node, for up to a minute.
        per_node = {
            "tls": {"insecure": True},
            "timeout": "5s",
            "sending_queue": {"enabled": True, "queue_size": 10000},
            "retry_on_failure": {"enabled": True, "initial_interval": "100ms",
                                 "max_interval": "1s", "max_elapsed_time": "60s"},
        }
        return {
            "receivers": {"otlp": {"protocols": {
                "grpc": {"endpoint": f"127.0.0.1:{p['otlp_grpc']}"},
                "http": {"endpoint": f"127.0.0.1:{p['otlp_http']}"},
            }}},
            "exporters": {"load_balancing": {
                "routing_key": self.routing_key,
                "protocol": {"otlp": per_node},
                "resolver": {"static": {"hostnames": self.backends}},
            }},
            "service": {
                "pipelines": {"traces": {"receivers": ["otlp"], "exporters": ["load_balancing"]}},
                "telemetry": {"logs": {"level": "info"}, "metrics": {"level": "none"}},
            },
        }

    def not_ready(self, deadline_s: float, last: str) -> str:
        return f"{self.name} did not accept on its OTLP ports within {deadline_s:.0f} s ({last})"

    def _wait_ready(self, deadline_s: float) -> tuple[bool, str]:
        deadline = time.monotonic() + deadline_s
        last = "no port accepted"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False, f"exited with {self.proc.returncode}"
            waiting = [name for name in self.PORT_NAMES if not self._accepts(self.ports[name])]
            if not waiting:
                return True, "ready"
            last = f"not accepting: {', '.join(waiting)}"
            time.sleep(0.1)
        return False, last

    # ---- logs ----
    def diagnostics(self) -> str:
        return (f"--- {self.name} stderr ({self.log_path}): OpenTelemetry Collector "
                f"{OTELCOL_VERSION}, routing_key {self.routing_key}, backends {self.backends}, "
                f"{self.state()}, ports {self.ports}, config {self.config_path}, "
                f"exit codes so far {self.exit_codes}\n{tail(self.log_text())}")

    # ---- HTTP helpers ----
    def post_otlp_json(self, body: bytes, session: Optional[requests.Session] = None,
                       timeout: float = 30) -> requests.Response:
        return self.post_otlp(body, "application/json", session, timeout)

    def post_otlp(self, body: bytes, content_type: str = "application/x-protobuf",
                  session: Optional[requests.Session] = None,
                  timeout: float = 30) -> requests.Response:
        return (session or requests).post(f"{self.otlp_http_url}/v1/traces", data=body,
                                          headers={"Content-Type": content_type},
                                          timeout=timeout)


class CollectorFactory(ProgramFactory):
    """Collectors under one directory, all stopped at teardown (conftest.py's
    otelcol_factory)."""

    def __init__(self, root: Path):
        super().__init__(root, Collector)

    def __call__(self, backends: list[str], name: str = "otelcol", start: bool = True,
                 **kwargs) -> Collector:
        return self._add(name, start, backends, **kwargs)
