"""A real ClickHouse cluster for the tests: S shards x R replicas of Debian's clickhouse-server
(18.16) and one standalone ZooKeeper (Debian's zookeeper package), all on free loopback ports
in directories of their own. scripts/setup.sh --tests installs both.

Replicated tables and ON CLUSTER DDL only behave like production when there really are several
servers coordinating through a real ZooKeeper: parts fetched between replicas, blocks
deduplicated by their ZooKeeper entries, a crashed replica catching up from the log. A mock
shows none of that, so the cluster tests run the real thing; 4 servers and ZooKeeper start in a
few seconds and take a few hundred MB."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Optional

from clickhouse_server import ClickHouseServer, ClusterSettings, replica_name
from conftest import _die_with_parent, free_ports, tail

# Debian's zookeeper package: the server's jar (its manifest's Class-Path names the jars it
# needs) and slf4j-simple, a dependency of it, so the server logs to stderr (our log file)
# instead of nowhere.
ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeper:
    """One standalone ZooKeeper server on a free loopback port, its data in its own directory.

    Its clients' shortest session is 2 ticks: the tick is short so that the ClickHouse servers
    may ask for a short session, which a SIGKILLed replica's restart has to outwait."""

    TICK_MS = 500

    def __init__(self, root: Path, name: str = "zk", port: Optional[int] = None,
                 start: bool = True):
        self.java = shutil.which("java") or "/usr/bin/java"
        missing = [p for p in (self.java,) + ZOOKEEPER_JARS if not Path(p).exists()]
        if missing:
            raise RuntimeError(f"ZooKeeper is not installed ({', '.join(missing)} missing): "
                               "run scripts/setup.sh --tests")
        self.name = name
        self.root = root / name
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        self.port = port or free_ports(1)[0]
        self.log = self.root / "zookeeper.log"
        self.proc: Optional[subprocess.Popen] = None
        (self.root / "zoo.cfg").write_text(
            f"dataDir={self.root / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            f"tickTime={self.TICK_MS}\n"
            "maxClientCnxns=0\n"
            # No Jetty admin server on 8080: it would collide with anything else there.
            "admin.enableServer=false\n"
            # The four-letter words wait_ready and the tests use (3.5+ allows only srvr).
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons\n")
        if start:
            self.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        assert not self.running(), "ZooKeeper is already running"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [self.java, "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC",
                 "-Djava.net.preferIPv4Stack=true", "-cp", ":".join(ZOOKEEPER_JARS),
                 ZOOKEEPER_MAIN, str(self.root / "zoo.cfg")],
                cwd=self.root, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent)
        self.wait_ready()

    def four_letter(self, word: str, timeout: float = 2.0) -> str:
        """A four-letter-word command's answer (ruok, srvr, mntr...)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(word.encode())
            s.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def wait_ready(self, deadline_s: float = 60.0) -> None:
        """Until srvr reports a mode: `ruok` says imok before the server serves requests."""
        deadline = time.monotonic() + deadline_s
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited ({self.proc.returncode}):\n"
                                   f"{self.diagnostics()}")
            try:
                last = self.four_letter("srvr")
                if "Mode: standalone" in last:
                    return
            except OSError as e:
                last = f"{type(e).__name__}: {e}"
            time.sleep(0.1)
        raise RuntimeError(f"ZooKeeper not ready in {deadline_s} s (srvr: {last}):\n"
                           f"{self.diagnostics()}")

    def stop(self) -> None:
        if self.running():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def diagnostics(self) -> str:
        state = "not started" if self.proc is None else (
            f"pid {self.proc.pid} " + ("running" if self.proc.poll() is None
                                       else f"exited with {self.proc.returncode}"))
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no log)"
        return f"--- ZooKeeper {self.address}: {state}, dir {self.root}\n{tail(text, 3000)}"


class ClickHouseCluster:
    """`shards` x `replicas` clickhouse-servers in one cluster (named `name`) and a ZooKeeper.

    Every member's ports are allocated first, since each config lists every member's tcp port;
    then ZooKeeper starts, then all servers in parallel. Indices are 0-based:
    servers[shard][replica]; the servers' macros are shard "1".."S" and replica "s1r1"...

    The cluster's shards have internal_replication, as Replicated tables need: a Distributed
    table writes a block to one replica of its shard, and the replicas copy it between them.
    ZooKeeper grants sessions of 1 to 10 s (2 and 20 ticks); a longer one is cut to 10 s."""

    def __init__(self, root: Path, shards: int = 2, replicas: int = 2, name: str = "spanhouse",
                 zookeeper_session_timeout_ms: int = 4000):
        root.mkdir(parents=True, exist_ok=True)
        self.name = name
        ports = free_ports(1 + 3 * shards * replicas)
        self.zookeeper = ZooKeeper(root, port=ports[0], start=False)
        server_ports = [[tuple(ports[1 + 3 * (s * replicas + r):][:3]) for r in range(replicas)]
                        for s in range(shards)]
        tcp_ports = tuple(tuple(p[1] for p in shard) for shard in server_ports)
        self.servers: list[list[ClickHouseServer]] = [
            [ClickHouseServer(
                root, name=replica_name(s, r), ports=server_ports[s][r], start=False,
                cluster=ClusterSettings(name=name, tcp_ports=tcp_ports, shard=s, replica=r,
                                        zookeeper_port=self.zookeeper.port,
                                        zookeeper_session_timeout_ms=zookeeper_session_timeout_ms))
             for r in range(replicas)]
            for s in range(shards)]
        try:
            self.zookeeper.start()
            self._start_all(self.all_servers())
        except BaseException:
            self.stop()
            raise

    # ---- members ----
    def all_servers(self) -> list[ClickHouseServer]:
        return [srv for shard in self.servers for srv in shard]

    def server(self, shard: int, replica: int) -> ClickHouseServer:
        return self.servers[shard][replica]

    @property
    def shards(self) -> int:
        return len(self.servers)

    @property
    def replicas(self) -> int:
        return len(self.servers[0])

    # ---- lifecycle ----
    @staticmethod
    def _start_all(servers: list[ClickHouseServer]) -> None:
        """Spawns them all, then waits for each: the servers start side by side."""
        for srv in servers:
            srv.spawn()
        with ThreadPoolExecutor(len(servers)) as pool:
            for f in [pool.submit(srv.wait_ready) for srv in servers]:
                f.result()

    def kill(self, shard: int, replica: int) -> None:
        """SIGKILLs one server: its ZooKeeper session stays until it times out."""
        self.servers[shard][replica].kill()

    def stop_server(self, shard: int, replica: int) -> None:
        """SIGTERMs one server: it closes its ZooKeeper session on the way out."""
        self.servers[shard][replica].stop()

    def start(self, shard: int, replica: int) -> None:
        """Starts one stopped or killed server again: same data directory, same ports.

        Right after a kill, its Replicated tables stay read-only (and do not fetch) until the
        killed process's ZooKeeper session expires and the table's restart, retried every
        10 s in 18.16, succeeds: poll (wait_for) for what it should have fetched."""
        self.servers[shard][replica].start()

    def stop_shard(self, shard: int) -> None:
        with ThreadPoolExecutor(self.replicas) as pool:
            list(pool.map(ClickHouseServer.stop, self.servers[shard]))

    def start_shard(self, shard: int) -> None:
        self._start_all([srv for srv in self.servers[shard] if not srv.running()])

    def stop(self) -> None:
        """Every server (SIGTERM, in parallel), then ZooKeeper."""
        with ThreadPoolExecutor(len(self.all_servers())) as pool:
            list(pool.map(ClickHouseServer.stop, self.all_servers()))
        self.zookeeper.stop()

    # ---- queries ----
    def on_cluster(self, sql: str, timeout: float = 120) -> str:
        """Runs a DDL statement (with its ON CLUSTER clause) from the first server: it returns
        once every member has run it, one row per member."""
        return self.servers[0][0].query(sql, timeout=timeout)

    def wait_for(self, what: str, check: Callable[[], bool], deadline_s: float = 45.0,
                 interval_s: float = 0.1) -> float:
        """Polls check() until it holds; the seconds that took. AssertionError with the
        cluster's diagnostics when it does not hold in deadline_s."""
        start = time.monotonic()
        last_error = ""
        while True:
            try:
                if check():
                    return time.monotonic() - start
            except Exception as e:  # noqa: BLE001 - a query may fail while a replica starts
                last_error = f" (last error: {type(e).__name__}: {e})"
            if time.monotonic() - start > deadline_s:
                raise AssertionError(f"{what}: not within {deadline_s:.0f} s{last_error}\n"
                                     f"{self.diagnostics()}")
            time.sleep(interval_s)

    # ---- diagnostics ----
    def rss_bytes(self) -> dict:
        """Resident memory of every running member, by name (ZooKeeper as "zk")."""
        out = {srv.name: srv.rss_bytes() for srv in self.all_servers()}
        if self.zookeeper.running():
            status = Path(f"/proc/{self.zookeeper.proc.pid}/status").read_text()
            out[self.zookeeper.name] = next(int(line.split()[1]) * 1024
                                            for line in status.splitlines()
                                            if line.startswith("VmRSS:"))
        return out

    def diagnostics(self) -> str:
        return "\n".join([self.zookeeper.diagnostics()]
                         + [srv.diagnostics() for srv in self.all_servers()])
