"""What the reference programs the tests run from a configuration file share (Jaeger, the
OpenTelemetry Collector): a directory of their own, the file written again at each start with
the ports chosen, free loopback ports picked at the first start (again if one was taken
meanwhile), the wait until the program is ready, and a factory that stops every instance at
teardown.

A subclass sets PORT_NAMES, `binary`, `log_path`'s file name (LOG_NAME), `config()`,
`_wait_ready(deadline_s)` (ready?, what was seen last), `not_ready(deadline_s, last)` (the
message when it did not get there) and `diagnostics()`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Optional

from conftest import _die_with_parent, clean_env, free_ports
from managed_process import ManagedProcess


def cached_binary(env_var: str, name: str, version: str) -> Path:
    """$env_var, or the build the setup scripts keep at
    ${XDG_CACHE_HOME:-~/.cache}/spanhouse/<name>-<version>/<name>."""
    if os.environ.get(env_var):
        return Path(os.environ[env_var])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "spanhouse" / f"{name}-{version}" / name


def not_built(path: Path, what: str, how: str) -> Optional[str]:
    """None when `path` is an executable; else why `what` cannot run and `how` to build it."""
    if path.is_file() and os.access(path, os.X_OK):
        return None
    return f"{what} is not built ({path} missing): {how}"


class ConfiguredProgram(ManagedProcess):
    PORT_NAMES: tuple[str, ...] = ()
    LOG_NAME = "program.log"

    def _init_files(self, root: Path, name: str) -> None:
        self.name = name
        self.root = Path(root) / name
        self.root.mkdir(parents=True, exist_ok=True)
        self.config_path = self.root / "config.yaml"
        self.log_path = self.root / self.LOG_NAME
        self.proc: Optional[subprocess.Popen] = None
        self.ports: dict[str, int] = {}
        self.starts = 0
        self.exit_codes: list[int] = []

    # conftest.py's failure hook shows the log of what a test's factories started.
    @property
    def stderr_path(self) -> Path:
        return self.log_path

    def config(self) -> dict:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def command(self) -> list[str]:
        return [str(self.binary), "--config", f"file:{self.config_path}"]

    def start(self, deadline_s: Optional[float] = None):
        """Starts the program and waits until it is ready; raises with the log's tail if it
        does not get there. The first start picks free ports (again, if one was taken
        meanwhile); later ones keep them. The file is JSON, which these programs read as
        YAML."""
        deadline_s = self.ready_deadline_s if deadline_s is None else deadline_s
        assert not self.running(), f"{self.name} is already running"
        keep = bool(self.ports)
        for attempt in range(3):
            if not keep or attempt > 0:
                self.ports = dict(zip(self.PORT_NAMES, free_ports(len(self.PORT_NAMES))))
            self.config_path.write_text(json.dumps(self.config(), indent=2) + "\n")
            self.starts += 1
            with open(self.log_path, "ab") as log:
                log.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
                self.proc = subprocess.Popen(
                    self.command(), cwd=self.root, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, env=clean_env(), preexec_fn=_die_with_parent)
            ready, last = self._wait_ready(deadline_s)
            if ready:
                return self
            if self.proc.poll() is not None and "address already in use" in self.log_text():
                self.exit_codes.append(self.proc.returncode)
                continue
            break
        if self.proc.poll() is None:
            msg = self.not_ready(deadline_s, last)
            self.kill()
        else:
            self.exit_codes.append(self.proc.returncode)
            msg = f"{self.name} exited with {self.proc.returncode} before it was ready"
        raise RuntimeError(f"{msg}\n{self.diagnostics()}")

    @staticmethod
    def _accepts(port: int) -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return True
        except OSError:
            return False


class ProgramFactory:
    """Programs of one kind under one directory, all stopped at teardown (conftest.py's
    fixtures). conftest.py's failure hook reads .instances, as it does a
    SpanhouseFactory's."""

    def __init__(self, root: Path, make):
        self.root = Path(root)
        self.make = make  # make(root, name=..., start=False, **kwargs) -> ConfiguredProgram
        self.instances: list[ConfiguredProgram] = []

    def _add(self, name: str, start: bool, *args, **kwargs):
        p = self.make(self.root, *args, name=name, start=False, **kwargs)
        self.instances.append(p)
        if start:
            p.start()
        return p

    def teardown(self) -> None:
        for p in self.instances:
            try:
                p.stop()
            finally:
                p.kill()
