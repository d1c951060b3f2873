"""One known trace, sent by a real client, read back field by field.

Every emitter (emit_trace.py and the clients under clients/) sends the same
trace and prints a JSON description of exactly what it sent:
  {"trace_id", "spans": [{"span_id", "parent_span_id", "trace_id", "name",
   "kind", "service", "resource", "scope": {"name", "version"}, "attributes",
   "events": [{"name", "timestamp_ns", "attributes"}],
   "links": [{"trace_id", "span_id", "attributes"}],
   "status": {"code", "description"}, "trace_state", "start_ns", "end_ns"}],
   "failures": [...]}
Attribute values are plain JSON: a JSON integer is an int attribute, a number
with a fraction or exponent a double, arrays are arrays. `run_emitter` runs one
and `check_trace` compares what GET /api/traces/{id} returns with it, field by
field; `zipkin_description` turns the Zipkin v2 spans a Zipkin client sent into
that description, by spanhouse's documented mapping (src/codec/zipkin_mapping.h).
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest

from conftest import clean_env, describe_response, trace_span_ids

TAG_TYPE_OF = {bool: "bool", int: "int64", float: "float64", str: "string"}


def expected_tag(value):
    """(type, value) of the Jaeger tag for an SDK attribute value."""
    if isinstance(value, list):
        return "string", value  # JSON text; compared parsed (see check_tags)
    return TAG_TYPE_OF[type(value)], value


def tags_by_key(tags: list, where: str) -> dict:
    keys = [t.get("key") for t in tags]
    dups = [k for k, n in Counter(keys).items() if n > 1]
    assert not dups, f"{where}: duplicate tag keys {dups} in {tags}"
    return {t["key"]: t for t in tags}


def check_tag(tag: dict, want_type: str, want_value, where: str) -> None:
    key = tag["key"]
    assert tag.get("type") == want_type, \
        f"{where}: tag {key!r} has type {tag.get('type')!r}, want {want_type!r} (tag {tag})"
    got = tag.get("value")
    if isinstance(want_value, list):
        assert isinstance(got, str), f"{where}: sequence tag {key!r} must be JSON text, got {tag}"
        try:
            parsed = json.loads(got)
        except ValueError as e:
            raise AssertionError(f"{where}: sequence tag {key!r} is not valid JSON text: "
                                 f"{got!r} ({e})") from None
        assert parsed == want_value, \
            f"{where}: sequence tag {key!r} = {got!r}, want JSON of {want_value!r}"
        assert [type(x) is bool for x in parsed] == [type(y) is bool for y in want_value], \
            f"{where}: sequence tag {key!r} = {got!r}: bools and numbers mixed up"
        assert all(type(x) is int for x, y in zip(parsed, want_value) if type(y) is int), \
            f"{where}: sequence tag {key!r} = {got!r}: ints must stay integers"
        return
    if want_type == "bool":
        assert got is want_value, f"{where}: bool tag {key!r} = {got!r}, want {want_value!r}"
    elif want_type == "int64":
        # Beyond +-(2^53 - 1) a JavaScript client would round a JSON number: Jaeger (and
        # spanhouse) send such a value as a string of its digits.
        if abs(want_value) < 2 ** 53:
            assert type(got) is int and got == want_value, \
                f"{where}: int64 tag {key!r} = {got!r} ({type(got).__name__}), want the JSON " \
                f"number {want_value!r}"
        else:
            assert got == str(want_value), \
                f"{where}: int64 tag {key!r} = {got!r} ({type(got).__name__}), want the " \
                f"string {str(want_value)!r}"
    elif want_type == "float64":
        assert type(got) in (int, float) and float(got) == want_value, \
            f"{where}: float64 tag {key!r} = {got!r} ({type(got).__name__}), want the JSON " \
            f"number {want_value!r}"
    else:
        assert got == want_value, f"{where}: tag {key!r} = {got!r}, want {want_value!r}"


def check_tags(tags: list, want: dict, where: str) -> None:
    """`want` maps key -> (type, value); tags must hold exactly those keys."""
    got = tags_by_key(tags, where)
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    assert not missing and not extra, \
        f"{where}: tag keys differ: missing {missing}, unexpected {extra}; got tags {tags}"
    for key, (want_type, want_value) in want.items():
        check_tag(got[key], want_type, want_value, where)


def run_emitter(cmd: list, name: str, timeout: float = 120, cwd=None) -> dict:
    """Runs an emitter; asserts it exited 0 and returns its JSON description."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=clean_env(), cwd=cwd)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name} did not finish in {timeout:.0f}s; stdout: {e.stdout}\n"
                    f"stderr: {e.stderr}", pytrace=False)
    assert proc.returncode == 0, \
        f"{name} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    try:
        return json.loads(proc.stdout)
    except ValueError as e:
        raise AssertionError(f"{name} printed no JSON description ({e})\nstdout:\n"
                             f"{proc.stdout}\nstderr:\n{proc.stderr}") from None


