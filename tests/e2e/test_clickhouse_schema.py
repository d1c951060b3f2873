"""The DDL `spanhouse schema --server-version V` generates, run on a real ClickHouse server of
that version (Debian's clickhouse-server): every table and view is created, the views fire on
an insert into the spans table, and a second run changes nothing. A version's DDL is called
supported only once this has run it on that version's server."""

from __future__ import annotations

import subprocess

import pytest

from clickhouse_server import ClickHouseServer
from conftest import clean_env, spanhouse_bin

TABLES = {"schema_version", "resources", "spans", "trace_index", "trace_index_mv", "red_1m",
          "red_1m_mv", "red_service_1m", "red_service_1m_mv", "dependencies_1m", "operations",
          "operations_mv", "sampled_spans", "red_1m_sampled_mv", "operations_sampled_mv"}


def tables_for(version: str) -> set[str]:
    """TABLES on a server of `version`: where a view's inserts fire no view (before 26.1, as
    schema.cc's cascading_views says), sampled_spans feeds red_service_1m by a view of its own."""
    if int(version.split(".")[0]) < 26:
        return TABLES | {"red_service_1m_sampled_mv"}
    return TABLES


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = ClickHouseServer(tmp_path_factory.mktemp("clickhouse"))
    yield s
    s.stop()


def ddl_for(version: str) -> list[str]:
    """`spanhouse schema`'s statements for the server's major.minor version."""
    major_minor = ".".join(version.split(".")[:2])
    out = subprocess.run([spanhouse_bin(), "schema", "--server-version", major_minor],
                         capture_output=True, text=True, timeout=60, env=clean_env(), check=True)
    return [s.strip() for s in out.stdout.split(";\n\n") if s.strip()]


def run_all(server: ClickHouseServer, statements: list[str]) -> None:
    for sql in statements:
        try:
            server.query(sql)
        except Exception as e:  # noqa: BLE001 - the statement and the server's words
            raise AssertionError(f"{server.version()} refused:\n{sql}\n{e}") from None


def test_the_generated_schema_runs_on_the_real_server(server):
    version = server.version()
    statements = ddl_for(version)
    assert len(statements) >= len(TABLES), statements
    run_all(server, statements)
    tables = set(server.query(
        "SELECT name FROM system.tables WHERE database = 'spanhouse'").split())
    want = tables_for(version)
    assert tables == want, f"{version}: {sorted(tables ^ want)} differ"
    # Idempotent: a second start runs the same statements.
    run_all(server, statements)


def test_the_views_are_fed_by_an_insert_into_spans(server):
    run_all(server, ddl_for(server.version()))
    start_type = server.query("SELECT type FROM system.columns WHERE database = 'spanhouse' "
                              "AND table = 'spans' AND name = 'start_time'").strip()
    ns = 1_700_000_000_000_000_000
    start = (f"toDateTime64({ns // 10**9}, 9)" if start_type.startswith("DateTime64")
             else f"toUInt64({ns})")
    # Two spans of one trace (one an error), one of another service.
    rows = [("0102030405060708090a0b0c0d0e0f10", "1111111111111111", "checkout", "GET /cart", 2, 0),
            ("0102030405060708090a0b0c0d0e0f10", "2222222222222222", "checkout", "GET /cart", 2, 2),
            ("a102030405060708090a0b0c0d0e0f10", "3333333333333333", "cart", "SELECT", 3, 0)]
    for trace, span, service, name, kind, status in rows:
        server.query(
            "INSERT INTO spanhouse.spans (timestamp, trace_id, span_ids, service_name, name, kind, "
            "start_time, duration_ns, status_code) SELECT toDateTime(1700000000), "
            f"toFixedString(unhex('{trace}'), 16), toFixedString(unhex('{span}{span[::-1]}'), 16), "
            f"'{service}', '{name}', {kind}, {start}, 1500000, {status}")
    assert server.query("SELECT count() FROM spanhouse.spans").strip() == "3"
    # span_ids holds both ids; span_id and parent_span_id are its halves.
    assert server.query(
        "SELECT lower(hex(span_id)), lower(hex(parent_span_id)) FROM spanhouse.spans "
        "ORDER BY span_id").split("\n")[:3] == [f"{r[1]}\t{r[1][::-1]}" for r in rows]
    # trace_index: one row per trace, its first and last second.
    assert server.query(
        "SELECT count(), min(s), max(e) FROM (SELECT trace_id8, minMerge(start_s) AS s, "
        "maxMerge(end_s) AS e FROM spanhouse.trace_index GROUP BY trace_id8)").split() == \
        ["2", "1700000000", "1700000001"]
    # red_1m and, fed by it, red_service_1m: calls and errors per service.
    for table in ("red_1m", "red_service_1m"):
        got = server.query(f"SELECT service_name, sumMerge(calls), sumMerge(errors) FROM "
                           f"spanhouse.{table} GROUP BY service_name ORDER BY service_name")
        assert got.split("\n")[:2] == ["cart\t1\t0", "checkout\t2\t1"], (table, got)
    assert server.query(
        "SELECT service_name, name FROM spanhouse.operations GROUP BY service_name, name "
        "ORDER BY service_name").split("\n")[:2] == ["cart\tSELECT", "checkout\tGET /cart"]


def test_the_views_are_fed_by_an_insert_into_sampled_spans(server):
    """Spans sampled out, as the writer stores them: counted in red_1m, red_service_1m and the
    catalog like stored spans, and not stored as spans."""
    run_all(server, ddl_for(server.version()))
    spans_before = server.query("SELECT count() FROM spanhouse.spans").strip()
    rows = [("b102030405060708090a0b0c0d0e0f10", "4444444444444444", "0000000000000000",
             "sampled-only", "GET /ghost", 2, 0, 2000000),
            ("b102030405060708090a0b0c0d0e0f10", "5555555555555555", "4444444444444444",
             "sampled-only", "GET /ghost", 2, 2, 4000000),
            ("b102030405060708090a0b0c0d0e0f10", "6666666666666666", "5555555555555555",
             "sampled-db", "SELECT", 3, 0, 1000000)]
    for trace, span, parent, service, name, kind, status, duration in rows:
        server.query(
            "INSERT INTO spanhouse.sampled_spans (timestamp, trace_id, span_id, parent_span_id, "
            "service_name, name, kind, status_code, duration_ns) SELECT toDateTime(1700000060), "
            f"toFixedString(unhex('{trace}'), 16), toFixedString(unhex('{span}'), 8), "
            f"toFixedString(unhex('{parent}'), 8), '{service}', '{name}', {kind}, {status}, "
            f"{duration}")
    assert server.query("SELECT count() FROM spanhouse.sampled_spans").strip() == "3"
    assert server.query("SELECT count() FROM spanhouse.spans").strip() == spans_before
    for table in ("red_1m", "red_service_1m"):
        got = server.query(f"SELECT service_name, sumMerge(calls), sumMerge(errors), "
                           f"sumMerge(duration_sum_ns) FROM spanhouse.{table} WHERE service_name "
                           f"LIKE 'sampled-%' GROUP BY service_name ORDER BY service_name")
        assert got.split("\n")[:2] == ["sampled-db\t1\t0\t1000000",
                                        "sampled-only\t2\t1\t6000000"], (table, got)
    assert server.query(
        "SELECT service_name, name FROM spanhouse.operations WHERE service_name LIKE 'sampled-%' "
        "GROUP BY service_name, name ORDER BY service_name").split("\n")[:2] == \
        ["sampled-db\tSELECT", "sampled-only\tGET /ghost"]
