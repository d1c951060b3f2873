"""A real ClickHouse server for the tests: Debian's clickhouse-server (scripts/setup.sh --tests
installs it), started on free loopback ports in a directory of its own, with a config written
here, and stopped at the end. Queries go over its HTTP interface.

A server may also be one member of a cluster (clickhouse_cluster.py): then its config names the
whole cluster, its own shard and replica, and the ZooKeeper the replicas and ON CLUSTER DDL
coordinate through. Every member's ports must be known before any config is written, so the
cluster allocates them and hands each server its own (`ports`, `cluster`)."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from conftest import _die_with_parent, free_ports, tail

SERVER_BIN = "/usr/sbin/clickhouse-server"


def server_missing() -> Optional[str]:
    """Why no clickhouse-server can be started here, or None."""
    if shutil.which("clickhouse-server") or Path(SERVER_BIN).exists():
        return None
    return "clickhouse-server is not installed: run scripts/setup.sh --tests"


class ClickHouseError(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(f"HTTP {status}: {text}")
        self.status = status
        self.text = text


@dataclass(frozen=True)
class ClusterSettings:
    """One server's place in a cluster: what its config needs beyond a lone server's.

    Shards and replicas are 0-based here; the macros the server gets are the names ClickHouse
    sees: shard "1", "2", ... and replica "s1r1", "s1r2", ... (unique in the whole cluster, so a
    table path without {shard} still gets distinct replicas)."""
    name: str                        # the cluster's name in <remote_servers>
    tcp_ports: tuple                 # tcp_ports[shard][replica]: every member, on 127.0.0.1
    shard: int
    replica: int
    zookeeper_port: int
    # A SIGKILLed replica's ZooKeeper session (and its is_active node) lives this long; a
    # restarted one cannot take its tables out of read-only mode before it expires.
    zookeeper_session_timeout_ms: int = 4000

    @property
    def shard_macro(self) -> str:
        return str(self.shard + 1)

    @property
    def replica_macro(self) -> str:
        return replica_name(self.shard, self.replica)

    def xml(self) -> str:
        shards = "".join(
            "\n      <shard><internal_replication>true</internal_replication>"
            + "".join(f"\n        <replica><host>127.0.0.1</host><port>{port}</port></replica>"
                      for port in replicas)
            + "\n      </shard>"
            for replicas in self.tcp_ports)
        return f"""
  <!-- Replicas fetch parts from each other at this host (the default, the machine's name,
       may resolve to an address nobody listens on). -->
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <remote_servers>
    <{self.name}>{shards}
    </{self.name}>
  </remote_servers>
  <macros><shard>{self.shard_macro}</shard><replica>{self.replica_macro}</replica></macros>
  <zookeeper>
    <node><host>127.0.0.1</host><port>{self.zookeeper_port}</port></node>
    <session_timeout_ms>{self.zookeeper_session_timeout_ms}</session_timeout_ms>
  </zookeeper>
  <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>"""


def replica_name(shard: int, replica: int) -> str:
    """The {replica} macro (and directory name) of a cluster member, from 0-based indices."""
    return f"s{shard + 1}r{replica + 1}"


class ClickHouseServer:
    """One clickhouse-server process on its own directory and ports.

    ClickHouseServer(root) starts a lone server at once, as the schema tests use it. A cluster
    builds its members with start=False, its own `ports` and `cluster` settings, then spawns
    them all before waiting for any (they start in parallel); kill() and start() restart a
    member on the same data directory and ports."""

    def __init__(self, root: Path, name: str = "ch", ports: Optional[tuple] = None,
                 cluster: Optional[ClusterSettings] = None, start: bool = True):
        self.binary = shutil.which("clickhouse-server") or SERVER_BIN
        if not Path(self.binary).exists():
            raise RuntimeError("clickhouse-server is not installed: run scripts/setup.sh --tests")
        self.name = name
        self.root = root / name
        self.root.mkdir(parents=True, exist_ok=True)
        self.http_port, self.tcp_port, self.interserver_port = ports or free_ports(3)
        self.cluster = cluster
        self.url = f"http://127.0.0.1:{self.http_port}/"
        self.log = self.root / "stdout.log"
        self.proc: Optional[subprocess.Popen] = None
        self._write_config()
        if start:
            self.start()

    def _write_config(self) -> None:
        r = self.root
        (r / "config.xml").write_text(f"""<?xml version="1.0"?>