def check_sent(sent: dict, services: set, kinds: set, min_spans: int = 5) -> None:
    """The description itself: one trace, distinct span ids, the services and kinds wanted."""
    spans = sent["spans"]
    assert not sent.get("failures"), f"export failures: {sent.get('failures')}"
    assert len(spans) >= min_spans, f"only {len(spans)} spans sent: {spans}"
    assert {s["trace_id"] for s in spans} == {sent["trace_id"]}, "spans of several traces sent"
    assert len({s["span_id"] for s in spans}) == len(spans), "span ids repeat"
    assert {s["service"] for s in spans} == services
    assert {s["kind"] for s in spans} == kinds


def want_span_tags(s: dict) -> dict:
    """Jaeger tags of a described span: attributes plus span.kind, status, scope, tracestate."""
    want = {k: expected_tag(v) for k, v in s["attributes"].items()}
    want["span.kind"] = ("string", s["kind"])
    if s["status"]["code"] == "ERROR":
        want["error"] = ("bool", True)
        want["otel.status_code"] = ("string", "ERROR")
    elif s["status"]["code"] == "OK":
        want["otel.status_code"] = ("string", "OK")
    if s["status"]["description"]:
        want["otel.status_description"] = ("string", s["status"]["description"])
    if s["scope"]["name"]:
        want["otel.scope.name"] = ("string", s["scope"]["name"])
    if s["scope"]["version"]:
        want["otel.scope.version"] = ("string", s["scope"]["version"])
    if s["trace_state"]:
        want["w3c.tracestate"] = ("string", s["trace_state"])
    return want


