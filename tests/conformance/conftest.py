"""The conformance suite's set-up: Jaeger v2 (the reference), spanhouse reading from ClickHouse
(embedded) and, after a switch of its read source, from OpenSearch (a real OpenSearch 2.19 node
its secondary sink dual-writes in Jaeger's format), all on free loopback ports; the same spans
sent to Jaeger and spanhouse through one OTLP fan-out proxy.

The end-to-end suite's helpers and fixtures (tests/e2e/conftest.py and its modules) are reused:
that conftest is loaded under the name e2e_conftest and everything in it is re-exported here,
since the e2e modules import their helpers `from conftest`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

E2E = Path(__file__).resolve().parent.parent / "e2e"
sys.path.insert(0, str(E2E))
sys.path.insert(0, str(Path(__file__).resolve().parent))

_spec = importlib.util.spec_from_file_location("e2e_conftest", E2E / "conftest.py")
_e2e = importlib.util.module_from_spec(_spec)
sys.modules["e2e_conftest"] = _e2e
_spec.loader.exec_module(_e2e)
globals().update({k: v for k, v in vars(_e2e).items() if not k.startswith("__")})
