"""The ClickHouse cluster fixture is a real cluster: 2 shards x 2 replicas of Debian's
clickhouse-server (18.16) and a ZooKeeper, where ON CLUSTER DDL reaches every server, a
ReplicatedMergeTree insert reaches the shard's other replica, the same block inserted again is
deduplicated, a Distributed table reads every shard and writes by its sharding key, and a
killed replica catches up once restarted. Spanhouse's cluster support is tested against this,
so these pin the behaviour it relies on. Needs no spanhouse binary."""

from __future__ import annotations

import pytest

from clickhouse_cluster import ClickHouseCluster
from clickhouse_server import ClickHouseError

CLUSTER = "spanhouse"
# The trace id a spanhouse would shard by, and sipHash64 of it as 18.16 computes it: the C++
# side computes the shard itself, so it must match this (SipHash-2-4, key 0, see siphash24).
TRACE_ID = "0102030405060708090a0b0c0d0e0f10"
TRACE_ID_SIPHASH64 = 1919075382190022674  # 0x1AA1ECE474A22012


@pytest.fixture(scope="module")
def _cluster(tmp_path_factory):
    c = ClickHouseCluster(tmp_path_factory.mktemp("cluster"), shards=2, replicas=2, name=CLUSTER)
    yield c
    c.stop()


@pytest.fixture
def cluster(_cluster):
    """The module's cluster, with every server running again when the test ends."""
    yield _cluster
    for s, shard in enumerate(_cluster.servers):
        for r, srv in enumerate(shard):
            if not srv.running():
                _cluster.start(s, r)


def siphash24(data: bytes, k0: int = 0, k1: int = 0) -> int:
    """SipHash-2-4 (Aumasson and Bernstein), 64-bit output; sipHash64 is it with key 0."""
    mask = (1 << 64) - 1

    def rotl(x: int, b: int) -> int:
        return ((x << b) | (x >> (64 - b))) & mask

    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rounds(n: int) -> None:
        for _ in range(n):
            v[0] = (v[0] + v[1]) & mask
            v[1] = rotl(v[1], 13) ^ v[0]
            v[0] = rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & mask
            v[3] = rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & mask
            v[3] = rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & mask
            v[1] = rotl(v[1], 17) ^ v[2]
            v[2] = rotl(v[2], 32)

    whole = len(data) // 8 * 8
    last = (len(data) & 0xFF) << 56 | int.from_bytes(data[whole:], "little")
    for m in [int.from_bytes(data[i:i + 8], "little") for i in range(0, whole, 8)] + [last]:
        v[3] ^= m
        rounds(2)
        v[0] ^= m
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def create_tables(cluster: ClickHouseCluster, table: str) -> None:
    """`table` (ReplicatedMergeTree, one ZooKeeper path per shard) on every server, and
    `table`_all, a Distributed table over it sharded by sipHash64(trace_id); ON CLUSTER."""
    answer = cluster.on_cluster(
        f"CREATE TABLE {table} ON CLUSTER {CLUSTER} "
        "(trace_id FixedString(16), span_id UInt64, name String) "
        f"ENGINE = ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{table}', '{{replica}}') "
        "ORDER BY (trace_id, span_id)")
    # One row per server: host, port, status (0: done), error, hosts remaining, hosts active.
    rows = [line.split("\t") for line in answer.splitlines()]
    assert sorted(int(row[1]) for row in rows) == sorted(
        srv.tcp_port for srv in cluster.all_servers()), answer
    assert all(row[2] == "0" for row in rows), answer
    cluster.on_cluster(f"CREATE TABLE {table}_all ON CLUSTER {CLUSTER} AS {table} "
                       f"ENGINE = Distributed({CLUSTER}, default, {table}, sipHash64(trace_id))")


def values(span_ids) -> str:
    """VALUES rows with a trace id made of the span id."""
    return ", ".join(f"(unhex('{i:032x}'), {i}, 'span {i}')" for i in span_ids)


def count(srv, table: str) -> int:
    return int(srv.query(f"SELECT count() FROM {table}"))


def span_ids(srv, table: str) -> list[int]:
    return [int(x) for x in srv.query(f"SELECT span_id FROM {table} ORDER BY span_id").split()]