<yandex>
  <logger><level>information</level><log>{r}/server.log</log>
    <errorlog>{r}/error.log</errorlog><console>0</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>{self.http_port}</http_port>
  <tcp_port>{self.tcp_port}</tcp_port>
  <interserver_http_port>{self.interserver_port}</interserver_http_port>
  <path>{r}/data/</path>
  <tmp_path>{r}/tmp/</tmp_path>
  <user_files_path>{r}/user_files/</user_files_path>
  <format_schema_path>{r}/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>{self.cluster.xml() if self.cluster else ""}
</yandex>
""")
        # A member's peers keep idle connections to it (a Distributed table's pool); a server
        # being stopped waits for each to notice, every poll_interval (10 s by default).
        profile = "<poll_interval>1</poll_interval>" if self.cluster else ""
        (r / "users.xml").write_text(f"""<?xml version="1.0"?>
<yandex>
  <profiles><default>{profile}</default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
""")

    # ---- lifecycle ----
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        """Starts the process without waiting for it (see wait_ready)."""
        assert not self.running(), f"{self.name} is already running"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [self.binary, f"--config-file={self.root / 'config.xml'}"], cwd=self.root,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent)

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def wait_ready(self, deadline_s: float = 60.0) -> None:
        """Until /ping answers; a cluster member also until it reaches ZooKeeper."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"clickhouse-server {self.name} exited "
                                   f"({self.proc.returncode}):\n{self.diagnostics()}")
            try:
                with urllib.request.urlopen(self.url + "ping", timeout=2) as resp:
                    if resp.read().strip() == b"Ok.":
                        if self.cluster is None:
                            return
                        self.query("SELECT count() FROM system.zookeeper WHERE path = '/'")
                        return
            except (urllib.error.URLError, ConnectionError, OSError, ClickHouseError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"clickhouse-server {self.name} not ready in {deadline_s} s:\n"
                           f"{self.diagnostics()}")

    def stop(self) -> None:
        """SIGTERM, and SIGKILL if it has not exited in 30 s."""
        if self.running():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL: a crash, as far as its data and its ZooKeeper session know."""
        if self.running():
            self.proc.kill()
            self.proc.wait(timeout=30)

    # ---- queries ----
    def query(self, sql: str, timeout: float = 60, **settings) -> str:
        """Runs one statement; its output (TabSeparated), or ClickHouseError."""
        url = self.url + ("?" + urllib.parse.urlencode(settings) if settings else "")
        req = urllib.request.Request(url, data=sql.encode())
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.read().decode()
        except urllib.error.HTTPError as e:
            raise ClickHouseError(e.code, e.read().decode(errors="replace")) from None

    def version(self) -> str:
        return self.query("SELECT version()").strip()

    # ---- diagnostics ----
    def rss_bytes(self) -> int:
        """The process's resident memory now (0 when not running)."""
        if not self.running():
            return 0
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def diagnostics(self) -> str:
        state = "not started" if self.proc is None else (
            f"pid {self.proc.pid} " + ("running" if self.proc.poll() is None
                                       else f"exited with {self.proc.returncode}"))
        parts = [f"--- clickhouse-server {self.name}: {state}, http {self.http_port}, "
                 f"tcp {self.tcp_port}, dir {self.root}"]
        for f in ("stdout.log", "error.log"):
            p = self.root / f
            if p.exists():
                parts.append(f"--- {self.name} {f}\n" + tail(p.read_text(errors="replace"), 3000))
        return "\n".join(parts)
