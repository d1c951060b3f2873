"""Every way spanhouse's Jaeger API answers may differ from Jaeger v2's, each with its reason.

The conformance suite compares the two answers after these functions; nothing else is
normalised. A difference listed here is a decision (the README's API section lists the ones a
user can see); one that is not is a defect. Each function takes Jaeger's answer and spanhouse's
(canonical_traces form for traces) and returns them as the comparison sees them."""

from __future__ import annotations

import copy
import re

# ---- order the API leaves open ----

ORDER = """Lists whose order Jaeger's API does not define are compared as sets: the services,
the operations, the dependency edges, and a search's traces (by id, compare.canonical_traces;
a search's order is the store's)."""


def _sorted(items: list, key=None) -> list:
    return sorted(items, key=key or (lambda x: repr(x)))


# ---- traces ----

TAG_ORDER = """Tags (and log fields, and process tags) are compared as sorted by key: Jaeger's
OTLP translator sorts them; spanhouse keeps the order the client sent, which is how the
instrumentation grouped them and what the web UI shows (the Jaeger UI sorts them itself)."""

FLAGS = """spanhouse answers a span's W3C trace flags (`flags`, bit 0: sampled) as the client sent
them; Jaeger v2's OTLP translator does not carry them over, so its spans have none (`flags`
left out). Flags that are not 0 are removed from spanhouse's side (both leave out 0)."""

DROPPED_COUNTS = """OTLP's dropped counts (of a span's attributes, events and links, and of an
event's attributes) are tags in spanhouse (`otel.dropped_attributes_count`,
`otel.dropped_events_count`, `otel.dropped_links_count`): a reader should know a span is not
whole. Jaeger v2 drops them. Removed from spanhouse's side."""

EVENT_ATTRIBUTE = """An event attribute named `event`: Jaeger writes the event's name as the field
`event` and lets the attribute overwrite it, so the name is lost; spanhouse keeps both (the name
first). The first of two `event` fields is removed from spanhouse's side."""

ADJUSTERS = """Jaeger's query service adjusts spans on the way out and says so in their
`warnings`: a span whose end is not after its start gets 1 ns more ("Negative duration
detected, sanitizing end timestamp ..."; in microseconds its duration stays 0), and a span whose
parent is not in the trace is left out of the clock-skew adjustment ("invalid parent span
IDs=...; skipping clock skew adjustment"). spanhouse answers spans as stored: no adjustment, so
no such warnings. Those two warnings are removed from Jaeger's side."""

FLOAT_SPELLING = """A float64 tag's value is compared as a number: Go's encoder writes -2.5e20 as
-250000000000000000000, spanhouse as -2.5e+20 (the shortest text that reads back as the same
double); every JSON reader gets the same double from both."""

SYNTHETIC_TAG_SEARCH = """A search by a tag the trace view shows but the span does not carry as an
attribute (`error`, `span.kind`, `otel.status_code`): Jaeger v2's memory store matches a search's
tags against attributes only and finds nothing; its Badger, Elasticsearch and OpenSearch stores,
and spanhouse, match the tags as the trace shows them. For these searches Jaeger's answer is taken
as its search without that tag, filtered by the tag as Jaeger's own answer shows the spans
(`filter_by_shown_tag`)."""

_DROPPED_KEYS = {"otel.dropped_attributes_count", "otel.dropped_events_count",
                 "otel.dropped_links_count"}
_ADJUSTER_WARNINGS = re.compile(
    r"^(Negative duration detected, sanitizing end timestamp\. .*|"
    r"invalid parent span IDs=[0-9a-f,]+; skipping clock skew adjustment)$")


def _sort_tags(obj: dict, field: str) -> None:
    if obj.get(field):
        obj[field] = sorted(obj[field], key=lambda t: (t.get("key", ""), repr(t.get("value"))))


def _floats_as_numbers(tags: list) -> None:
    for t in tags or []:
        if t.get("type") == "float64" and isinstance(t.get("value"), (int, float)):
            t["value"] = float(t["value"])