def test_every_server_knows_the_cluster_its_place_and_zookeeper(cluster):
    ports = [[srv.tcp_port for srv in shard] for shard in cluster.servers]
    assert "Mode: standalone" in cluster.zookeeper.four_letter("srvr")
    for s, shard in enumerate(cluster.servers):
        for r, srv in enumerate(shard):
            assert srv.version().startswith("18.16."), srv.version()
            rows = [line.split("\t") for line in srv.query(
                f"SELECT shard_num, replica_num, port, is_local FROM system.clusters "
                f"WHERE cluster = '{CLUSTER}' ORDER BY shard_num, replica_num").splitlines()]
            assert [[int(x) for x in row[:3]] for row in rows] == [
                [si + 1, ri + 1, port] for si, sp in enumerate(ports) for ri, port in enumerate(sp)]
            # is_local is the shard's flag (it has a local replica), repeated on each row.
            assert [row[3] for row in rows] == ["1" if si == s else "0"
                                               for si, sp in enumerate(ports) for _ in sp], rows
            assert dict(line.split("\t") for line in srv.query(
                "SELECT macro, substitution FROM system.macros").splitlines()) == {
                "shard": str(s + 1), "replica": f"s{s + 1}r{r + 1}"}
            assert int(srv.query("SELECT count() FROM system.zookeeper WHERE path = '/'")) >= 1
    # 4 servers and ZooKeeper fit the 2-core, 24 GiB test machine many times over.
    rss = cluster.rss_bytes()
    assert sum(rss.values()) < 2 << 30, rss


def test_on_cluster_ddl_creates_replicated_tables_with_each_servers_macros(cluster):
    create_tables(cluster, "ddl")
    for s, shard in enumerate(cluster.servers):
        for r, srv in enumerate(shard):
            assert srv.query("SELECT zookeeper_path, replica_name, total_replicas FROM "
                             "system.replicas WHERE table = 'ddl'").split() == [
                f"/clickhouse/tables/{s + 1}/ddl", f"s{s + 1}r{r + 1}", "2"]
            assert srv.query("EXISTS TABLE ddl_all").strip() == "1"


def test_an_insert_reaches_the_other_replica_and_the_distributed_table(cluster):
    create_tables(cluster, "rep")
    rows = {0: range(0, 10), 1: range(10, 25)}
    for s, ids in rows.items():
        cluster.server(s, 0).query(f"INSERT INTO rep VALUES {values(ids)}")
    for s, ids in rows.items():
        other = cluster.server(s, 1)
        cluster.wait_for(f"shard {s + 1}'s rows on its second replica",
                         lambda: span_ids(other, "rep") == list(ids))
    for srv in cluster.all_servers():
        assert span_ids(srv, "rep_all") == list(range(25)), srv.name


def test_the_same_block_inserted_on_the_other_replica_is_deduplicated(cluster):
    create_tables(cluster, "dedup")
    a, b = cluster.servers[0]
    block = values(range(7))
    a.query(f"INSERT INTO dedup VALUES {block}")
    cluster.wait_for("the block on the second replica", lambda: count(b, "dedup") == 7)
    # The same rows in the same order make the same part, whose checksum ZooKeeper already
    # has among the table's recent blocks: the insert succeeds and writes nothing.
    b.query(f"INSERT INTO dedup VALUES {block}")
    a.query(f"INSERT INTO dedup VALUES {block}")
    # A different block (one row more) is no duplicate.
    b.query(f"INSERT INTO dedup VALUES {values(range(8))}")
    cluster.wait_for("the second block on the first replica", lambda: count(a, "dedup") == 15)
    for srv in (a, b):
        assert count(srv, "dedup") == 15, srv.name
        assert int(srv.query("SELECT count() FROM system.parts WHERE table = 'dedup' "
                             "AND active AND level = 0")) <= 2, srv.name
    # ...unless deduplication is off for the insert.
    a.query(f"INSERT INTO dedup VALUES {block}", insert_deduplicate=0)
    cluster.wait_for("the undeduplicated block on the second replica",
                     lambda: count(b, "dedup") == 22)


