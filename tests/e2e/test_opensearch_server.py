"""The OpenSearch the migration tests run against (opensearch_server.py) is a real one: it takes
an index with a mapping, a `_bulk` of `create` actions with ids, answers 409 per item when the
same ids are created again (what spanhouse's retried bulks rely on to stay idempotent), finds
documents by a term, and keeps them across a SIGTERM and a SIGKILL restart."""

from __future__ import annotations

from opensearch_server import OpenSearch

SPAN_MAPPING = {
    "settings": {"number_of_shards": 1, "number_of_replicas": 0},
    "mappings": {
        "dynamic": "false",
        "properties": {
            "traceID": {"type": "keyword"},
            "spanID": {"type": "keyword"},
            "operationName": {"type": "keyword"},
            "startTime": {"type": "long"},
            "duration": {"type": "long"},
            "process": {"properties": {"serviceName": {"type": "keyword"}}},
        },
    },
}

TRACE_A = "00000000000000000000000000000a01"
TRACE_B = "00000000000000000000000000000b02"
SPANS = [
    {"traceID": TRACE_A, "spanID": "00000000000000a1", "operationName": "GET /a",
     "startTime": 1_700_000_000_000_000, "duration": 1200,
     "process": {"serviceName": "frontend"}},
    {"traceID": TRACE_A, "spanID": "00000000000000a2", "operationName": "SELECT",
     "startTime": 1_700_000_000_000_100, "duration": 800, "process": {"serviceName": "db"}},
    {"traceID": TRACE_B, "spanID": "00000000000000b1", "operationName": "GET /b",
     "startTime": 1_700_000_000_001_000, "duration": 300,
     "process": {"serviceName": "frontend"}},
]


def bulk_create(opensearch: OpenSearch, index: str) -> dict:
    lines = []
    for span in SPANS:
        lines.append({"create": {"_index": index, "_id": span["traceID"] + "-" + span["spanID"]}})
        lines.append(span)
    return opensearch.bulk(lines)


def statuses(answer: dict) -> list[int]:
    return [item["create"]["status"] for item in answer["items"]]


def seed(opensearch: OpenSearch, index: str) -> None:
    opensearch.create_index(index, SPAN_MAPPING)
    answer = bulk_create(opensearch, index)
    assert not answer["errors"] and statuses(answer) == [201, 201, 201], answer


def test_bulk_create_conflicts_and_search(opensearch):
    index = "jaeger-span-2023-11-14"
    seed(opensearch, index)

    # The same bulk again, as a retry after a lost answer would send it: each item is a 409,
    # nothing is written twice.
    again = bulk_create(opensearch, index)
    assert again["errors"] is True
    assert statuses(again) == [409, 409, 409], again
    assert {item["create"]["error"]["type"] for item in again["items"]} == {
        "version_conflict_engine_exception"}

    opensearch.refresh(index)
    assert opensearch.count(index) == 3
    assert opensearch.count("jaeger-span-*", {"term": {"process.serviceName": "frontend"}}) == 2

    found = opensearch.hits(index, {"query": {"term": {"traceID": TRACE_A}},
                                    "sort": [{"startTime": "asc"}]})
    assert [s["spanID"] for s in found] == ["00000000000000a1", "00000000000000a2"]

    assert opensearch.count("no-such-index") == 0
    assert opensearch.count("no-such-*") == 0

    assert opensearch.delete_by_query(index, {"term": {"traceID": TRACE_B}}) == 1
    assert opensearch.count(index) == 2


def test_documents_survive_stop_and_kill(opensearch):
    index = "jaeger-span-2023-11-15"
    seed(opensearch, index)
    url = opensearch.url

    assert opensearch.stop() == 0, opensearch.diagnostics()
    assert not opensearch.running()
    opensearch.start()
    assert opensearch.url == url  # same ports: a client under test keeps its address
    assert opensearch.count(index) == 3
    assert statuses(bulk_create(opensearch, index)) == [409, 409, 409]

    # SIGKILL: no flush; the acknowledged documents come back from the translog.
    more = {"traceID": TRACE_B, "spanID": "00000000000000b2", "operationName": "after",
            "startTime": 1_700_000_000_002_000, "duration": 5,
            "process": {"serviceName": "frontend"}}
    answer = opensearch.bulk([{"create": {"_index": index, "_id": "late"}}, more])
    assert statuses(answer) == [201]
    opensearch.kill()
    assert not opensearch.running()
    opensearch.start()
    assert opensearch.count(index) == 4
    assert opensearch.hits(index, {"query": {"term": {"operationName": "after"}}}) == [more]
