"""Field-by-field comparison of Jaeger API answers.

`canonical_*` rewrite an answer into a form where two answers that mean the same are equal:
only representation is touched (the order of spans in a trace and of traces in a list, which
the API leaves open, and the process numbering: "p1" in one answer may be "p2" in the other,
so each span carries its process inline). Everything else, including every deliberate
difference, is kept; differences.py decides what of that may differ. `diff` lists what differs,
one line per field, with its path."""

from __future__ import annotations

import json
from typing import Any


def canonical_trace(trace: dict) -> dict:
    processes = trace.get("processes") or {}
    spans = []
    for s in trace.get("spans") or []:
        s = dict(s)
        pid = s.pop("processID", None)
        s["process"] = processes.get(pid, {"missing processID": pid})
        spans.append(s)
    spans.sort(key=lambda s: (s.get("spanID", ""), s.get("startTime", 0)))
    out = {k: v for k, v in trace.items() if k not in ("spans", "processes")}
    out["spans"] = spans
    return out


def canonical_traces(answer: dict) -> dict[str, dict]:
    """The traces of a /api/traces answer by trace id (a search's order is the store's)."""
    return {t["traceID"]: canonical_trace(t) for t in answer.get("data") or []}


def _key_of(item: Any) -> str:
    if isinstance(item, dict):
        for k in ("spanID", "key", "name"):
            if k in item:
                return f"{k}={item[k]}"
    return ""


def diff(a: Any, b: Any, path: str = "", names: tuple[str, str] = ("jaeger", "spanhouse"),
         out: list[str] | None = None) -> list[str]:
    """The differences between a and b, one line each: `path: jaeger X != spanhouse Y`."""
    out = [] if out is None else out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else k
            if k not in a:
                out.append(f"{p}: only {names[1]} has it: {_short(b[k])}")
            elif k not in b:
                out.append(f"{p}: only {names[0]} has it: {_short(a[k])}")
            else:
                diff(a[k], b[k], p, names, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items in {names[0]} != {len(b)} in {names[1]}: "
                       f"{_short(a)} != {_short(b)}")
        else:
            for i, (x, y) in enumerate(zip(a, b)):
                key = _key_of(x)
                diff(x, y, f"{path}[{key or i}]", names, out)
    elif type(a) is not type(b) or a != b:
        out.append(f"{path}: {names[0]} {_short(a)} != {names[1]} {_short(b)}")
    return out


def _short(v: Any, n: int = 300) -> str:
    text = json.dumps(v, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= n else text[:n] + "..."
