"""The search engines the tests run (opensearch_server.py) are real ones, OpenSearch 2.19.6 (the
migration tests') and Elasticsearch 7.10.2, each test running on both (`search_store`): a node
says which engine and version it is, takes an index with a mapping, a `_bulk` of `create`
actions with ids, answers 409 per item when the same ids are created again (what spanhouse's
retried bulks rely on to stay idempotent), finds documents by a term, pages with search_after,
deletes by query, and keeps its documents across a SIGTERM and a SIGKILL restart."""

from __future__ import annotations

from opensearch_server import ENGINES, SearchNode, total_hits

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


def bulk_create(node: SearchNode, index: str) -> dict:
    lines = []
    for span in SPANS:
        lines.append({"create": {"_index": index, "_id": span["traceID"] + "-" + span["spanID"]}})
        lines.append(span)
    return node.bulk(lines)


def statuses(answer: dict) -> list[int]:
    return [item["create"]["status"] for item in answer["items"]]


def seed(node: SearchNode, index: str) -> None:
    node.create_index(index, SPAN_MAPPING)
    answer = bulk_create(node, index)
    assert not answer["errors"] and statuses(answer) == [201, 201, 201], answer


def test_engine_and_version(search_store):
    """The node is the engine its fixture says, at the version its launcher pins."""
    node = search_store
    about = node.request("GET", "/").json()
    assert about["version"]["number"] == node.version == ENGINES[node.engine].version, about
    # OpenSearch names itself in version.distribution; Elasticsearch 7 has no such field.
    assert (about["version"].get("distribution") == "opensearch") == (
        node.engine == "opensearch"), about
    assert node.rss_kb() and node.rss_kb() > 0


def test_bulk_create_conflicts_and_search(search_store):
    node = search_store
    index = "jaeger-span-2023-11-14"
    seed(node, index)

    # The same bulk again, as a retry after a lost answer would send it: each item is a 409,
    # nothing is written twice.
    again = bulk_create(node, index)
    assert again["errors"] is True
    assert statuses(again) == [409, 409, 409], again
    assert {item["create"]["error"]["type"] for item in again["items"]} == {
        "version_conflict_engine_exception"}

    node.refresh(index)
    assert node.count(index) == 3
    assert node.count("jaeger-span-*", {"term": {"process.serviceName": "frontend"}}) == 2

    answer = node.search(index, {"query": {"term": {"traceID": TRACE_A}},
                                 "sort": [{"startTime": "asc"}]})
    assert total_hits(answer) == 2, answer
    assert [h["_source"]["spanID"] for h in answer["hits"]["hits"]] == [
        "00000000000000a1", "00000000000000a2"]
    as_int = node.search(index, {"query": {"term": {"traceID": TRACE_A}}},
                         params={"rest_total_hits_as_int": "true"})
    assert as_int["hits"]["total"] == 2 and total_hits(as_int) == 2, as_int

    # Pages of one by startTime, each after the last one's sort values, as a reader pages.
    pages, after = [], None
    while True:
        body = {"size": 1, "sort": [{"startTime": "asc"}, {"spanID": "asc"}]}
        if after is not None:
            body["search_after"] = after
        hits = node.search(index, body)["hits"]["hits"]
        if not hits:
            break
        pages.append(hits[0]["_source"]["spanID"])
        after = hits[0]["sort"]
    assert pages == [s["spanID"] for s in sorted(SPANS, key=lambda s: s["startTime"])]

    assert node.count("no-such-index") == 0
    assert node.count("no-such-*") == 0

    assert node.delete_by_query(index, {"term": {"traceID": TRACE_B}}) == 1
    assert node.count(index) == 2


def test_documents_survive_stop_and_kill(search_store):
    node = search_store
    index = "jaeger-span-2023-11-15"
    seed(node, index)
    url = node.url

    assert node.stop() == 0, node.diagnostics()
    assert not node.running()
    node.start()
    assert node.url == url  # same ports: a client under test keeps its address
    assert node.count(index) == 3
    assert statuses(bulk_create(node, index)) == [409, 409, 409]

    # SIGKILL: no flush; the acknowledged documents come back from the translog.
    more = {"traceID": TRACE_B, "spanID": "00000000000000b2", "operationName": "after",
            "startTime": 1_700_000_000_002_000, "duration": 5,
            "process": {"serviceName": "frontend"}}
    answer = node.bulk([{"create": {"_index": index, "_id": "late"}}, more])
    assert statuses(answer) == [201]
    node.kill()
    assert not node.running()
    node.start()
    assert node.count(index) == 4
    assert node.hits(index, {"query": {"term": {"operationName": "after"}}}) == [more]