def check_trace(sh, sent: dict) -> None:
    """Reads sent["trace_id"] back from `sh` and checks every field of every span."""
    trace_id = sent["trace_id"]
    spans = sent["spans"]
    want_ids = {s["span_id"] for s in spans}
    sh.wait_for_trace(trace_id, lambda d: want_ids <= set(trace_span_ids(d)),
                      what=f"did not return all {len(want_ids)} spans")
    resp = sh.get_trace(trace_id)
    assert resp.status_code == 200, describe_response(resp)
    doc = resp.json()
    ctx = f"GET /api/traces/{trace_id}"

    # Envelope.
    assert doc.get("errors") is None, f"{ctx}: errors {doc.get('errors')}"
    for k in ("total", "limit", "offset"):
        assert k in doc, f"{ctx}: envelope lacks {k!r}: {list(doc)}"
    assert isinstance(doc.get("data"), list) and len(doc["data"]) == 1, \
        f"{ctx}: want exactly one trace in data, got {len(doc.get('data') or [])}"
    jt = doc["data"][0]
    assert jt["traceID"] == trace_id, f"{ctx}: traceID {jt['traceID']!r}, want {trace_id!r}"

    # Every span exactly once.
    ids = [s["spanID"] for s in jt["spans"]]
    dups = [i for i, n in Counter(ids).items() if n > 1]
    assert not dups, f"{ctx}: spans returned more than once: {dups}"
    assert set(ids) == want_ids, \
        f"{ctx}: span ids differ: missing {want_ids - set(ids)}, unexpected {set(ids) - want_ids}"

    # Processes: one per service, with the resource attributes as typed tags.
    resources = {s["service"]: s["resource"] for s in spans}
    processes = jt["processes"]
    assert isinstance(processes, dict) and len(processes) == len(resources), \
        f"{ctx}: want {len(resources)} processes, got {processes}"
    by_service = {}
    for pid, proc in processes.items():
        assert proc["serviceName"] not in by_service, f"{ctx}: service twice in {processes}"
        by_service[proc["serviceName"]] = pid
    assert set(by_service) == set(resources), f"{ctx}: processes {processes}"
    for service, resource in resources.items():
        want = {k: expected_tag(v) for k, v in resource.items() if k != "service.name"}
        check_tags(processes[by_service[service]]["tags"], want, f"{ctx}: process of {service}")

    got_spans = {s["spanID"]: s for s in jt["spans"]}
    want_parent = {s["span_id"]: s["parent_span_id"] for s in spans}
    got_parent = {}
    for s in spans:
        sid = s["span_id"]
        g = got_spans[sid]
        where = f"{ctx}: span {sid} ({s['name']!r}, {s['service']})"
        assert g["traceID"] == trace_id, f"{where}: traceID {g['traceID']!r}"
        assert g["operationName"] == s["name"], f"{where}: operationName {g['operationName']!r}"
        # flags: left out when 0, as Jaeger does
        assert type(g.get("flags", 1)) is int and g.get("flags", 1) != 0, \
            f"{where}: flags {g.get('flags')!r}"
        assert g["processID"] == by_service[s["service"]], \
            f"{where}: processID {g['processID']!r}, want {by_service[s['service']]!r}"

        # Times: µs, truncated.
        assert g["startTime"] == s["start_ns"] // 1000, \
            f"{where}: startTime {g['startTime']}, want {s['start_ns'] // 1000} (from " \
            f"{s['start_ns']} ns)"
        want_dur = (s["end_ns"] - s["start_ns"]) // 1000
        assert g["duration"] == want_dur, \
            f"{where}: duration {g['duration']}, want {want_dur} µs ({s['start_ns']}..{s['end_ns']} ns)"

        # References: parent first as CHILD_OF, then each link as FOLLOWS_FROM.
        want_refs = []
        if s["parent_span_id"]:
            want_refs.append({"refType": "CHILD_OF", "traceID": trace_id,
                              "spanID": s["parent_span_id"]})
        for link in s["links"]:
            want_refs.append({"refType": "FOLLOWS_FROM", "traceID": link["trace_id"],
                              "spanID": link["span_id"]})
        assert g["references"] == want_refs, \
            f"{where}: references {g['references']}, want {want_refs}"
        child_of = [r["spanID"] for r in g["references"] if r["refType"] == "CHILD_OF"]
        got_parent[sid] = child_of[0] if child_of else ""

        # Tags: attributes plus span.kind, status, scope, tracestate; nothing else.
        check_tags(g["tags"], want_span_tags(s), where)

        # Events -> logs, in order.
        logs = g.get("logs") or []
        assert len(logs) == len(s["events"]), \
            f"{where}: {len(logs)} logs, want {len(s['events'])}: {logs}"
        for i, (log, ev) in enumerate(zip(logs, s["events"])):
            lwhere = f"{where}: log {i} (event {ev['name']!r})"
            assert log["timestamp"] == ev["timestamp_ns"] // 1000, \
                f"{lwhere}: timestamp {log['timestamp']}, want {ev['timestamp_ns'] // 1000}"
            fields = log["fields"]
            assert fields and fields[0].get("key") == "event" and \
                fields[0].get("value") == ev["name"] and fields[0].get("type") == "string", \
                f"{lwhere}: first field must be the event name, got {fields}"
            check_tags(fields[1:], {k: expected_tag(v) for k, v in ev["attributes"].items()},
                       lwhere)

        assert g.get("warnings") in (None, []), f"{where}: warnings {g.get('warnings')}"

    # The parent/child tree, and that the statuses are where they were set.
    assert got_parent == want_parent, f"{ctx}: tree {got_parent}, want {want_parent}"
    roots = [sid for sid, p in want_parent.items() if not p]
    assert len(roots) == 1, f"{ctx}: want one root span, the description has {roots}"
    errors = sorted(sid for sid, g in got_spans.items()
                    if any(t["key"] == "error" for t in g["tags"]))
    assert errors == sorted(s["span_id"] for s in spans if s["status"]["code"] == "ERROR"), \
        f"{ctx}: error tags on {errors}"


