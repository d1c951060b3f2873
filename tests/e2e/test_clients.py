"""Real clients in four languages, and a Zipkin one, round-tripping one known trace.

Each case starts a fresh spanhouse, runs one emitter (a real SDK or client
library, installed by scripts/setup.sh --tests: tests/e2e/clients/), reads
the trace back from GET /api/traces/{id} and checks every field against what
the emitter says it sent (roundtrip_check.py).

Receivers that this build lacks (OTLP/gRPC, Zipkin) are found by asking
spanhouse: `serve --print-config` with the receiver's config key. A build that
rejects the key skips its cases with the reason; one that takes it is started
with the receiver on a free port and must serve it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from conftest import E2E_DIR, clean_env, free_ports, spanhouse_bin
from roundtrip_check import check_sent, check_trace, run_emitter, zipkin_description

CLIENTS_DIR = E2E_DIR / "clients"
NODE_DIR = CLIENTS_DIR / "node"
GO_BIN = CLIENTS_DIR / "go" / "emit_otel"
JAVA_JAR = CLIENTS_DIR / "java" / "target" / "emit-otel.jar"

OTEL_KINDS = {"server", "client", "internal", "producer", "consumer"}
ZIPKIN_KINDS = OTEL_KINDS  # the kind-less span maps to internal

# receiver -> (config key of its listen address, what the endpoint looks like)
RECEIVER_KEYS = {"otlp_grpc": "otlp_grpc.listen",
                 "zipkin": "zipkin.listen"}
RECEIVER_NAMES = {"otlp_grpc": "OTLP/gRPC", "zipkin": "Zipkin v2"}


@dataclass
class Client:
    name: str
    receiver: str  # otlp_http, otlp_grpc or zipkin
    # (endpoint) -> command line
    command: Callable[[str], list]
    # what must exist for it to run, and how it is installed
    needs: tuple
    services: frozenset = frozenset({"frontend", "payment"})
    kinds: frozenset = frozenset(OTEL_KINDS)


def node_cmd(script: str, *extra: str) -> Callable[[str], list]:
    return lambda endpoint: ["node", str(NODE_DIR / script), "--endpoint", endpoint, *extra]


def python_cmd(protocol: str) -> Callable[[str], list]:
    return lambda endpoint: [sys.executable, str(E2E_DIR / "emit_trace.py"), "--protocol",
                             protocol, "--endpoint", endpoint]


CLIENTS = [
    Client("python-otlp-http-proto", "otlp_http", python_cmd("http"), ()),
    Client("python-otlp-grpc", "otlp_grpc", python_cmd("grpc"), ()),
    Client("node-otlp-http-proto", "otlp_http", node_cmd("emit_otel.js", "--encoding", "proto"),
           ("node", NODE_DIR / "node_modules")),
    Client("node-otlp-http-json", "otlp_http", node_cmd("emit_otel.js", "--encoding", "json"),
           ("node", NODE_DIR / "node_modules")),
    Client("go-otlp-grpc", "otlp_grpc", lambda ep: [str(GO_BIN), "--endpoint", ep], (GO_BIN,)),
    Client("java-otlp-http", "otlp_http",
           lambda ep: ["java", "-jar", str(JAVA_JAR), "--protocol", "http", "--endpoint", ep],
           ("java", JAVA_JAR)),
    Client("java-otlp-grpc", "otlp_grpc",
           lambda ep: ["java", "-jar", str(JAVA_JAR), "--protocol", "grpc", "--endpoint", ep],
           ("java", JAVA_JAR)),
    Client("zipkin-js-v2-json", "zipkin", node_cmd("emit_zipkin.js"),
           ("node", NODE_DIR / "node_modules"),
           services=frozenset({"frontend", "payment", "worker"}), kinds=frozenset(ZIPKIN_KINDS)),
]

_receiver_support: dict = {}


def receiver_support(receiver: str, tmp_dir: Path) -> str:
    """'' if this build has `receiver`, else why not (spanhouse's own word)."""
    if receiver == "otlp_http":
        return ""
    if receiver not in _receiver_support:
        cfg = tmp_dir / f"probe-{receiver}.yaml"
        cfg.write_text(receiver_yaml(receiver, free_ports(1)[0]))
        proc = subprocess.run([spanhouse_bin(), "serve", "--config", str(cfg), "--print-config"],
                              capture_output=True, text=True, timeout=60, env=clean_env())
        why = ""
        if proc.returncode != 0:
            why = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["(no message)"]
            why = why[0]
        _receiver_support[receiver] = why
    return _receiver_support[receiver]


def receiver_yaml(receiver: str, port: int) -> str:
    section, key = RECEIVER_KEYS[receiver].split(".")
    return f"{section}:\n  {key}: 127.0.0.1:{port}\n"


def missing_tools(client: Client) -> list:
    missing = []
    for need in client.needs:
        if isinstance(need, Path):
            if not need.exists():
                missing.append(str(need))
        elif shutil.which(need) is None:
            missing.append(f"{need} (not on PATH)")
    return missing


def wait_for_port(port: int, deadline_s: float = 20.0) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


@pytest.mark.parametrize("client", CLIENTS, ids=[c.name for c in CLIENTS])
def test_client_roundtrip(client: Client, spanhouse_factory, tmp_path):
    missing = missing_tools(client)
    if missing:
        msg = (f"{client.name}: not installed: {', '.join(missing)} "
               f"(scripts/setup.sh --tests installs it)")
        if os.environ.get("CI"):
            pytest.fail(msg, pytrace=False)  # CI installs every client: missing is a failure
        pytest.skip(msg)
    why = receiver_support(client.receiver, tmp_path)
    if why:
        pytest.skip(f"{RECEIVER_NAMES[client.receiver]} receiver not in this build: spanhouse "
                    f"rejects {RECEIVER_KEYS[client.receiver]} ({why})")

    if client.receiver == "otlp_http":
        sh = spanhouse_factory()
        endpoint = sh.traces_url
    else:
        # The harness gives every receiver a free port (--otlp-grpc-listen, --zipkin-listen).
        sh = spanhouse_factory()
        port = sh.grpc_port if client.receiver == "otlp_grpc" else sh.zipkin_port
        assert wait_for_port(port), \
            f"spanhouse took {RECEIVER_KEYS[client.receiver]}: 127.0.0.1:{port} but does not " \
            f"listen there\n{sh.diagnostics()}"
        endpoint = f"http://127.0.0.1:{port}"
        if client.receiver == "zipkin":
            endpoint += "/api/v2/spans"

    sent = run_emitter(client.command(endpoint), client.name)
    if client.receiver == "zipkin":
        sent = zipkin_description(sent)
    check_sent(sent, set(client.services), set(client.kinds))
    check_trace(sh, sent)
