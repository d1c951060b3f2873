"""A real ClickHouse server for the tests: Debian's clickhouse-server (scripts/setup.sh --tests
installs it), started on free loopback ports in a directory of its own, with a config written
here, and stopped at the end. Queries go over its HTTP interface."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from conftest import _die_with_parent, free_ports, tail

SERVER_BIN = "/usr/sbin/clickhouse-server"


class ClickHouseError(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(f"HTTP {status}: {text}")
        self.status = status
        self.text = text


class ClickHouseServer:
    def __init__(self, root: Path, name: str = "ch"):
        binary = shutil.which("clickhouse-server") or SERVER_BIN
        if not Path(binary).exists():
            raise RuntimeError("clickhouse-server is not installed: run scripts/setup.sh --tests")
        self.root = root / name
        self.root.mkdir(parents=True, exist_ok=True)
        self.http_port, self.tcp_port, self.interserver_port = free_ports(3)
        self.url = f"http://127.0.0.1:{self.http_port}/"
        self._write_config()
        self.log = self.root / "stdout.log"
        self.proc = subprocess.Popen(
            [binary, f"--config-file={self.root / 'config.xml'}"], cwd=self.root,
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent)
        self._wait_ready()

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
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
""")
        (r / "users.xml").write_text("""<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
""")

    def _wait_ready(self, deadline_s: float = 60.0) -> None:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"clickhouse-server exited ({self.proc.returncode}):\n"
                                   f"{self.diagnostics()}")
            try:
                with urllib.request.urlopen(self.url + "ping", timeout=2) as resp:
                    if resp.read().strip() == b"Ok.":
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"clickhouse-server not ready in {deadline_s} s:\n{self.diagnostics()}")

    def query(self, sql: str, **settings) -> str:
        """Runs one statement; its output (TabSeparated), or ClickHouseError."""
        url = self.url + ("?" + urllib.parse.urlencode(settings) if settings else "")
        req = urllib.request.Request(url, data=sql.encode())
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.read().decode()
        except urllib.error.HTTPError as e:
            raise ClickHouseError(e.code, e.read().decode(errors="replace")) from None

    def version(self) -> str:
        return self.query("SELECT version()").strip()

    def diagnostics(self) -> str:
        parts = []
        for f in ("stdout.log", "error.log"):
            p = self.root / f
            if p.exists():
                parts.append(f"--- {f}\n" + tail(p.read_text(errors="replace"), 3000))
        return "\n".join(parts)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