def _trace_common(trace: dict) -> dict:
    for s in trace.get("spans", []):
        _floats_as_numbers(s.get("tags"))
        _floats_as_numbers(s.get("process", {}).get("tags"))
        for log in s.get("logs") or []:
            _floats_as_numbers(log.get("fields"))
        _sort_tags(s, "tags")
        _sort_tags(s.get("process", {}), "tags")
        for log in s.get("logs") or []:
            _sort_tags(log, "fields")
    return trace


def _jaeger_side(trace: dict) -> dict:
    for s in trace.get("spans", []):
        kept = [w for w in s.get("warnings") or [] if not _ADJUSTER_WARNINGS.match(w)]
        s["warnings"] = kept or None
    return trace


def _spanhouse_side(trace: dict) -> dict:
    for s in trace.get("spans", []):
        if s.get("flags"):  # 0 is left out by both, so a 0 here still differs
            del s["flags"]
        s["tags"] = [t for t in s.get("tags") or [] if t.get("key") not in _DROPPED_KEYS]
        for log in s.get("logs") or []:
            fields = [f for f in log.get("fields") or [] if f.get("key") not in _DROPPED_KEYS]
            names = [i for i, f in enumerate(fields) if f.get("key") == "event"]
            if len(names) > 1:
                del fields[names[0]]
            log["fields"] = fields
    return trace


def normalise_trace(jaeger: dict, spanhouse: dict) -> tuple[dict, dict]:
    return (_trace_common(_jaeger_side(copy.deepcopy(jaeger))),
            _trace_common(_spanhouse_side(copy.deepcopy(spanhouse))))


SHOWN_TAGS = {"error", "span.kind", "otel.status_code"}


def filter_by_shown_tag(traces: dict[str, dict], service: str, key: str,
                        value: str) -> dict[str, dict]:
    """The traces (canonical_traces form) with a span of `service` that shows tag key=value."""
    def shows(s: dict) -> bool:
        if s.get("process", {}).get("serviceName") != service:
            return False
        return any(t.get("key") == key and _text(t.get("value")) == value
                   for t in s.get("tags") or [])
    return {tid: t for tid, t in traces.items() if any(shows(s) for s in t.get("spans", []))}


def _text(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def envelope(answer: dict) -> dict:
    """The envelope of a traces answer, without its data."""
    return {k: v for k, v in answer.items() if k != "data"}


# ---- services, operations, dependencies ----

def names(answer: dict) -> dict:
    """/api/services and /api/services/{s}/operations (ORDER)."""
    out = dict(answer)
    out["data"] = _sorted(answer.get("data") or [])
    return out


OPENSEARCH_OPERATION_KINDS = """Reading from OpenSearch, `/api/operations` without `spanKind` lists
each operation once with `spanKind` "": the answer comes from Jaeger's service documents, which
keep no kind, and Jaeger's own OpenSearch reader answers the same. (With `spanKind`, the span
documents are asked and the kinds are exact.) Jaeger's side (its memory store knows the kinds)
is compared with its kinds blanked, each name once."""


def operations(answer: dict, kinds_known: bool = True) -> dict:
    out = dict(answer)
    data = answer.get("data") or []
    if not kinds_known:
        names = sorted({o.get("name", "") for o in data})
        data = [{"name": n, "spanKind": ""} for n in names]
        out["total"] = len(data)
    out["data"] = _sorted(data, key=lambda o: (o.get("name", ""), o.get("spanKind", "")))
    return out


SELF_EDGES = """Dependency edges are calls between services: spanhouse does not count a span whose
parent is a span of the same service (every service with internal spans would depend on
itself, a loop on every node of the service map); Jaeger's memory store does. Jaeger's edges
from a service to itself are removed from its side."""


def dependencies(answer: dict, jaeger: bool = False) -> dict:
    out = dict(answer)
    data = answer.get("data") or []
    if jaeger:
        data = [d for d in data if d.get("parent") != d.get("child")]
    out["data"] = _sorted(data, key=lambda d: (d.get("parent", ""), d.get("child", "")))
    return out