def test_siphash64_is_siphash_2_4_with_a_zero_key(cluster):
    srv = cluster.server(0, 0)
    for expr in (f"unhex('{TRACE_ID}')", f"toFixedString(unhex('{TRACE_ID}'), 16)"):
        assert int(srv.query(f"SELECT sipHash64({expr})")) == TRACE_ID_SIPHASH64, expr
    assert siphash24(bytes.fromhex(TRACE_ID)) == TRACE_ID_SIPHASH64
    for data in (b"", b"a", b"1234567", b"12345678", bytes(range(16)), bytes(range(37))):
        assert int(srv.query(f"SELECT sipHash64(unhex('{data.hex()}'))")) == siphash24(data), data


def test_a_distributed_insert_puts_a_row_on_shard_siphash64_mod_shards(cluster):
    create_tables(cluster, "sharded")
    ids = range(40)
    # insert_distributed_sync: the insert returns once every shard has its rows.
    cluster.server(1, 1).query(f"INSERT INTO sharded_all VALUES {values(ids)}",
                               insert_distributed_sync=1)
    for s in range(cluster.shards):
        want = [i for i in ids if siphash24(bytes.fromhex(f"{i:032x}")) % cluster.shards == s]
        assert 0 < len(want) < len(ids)
        for srv in cluster.servers[s]:
            cluster.wait_for(f"shard {s + 1}'s rows on {srv.name}",
                             lambda: span_ids(srv, "sharded") == want)


def test_a_killed_replica_catches_up_once_restarted(cluster):
    create_tables(cluster, "crash")
    a, b = cluster.servers[0]
    a.query(f"INSERT INTO crash VALUES {values(range(5))}")
    cluster.wait_for("the first rows on the second replica", lambda: count(b, "crash") == 5)
    cluster.kill(0, 1)
    a.query(f"INSERT INTO crash VALUES {values(range(5, 12))}")
    a.query(f"INSERT INTO crash VALUES {values(range(12, 20))}")
    cluster.start(0, 1)
    # Its table stays read-only until the killed process's ZooKeeper session has expired and
    # the table's restart is retried (every 10 s in 18.16), then it fetches what it missed.
    cluster.wait_for("the rows inserted while it was down, on the restarted replica",
                     lambda: span_ids(b, "crash") == list(range(20)))
    assert b.query("SELECT is_readonly, active_replicas FROM system.replicas "
                   "WHERE table = 'crash'").split() == ["0", "2"]
    # And it takes inserts again, which reach the other replica.
    cluster.wait_for("an insert on the restarted replica", lambda: b.query(
        f"INSERT INTO crash VALUES {values(range(20, 22))}") == "")
    cluster.wait_for("its rows on the other replica", lambda: count(a, "crash") == 22)


def test_a_stopped_shard_fails_distributed_reads_and_delays_on_cluster_ddl(cluster):
    create_tables(cluster, "down")
    cluster.server(0, 0).query(f"INSERT INTO down_all VALUES {values(range(30))}",
                               insert_distributed_sync=1)
    first = cluster.server(0, 0)
    on_shard_1 = span_ids(first, "down")
    cluster.stop_shard(1)
    with pytest.raises(ClickHouseError) as e:
        first.query("SELECT count() FROM down_all")
    assert "Code: 279" in e.value.text  # ALL_CONNECTION_TRIES_FAILED
    assert [int(x) for x in first.query(
        "SELECT span_id FROM down_all ORDER BY span_id", skip_unavailable_shards=1).split()] \
        == on_shard_1
    # ON CLUSTER DDL waits for every server, up to distributed_ddl_task_timeout (180 s by
    # default), then fails with the servers that have not run it yet; they run it on start.
    with pytest.raises(ClickHouseError) as e:
        first.query(f"CREATE TABLE later ON CLUSTER {CLUSTER} (x UInt8) ENGINE = Memory",
                    distributed_ddl_task_timeout=2)
    assert "Code: 159" in e.value.text and "2 unfinished hosts" in e.value.text, e.value.text
    cluster.start_shard(1)
    for srv in cluster.servers[1]:
        cluster.wait_for(f"the queued DDL on {srv.name}",
                         lambda: srv.query("EXISTS TABLE later").strip() == "1")
    # Either replica of shard 2 may answer, and it may have stopped before fetching the block.
    cluster.wait_for("every row through the Distributed table again",
                     lambda: span_ids(first, "down_all") == list(range(30)))
