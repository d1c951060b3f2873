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
          "operations_mv"}


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
    assert tables == TABLES, f"{version}: {sorted(tables ^ TABLES)} differ"
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
            "INSERT INTO spanhouse.spans (timestamp, trace_id, span_id, service_name, name, kind, "
            "start_time, duration_ns, status_code) SELECT toDateTime(1700000000), "
            f"toFixedString(unhex('{trace}'), 16), toFixedString(unhex('{span}'), 8), "
            f"'{service}', '{name}', {kind}, {start}, 1500000, {status}")
    assert server.query("SELECT count() FROM spanhouse.spans").strip() == "3"
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
