"""A real OpenSearch 2.19.6 for the tests: one node, started by tests/opensearch's launcher
(scripts/setup.sh --tests builds it from Maven Central's jars) on the machine's Java 17, on free
loopback ports, its home and data in a directory of its own.

The node is a separate JVM: stop() sends SIGTERM (the launcher closes the node and exits 0),
kill() SIGKILL; start() again runs it on the same ports and the same data, so a test can take
it away for a while and find its documents when it comes back. Requests go over its REST API
with `requests`; the helpers raise OpenSearchError on an answer that is not 2xx.

A node starts in 5-10 s and holds about 250-300 MB resident; the `opensearch` fixture
(conftest.py) shares one per module."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterable, Optional, Union

import requests

from conftest import REPO_ROOT, _die_with_parent, describe_response, free_ports, tail
from managed_process import ManagedProcess

LAUNCHER_DIR = REPO_ROOT / "tests" / "opensearch" / "target"
LAUNCHER_JAR = LAUNCHER_DIR / "opensearch-launcher.jar"
LAUNCHER_LIB = LAUNCHER_DIR / "lib"
LAUNCHER_MAIN = "dev.spanhouse.test.OpenSearchLauncher"

READY_DEADLINE_S = 120.0
STOP_DEADLINE_S = 60.0

# The JVM's options. A small heap is plenty for tests. The locale providers are those
# OpenSearch's own jvm.options use on Java 9 to 22, so dates format and parse as in a real
# distribution. No --add-opens, no security manager: the node runs as an embedded one does.
JVM_OPTIONS = (
    "-Xms256m", "-Xmx768m",
    "-XX:+UseSerialGC",
    "-XX:-OmitStackTraceInFastThrow",
    "-Djava.locale.providers=SPI,COMPAT",
    "-Djava.net.preferIPv4Stack=true",
    "-Dfile.encoding=UTF-8",
    "-Dlog4j2.disable.jmx=true",
)


def launcher_missing() -> Optional[str]:
    """Why the node cannot be started here, or None."""
    missing = []
    if not shutil.which("java"):
        missing.append("java")
    if not LAUNCHER_JAR.is_file():
        missing.append(str(LAUNCHER_JAR.relative_to(REPO_ROOT)))
    if not LAUNCHER_LIB.is_dir() or not any(LAUNCHER_LIB.glob("opensearch-*.jar")):
        missing.append(str(LAUNCHER_LIB.relative_to(REPO_ROOT)) + "/opensearch-*.jar")
    if not missing:
        return None
    return (f"OpenSearch is not available: {', '.join(missing)} missing "
            "(scripts/setup.sh --tests builds tests/opensearch with Maven)")


class OpenSearchError(RuntimeError):
    def __init__(self, what: str, resp: requests.Response):
        super().__init__(f"{what}: {describe_response(resp)}")
        self.status = resp.status_code
        self.response = resp


class OpenSearch(ManagedProcess):
    """One OpenSearch node on one data directory (root/name), restartable on the same ports."""

    stop_deadline_s = STOP_DEADLINE_S

    def __init__(self, root: Path, start: bool = True, name: str = "opensearch",
                 http_port: Optional[int] = None, transport_port: Optional[int] = None):
        why = launcher_missing()
        if why:
            raise RuntimeError(why)
        self.java = shutil.which("java")
        self.name = name
        self.root = Path(root) / name
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)
        self.log_path = self.root / "opensearch.log"
        self._fixed_ports = http_port is not None or transport_port is not None
        if http_port is None or transport_port is None:
            ports = free_ports(2)
            http_port = http_port or ports[0]
            transport_port = transport_port or ports[1]
        self.http_port = http_port
        self.transport_port = transport_port
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0
        self.exit_codes: list[int] = []
        self.last_start_s = 0.0  # seconds the last start() took, until the cluster was yellow
        self.session = requests.Session()
        self.session.trust_env = False  # no proxy from the environment for 127.0.0.1
        if start:
            self.start()

    # ---- addresses ----
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    # ---- lifecycle ----
    def command(self) -> list[str]:
        classpath = f"{LAUNCHER_JAR}:{LAUNCHER_LIB}/*"
        return [self.java, *JVM_OPTIONS, f"-Djava.io.tmpdir={self.root / 'tmp'}",
                "-cp", classpath, LAUNCHER_MAIN,
                "--dir", str(self.root), "--http-port", str(self.http_port),
                "--transport-port", str(self.transport_port),
                "--cluster-name", "spanhouse-test", "--node-name", self.name]

    def start(self, deadline_s: float = READY_DEADLINE_S) -> "OpenSearch":
        """Starts the node and waits until the cluster is yellow; raises with the log's tail."""
        assert not self.running(), "OpenSearch is already running"
        for attempt in range(3):
            self.starts += 1
            began = time.monotonic()
            with open(self.log_path, "ab") as out:
                out.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
                out.flush()
                log_offset = out.tell()
                self.proc = subprocess.Popen(
                    self.command(), cwd=self.root, stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, env=self._env(), preexec_fn=_die_with_parent)
            state = self._wait_ready(deadline_s, log_offset)
            if state == "ready":
                self.last_start_s = time.monotonic() - began
                return self
            # A port taken between free_ports() and the bind, on a first start only: a restart
            # must keep its ports (a client under test knows them).
            if (state == "exited" and self.starts == 1 + attempt and not self._fixed_ports
                    and "ddress already in use" in self.log_text()):
                self.http_port, self.transport_port = free_ports(2)
                continue
            break
        if state == "exited":
            msg = f"OpenSearch exited with {self.proc.returncode} before the cluster was yellow"
        else:
            msg = f"OpenSearch's cluster was not yellow within {deadline_s:.0f} s"
        diagnostics = self.diagnostics()
        self.kill()
        raise RuntimeError(f"{msg}\n{diagnostics}")

    def _env(self) -> dict:
        env = dict(os.environ)
        # The JVM would take these as extra options; the node's are JVM_OPTIONS alone.
        for key in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH"):
            env.pop(key, None)
        return env

    def _started_line(self, log_offset: int) -> bool:
        """Whether this start's process has printed that its node serves HTTP: another node
        on the same port would otherwise pass for it."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(log_offset)
                return b"\nOPENSEARCH STARTED " in b"\n" + f.read()
        except OSError:
            return False

    def _wait_ready(self, deadline_s: float, log_offset: int) -> str:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.exit_codes.append(self.proc.returncode)
                return "exited"
            if not self._started_line(log_offset):
                time.sleep(0.2)
                continue
            try:
                r = self.session.get(f"{self.url}/_cluster/health",
                                     params={"wait_for_status": "yellow", "timeout": "2s"},
                                     timeout=5)
                if r.status_code == 200 and r.json().get("status") in ("yellow", "green"):
                    return "ready"
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.2)
        return "timeout"

    # ---- logs ----
    def diagnostics(self) -> str:
        return (f"--- OpenSearch {self.url} (transport {self.transport_port}): {self.state()}, "
                f"dir {self.root}, exit codes so far {self.exit_codes}\n"
                f"--- its log ({self.log_path}):\n{tail(self.log_text())}")

    # ---- REST ----
    def request(self, method: str, path: str, body: Union[None, dict, list, str, bytes] = None,
                params: Optional[dict] = None, ok: Iterable[int] = (), timeout: float = 60,
                headers: Optional[dict] = None) -> requests.Response:
        """One request; raises OpenSearchError unless the status is 2xx or in `ok`."""
        headers = dict(headers or {})
        data = body
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            data = body.encode()
        if data is not None:
            headers.setdefault("Content-Type", "application/json")
        resp = self.session.request(method, f"{self.url}/{path.lstrip('/')}", data=data,
                                    params=params, headers=headers, timeout=timeout)
        if not (200 <= resp.status_code < 300 or resp.status_code in ok):
            raise OpenSearchError(f"{method} {path}", resp)
        return resp

    def create_index(self, index: str, body: Optional[dict] = None) -> dict:
        return self.request("PUT", index, body or {}).json()

    def delete_index(self, index_pattern: str) -> None:
        """Deletes the matching indices; none matching is fine."""
        self.request("DELETE", index_pattern, ok=(404,),
                     params={"ignore_unavailable": "true", "allow_no_indices": "true",
                             "expand_wildcards": "all"})

    def bulk(self, lines: Union[str, bytes, Iterable[dict]], refresh: Optional[str] = None) -> dict:
        """POST /_bulk with NDJSON (a string, bytes, or the action and source objects in order);
        returns the parsed answer, whose per-item statuses the caller checks."""
        if isinstance(lines, (str, bytes)):
            data = lines.encode() if isinstance(lines, str) else lines
        else:
            data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        params = {"refresh": refresh} if refresh else None
        return self.request("POST", "_bulk", data, params=params,
                            headers={"Content-Type": "application/x-ndjson"}).json()

    def refresh(self, index_pattern: str = "_all") -> None:
        self.request("POST", f"{index_pattern}/_refresh",
                     params={"ignore_unavailable": "true", "allow_no_indices": "true"})

    def count(self, index_pattern: str, query: Optional[dict] = None, refresh: bool = True) -> int:
        """Documents matching `query` (all without one); 0 when no index matches. Refreshes
        first by default, so what was acknowledged is counted."""
        if refresh:
            self.refresh(index_pattern)
        body = {"query": query} if query is not None else None
        params = {"ignore_unavailable": "true", "allow_no_indices": "true"}
        resp = self.request("POST", f"{index_pattern}/_count", body, ok=(404, 503), params=params)
        if resp.status_code == 503:
            # An index another process has just created answers 503 until its primary shard
            # is started: wait for that, then count once more (a second 503 is an error).
            self.request("GET", f"_cluster/health/{index_pattern}",
                         params={"wait_for_status": "yellow", "timeout": "30s"})
            resp = self.request("POST", f"{index_pattern}/_count", body, ok=(404,), params=params)
        return 0 if resp.status_code == 404 else int(resp.json()["count"])

    def search(self, index_pattern: str, body: Optional[dict] = None,
               params: Optional[dict] = None) -> dict:
        """The parsed answer of POST /{index_pattern}/_search."""
        return self.request("POST", f"{index_pattern}/_search", body or {}, params=params).json()

    def hits(self, index_pattern: str, body: Optional[dict] = None) -> list[dict]:
        """The `_source`s of a search's hits."""
        return [h["_source"] for h in self.search(index_pattern, body)["hits"]["hits"]]

    def delete_by_query(self, index_pattern: str, query: Optional[dict] = None,
                        refresh: bool = True) -> int:
        """Deletes the matching documents (all without a query); returns how many."""
        params = {"conflicts": "proceed", "ignore_unavailable": "true",
                  "allow_no_indices": "true", "refresh": "true" if refresh else "false"}
        body = {"query": query if query is not None else {"match_all": {}}}
        return int(self.request("POST", f"{index_pattern}/_delete_by_query", body,
                                params=params).json().get("deleted", 0))

    def rss_kb(self) -> Optional[int]:
        """The node's resident memory in KiB (Linux), or None."""
        if not self.running():
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return None