# ---- Zipkin v2 -> the description, by spanhouse's mapping ----

ZIPKIN_KINDS = {"CLIENT": "client", "SERVER": "server", "PRODUCER": "producer",
                "CONSUMER": "consumer"}


def zipkin_span_description(z: dict) -> dict:
    """What spanhouse should store for one Zipkin v2 span (src/codec/zipkin_mapping.h)."""
    tags = dict(z.get("tags") or {})
    local = z.get("localEndpoint") or {}
    remote = z.get("remoteEndpoint") or {}
    kind = ZIPKIN_KINDS.get(z.get("kind", ""), "")
    if not kind:
        kind = tags.pop("span.kind", "internal") or "internal"
    status = {"code": "UNSET", "description": ""}
    if "error" in tags:
        value = tags.pop("error")
        if value != "false":
            status = {"code": "ERROR", "description": "" if value in ("", "true") else value}
    # Endpoints: the current semantic conventions; a tag with the same key wins.
    attrs = {}
    for endpoint, addr_key, port_key in ((local, "network.local.address", "network.local.port"),
                                         (remote, "network.peer.address", "network.peer.port")):
        if endpoint.get("ipv4") or endpoint.get("ipv6"):
            attrs[addr_key] = endpoint.get("ipv4") or endpoint.get("ipv6")
        if endpoint.get("port", 0) > 0:
            attrs[port_key] = endpoint["port"]
    if remote.get("serviceName"):
        attrs["service.peer.name"] = remote["serviceName"]
    attrs.update(tags)  # Zipkin tags are strings: string attributes
    if z.get("debug"):
        attrs["zipkin.debug"] = True
    if z.get("shared"):
        attrs["zipkin.shared"] = True
    start_ns = z["timestamp"] * 1000
    trace_id = z["traceId"].rjust(32, "0")
    return {
        "trace_id": trace_id,
        "span_id": z["id"].rjust(16, "0"),
        "parent_span_id": z.get("parentId", "").rjust(16, "0") if z.get("parentId") else "",
        "name": z.get("name", ""),
        "kind": kind,
        "service": local.get("serviceName", ""),
        "resource": {"service.name": local.get("serviceName", "")},
        "scope": {"name": "", "version": ""},
        "attributes": attrs,
        "events": [{"name": a["value"], "timestamp_ns": a["timestamp"] * 1000, "attributes": {}}
                   for a in z.get("annotations") or []],
        "links": [],
        "status": status,
        "trace_state": "",
        "start_ns": start_ns,
        "end_ns": start_ns + z.get("duration", 0) * 1000,
    }


def zipkin_description(sent: dict) -> dict:
    """A Zipkin emitter's output ({"zipkin_spans": [...], "failures"}) as a description."""
    spans = [zipkin_span_description(z) for z in sent["zipkin_spans"]]
    trace_ids = {s["trace_id"] for s in spans}
    assert len(trace_ids) == 1, f"the Zipkin client sent several traces: {trace_ids}"
    return {"trace_id": trace_ids.pop(), "spans": spans, "failures": sent.get("failures", [])}
