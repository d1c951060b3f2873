"""Real search engines for the tests, one node each, started by an in-process launcher
(scripts/setup.sh --tests builds both from Maven Central's jars) on the machine's Java 17, on
free loopback ports, its home and data in a directory of its own:

  OpenSearch      2.19.6, tests/opensearch's launcher (what spanhouse migrates from)
  Elasticsearch   7.10.2, tests/elasticsearch's launcher (the OSS node, no x-pack: the last
                  Apache-2.0 Elasticsearch, the one OpenSearch forked; Jaeger's other store)

Both are a SearchNode: the same launcher command line, start/stop/kill and REST helpers; only
the launcher (its directory, jar, main class and the line it prints once serving) differs, in
an Engine. The node is a separate JVM: stop() sends SIGTERM (the launcher closes the node and
exits 0), kill() SIGKILL; start() again runs it on the same ports and the same data, so a test
can take it away for a while and find its documents when it comes back. Requests go over its
REST API with `requests`; the helpers raise OpenSearchError (either engine) on an answer that
is not 2xx, and read what both engines answer (total_hits(): hits.total as an object or a
number; Elasticsearch 7 also has `_type: _doc` in bulk items and hits, which nothing reads).

A node starts in 4-10 s and holds about 220-300 MB resident; conftest.py's `opensearch` and
`elasticsearch` fixtures share one per module, and `search_store` runs a test on each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Union

import requests

from conftest import REPO_ROOT, _die_with_parent, describe_response, free_ports, tail
from managed_process import ManagedProcess


@dataclass(frozen=True)
class Engine:
    """What tells one engine's launcher from the other's."""
    name: str     # "opensearch": tests/<name> holds its launcher; the fixture's name
    title: str    # "OpenSearch": in messages, and the launcher's class is <title>Launcher
    version: str  # what the launcher's pom pins: GET / must answer it

    @property
    def target(self) -> Path:
        return REPO_ROOT / "tests" / self.name / "target"

    @property
    def jar(self) -> Path:
        return self.target / f"{self.name}-launcher.jar"

    @property
    def lib(self) -> Path:
        return self.target / "lib"

    @property
    def server_jars(self) -> str:
        """A glob in lib/ that the server's own jar matches."""
        return f"{self.name}-[0-9]*.jar"

    @property
    def main_class(self) -> str:
        return f"dev.spanhouse.test.{self.title}Launcher"

    @property
    def started_line(self) -> bytes:
        """The start of the line the launcher prints once the node serves HTTP."""
        return f"{self.name.upper()} STARTED ".encode()


OPENSEARCH = Engine("opensearch", "OpenSearch", "2.19.6")
ELASTICSEARCH = Engine("elasticsearch", "Elasticsearch", "7.10.2")
ENGINES = {e.name: e for e in (OPENSEARCH, ELASTICSEARCH)}

READY_DEADLINE_S = 120.0
STOP_DEADLINE_S = 60.0

# The JVM's options, the same for both engines. A small heap is plenty for tests. The locale
# providers are those both engines' own jvm.options use on Java 9 and later, so dates format
# and parse as in a real distribution. No --add-opens, no security manager: the node runs as
# an embedded one does. Elasticsearch 7.10.2 (whose distribution bundled JDK 15) needs no
# extra flag on Java 17 when run so: no add-opens, netty falls back to its non-reflective paths.
JVM_OPTIONS = (
    "-Xms256m", "-Xmx768m",
    "-XX:+UseSerialGC",
    "-XX:-OmitStackTraceInFastThrow",
    "-Djava.locale.providers=SPI,COMPAT",
    "-Djava.net.preferIPv4Stack=true",
    "-Dfile.encoding=UTF-8",
    "-Dlog4j2.disable.jmx=true",
)


def launcher_missing(engine: str = "opensearch") -> Optional[str]:
    """Why a node of `engine` ("opensearch" or "elasticsearch") cannot be started here, or None."""
    e = ENGINES[engine]
    missing = []
    if not shutil.which("java"):
        missing.append("java")
    if not e.jar.is_file():
        missing.append(str(e.jar.relative_to(REPO_ROOT)))
    if not e.lib.is_dir() or not any(e.lib.glob(e.server_jars)):
        missing.append(str(e.lib.relative_to(REPO_ROOT)) + "/" + e.server_jars)
    if not missing:
        return None
    return (f"{e.title} is not available: {', '.join(missing)} missing "
            f"(scripts/setup.sh --tests builds tests/{e.name} with Maven)")


