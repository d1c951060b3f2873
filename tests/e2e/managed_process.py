"""What the servers the tests start (Jaeger, OpenSearch) share: one subprocess at a time (and
its restarts), the exit codes so far, and a log file where each exit is marked.

A subclass sets `proc`, `exit_codes` and `log_path`, and defines `start()` and its
`stop_deadline_s` (how long a SIGTERM may take before SIGKILL)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Optional


class ManagedProcess:
    proc: Optional[subprocess.Popen] = None
    exit_codes: list[int]
    log_path: Path
    stop_deadline_s: float = 30.0

    def start(self):  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _mark(self, what: str) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"===== {what}\n".encode())

    def stop(self, timeout: Optional[float] = None) -> Optional[int]:
        """SIGTERM, then SIGKILL if it has not exited after `timeout` (stop_deadline_s); the
        exit code (0 after a clean stop), None if it was never started."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_deadline_s if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
            self.exit_codes.append(self.proc.returncode)
            self._mark(f"exited with {self.proc.returncode}")
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: no flush, no close."""
        if self.running():
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.exit_codes.append(self.proc.returncode)
            self._mark(f"killed ({self.proc.returncode})")

    def restart(self):
        self.stop()
        return self.start()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"

    def state(self) -> str:
        if self.proc is None:
            return "not started"
        rc = self.proc.poll()
        return f"pid {self.proc.pid} " + ("running" if rc is None else f"exited with {rc}")