def total_hits(answer: dict) -> int:
    """hits.total of a search answer: an object {value, relation} by default in both engines,
    a number with rest_total_hits_as_int=true."""
    total = answer["hits"]["total"]
    return int(total["value"] if isinstance(total, dict) else total)


class OpenSearchError(RuntimeError):
    """A REST answer that was not 2xx, from either engine (the name predates Elasticsearch's)."""

    def __init__(self, what: str, resp: requests.Response):
        super().__init__(f"{what}: {describe_response(resp)}")
        self.status = resp.status_code
        self.response = resp


class SearchNode(ManagedProcess):
    """One node of `ENGINE` on one data directory (root/name), restartable on the same ports;
    OpenSearch and Elasticsearch below say which engine."""

    ENGINE: Engine
    stop_deadline_s = STOP_DEADLINE_S

    def __init__(self, root: Path, start: bool = True, name: Optional[str] = None,
                 http_port: Optional[int] = None, transport_port: Optional[int] = None):
        why = launcher_missing(self.engine)
        if why:
            raise RuntimeError(why)
        self.java = shutil.which("java")
        self.name = name or self.engine
        self.root = Path(root) / self.name
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)
        self.log_path = self.root / f"{self.engine}.log"
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
        self.version = ""  # version.number of GET /, once started
        self.session = requests.Session()
        self.session.trust_env = False  # no proxy from the environment for 127.0.0.1
        if start:
            self.start()

    @property
    def engine(self) -> str:
        """The engine's name: opensearch or elasticsearch."""
        return self.ENGINE.name

    @property
    def title(self) -> str:
        return self.ENGINE.title

    # ---- addresses ----
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    # ---- lifecycle ----
    def command(self) -> list[str]:
        classpath = f"{self.ENGINE.jar}:{self.ENGINE.lib}/*"
        return [self.java, *JVM_OPTIONS, f"-Djava.io.tmpdir={self.root / 'tmp'}",
                "-cp", classpath, self.ENGINE.main_class,
                "--dir", str(self.root), "--http-port", str(self.http_port),
                "--transport-port", str(self.transport_port),
                "--cluster-name", "spanhouse-test", "--node-name", self.name]

    def start(self, deadline_s: float = READY_DEADLINE_S) -> "SearchNode":
        """Starts the node and waits until the cluster is yellow; raises with the log's tail."""
        assert not self.running(), f"{self.title} is already running"
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
                self.version = self._check_engine()
                return self
            # A port taken between free_ports() and the bind, on a first start only: a restart
            # must keep its ports (a client under test knows them).
            if (state == "exited" and self.starts == 1 + attempt and not self._fixed_ports
                    and "ddress already in use" in self.log_text()):
                self.http_port, self.transport_port = free_ports(2)
                continue
            break
        if state == "exited":
            msg = (f"{self.title} exited with {self.proc.returncode} before the cluster "
                   "was yellow")
        else:
            msg = f"{self.title}'s cluster was not yellow within {deadline_s:.0f} s"
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
                return b"\n" + self.ENGINE.started_line in b"\n" + f.read()
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

    def _check_engine(self) -> str:
        """The version GET / answers, which must be this engine's: OpenSearch says so in
        version.distribution, Elasticsearch 7 has no such field."""
        about = self.request("GET", "/").json()
        version = about["version"]
        engine = ("opensearch" if version.get("distribution") == "opensearch"
                  else "elasticsearch")
        if engine != self.engine or version["number"] != self.ENGINE.version:
            self.kill()
            raise RuntimeError(f"{self.url} is {engine} {version['number']}, not "
                               f"{self.engine} {self.ENGINE.version}: {about}")
        return version["number"]

    # ---- logs ----
    def diagnostics(self) -> str:
        return (f"--- {self.title} {self.url} (transport {self.transport_port}): {self.state()}, "
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


class OpenSearch(SearchNode):
    """One OpenSearch 2.19.6 node (tests/opensearch's launcher)."""

    ENGINE = OPENSEARCH


class Elasticsearch(SearchNode):
    """One Elasticsearch 7.10.2 node (tests/elasticsearch's launcher, no x-pack)."""

    ENGINE = ELASTICSEARCH


NODE_CLASSES: dict[str, type[SearchNode]] = {"opensearch": OpenSearch,
                                             "elasticsearch": Elasticsearch}
