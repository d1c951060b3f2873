"""Several spanhouse nodes on one ClickHouse server (Debian's 18.16), all with
clickhouse.run_jobs: exactly one runs the schema and dependency jobs (the job lease in
<database>.job_lease), another takes over when it is killed, and the killed node, back, does
not take them back; a node stopped cleanly hands them over."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import Spanhouse, SpanhouseFactory

LEASE_S = 5
# Generous: a takeover needs the lease to expire (LEASE_S) and a heartbeat (LEASE_S / 3).
DEADLINE_S = 90


def node_config(tmp_path: Path, server, database: str, name: str, node_id: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    node = f"node:\n  id: {node_id}\n" if node_id else ""
    path.write_text(f"""storage:
  engine: clickhouse
clickhouse:
  shards: "{server.url.rstrip('/')}"
  database: {database}
  timeout_s: 10
  job_lease_s: {LEASE_S}
{node}writer:
  max_age_ms: 500
dependencies:
  interval_s: 1
  lag_s: 0
""")
    return path


def metrics(sh: Spanhouse) -> dict:
    """The samples without labels of GET /metrics, by name."""
    r = sh.session.get(f"{sh.query_url}/metrics", timeout=10)
    assert r.status_code == 200, r.text
    out = {}
    for line in r.text.splitlines():
        if line.startswith("#") or "{" in line or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def runner(sh: Spanhouse) -> bool:
    return metrics(sh)["spanhouse_job_runner"] == 1


def runs(sh: Spanhouse) -> float:
    return metrics(sh)["spanhouse_dependency_job_runs_total"]


def wait_for(what: str, cond, nodes, deadline_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {deadline_s} s\n"
                        + "\n".join(sh.diagnostics() for sh in nodes if sh.proc is not None),
                        pytrace=False)
        time.sleep(0.2)


def only_runner(nodes) -> Spanhouse:
    found = [sh for sh in nodes if runner(sh)]
    assert len(found) == 1, f"runners: {[sh.name for sh in found]}"
    return found[0]


def test_one_node_runs_the_jobs_and_another_takes_over_when_it_dies(tmp_path, request,
                                                                      clickhouse_server):
    database = clickhouse_server.new_database()
    factory = SpanhouseFactory(tmp_path)
    request.node._spanhouse_factories = [factory]
    # a and b are named in their configuration; c gets an id made up and kept in its data dir.
    nodes = [factory(name, start=False,
                     config=node_config(tmp_path, clickhouse_server, database, name, node_id))
             for name, node_id in (("a", "node-a"), ("b", "node-b"), ("c", ""))]
    # Started together: they register at the same moment, the case the settle time is for.
    # The threads live until the end: a child is killed when the thread that spawned it ends
    # (PR_SET_PDEATHSIG).
    pool = ThreadPoolExecutor(len(nodes))
    request.addfinalizer(pool.shutdown)
    list(pool.map(lambda sh: sh.start(), nodes))

    def settled(group, n):
        return (sum(runner(sh) for sh in group) == 1
                and all(metrics(sh)["spanhouse_job_lease_nodes"] == n for sh in group))
    wait_for("exactly one runner among 3 live nodes", lambda: settled(nodes, 3), nodes)
    first = only_runner(nodes)
    others = [sh for sh in nodes if sh is not first]
    # The dependency job runs there, and only there.
    base = runs(first)
    wait_for("the runner's dependency job running", lambda: runs(first) >= base + 3, nodes)
    for sh in others:
        m = metrics(sh)
        assert m["spanhouse_job_runner"] == 0 and m["spanhouse_job_lease_acquired_total"] == 0
        assert m["spanhouse_dependency_job_runs_total"] == 0, f"{sh.name} ran the job"
    assert only_runner(nodes) is first

    c_id = (nodes[2].data_dir / "node_id").read_text().strip()
    ids = set(clickhouse_server.query(
        f"SELECT DISTINCT node_id FROM {database}.job_lease").split())
    assert ids == {"node-a", "node-b", c_id}, ids

    # kill -9 of the runner: one of the others takes over and runs the job.
    first.kill()
    wait_for("a new runner after the runner was killed", lambda: settled(others, 2), nodes)
    second = only_runner(others)
    rest = next(sh for sh in others if sh is not second)
    base = runs(second)
    wait_for("the new runner's dependency job running", lambda: runs(second) >= base + 3, nodes)
    assert runs(rest) == 0, f"{rest.name} ran the job"
    assert metrics(second)["spanhouse_job_lease_acquired_total"] == 1

    # The killed node comes back: registered last, it stands by (the rule: the earliest
    # registered live node runs the jobs, so a return never takes them back).
    first.start(keep_ports=True)
    wait_for("the restarted node registered", lambda: settled(nodes, 3), nodes)
    watch_until = time.monotonic() + 3 * LEASE_S
    while time.monotonic() < watch_until:
        assert only_runner(nodes) is second
        time.sleep(0.5)
    m = metrics(first)
    assert m["spanhouse_job_lease_acquired_total"] == 0
    assert m["spanhouse_dependency_job_runs_total"] == 0

    # A clean stop releases the lease: the earliest registered of the others, the one that
    # never stopped, takes over.
    second.stop_ok()
    wait_for("a runner after the runner stopped", lambda: settled([first, rest], 2), nodes)
    assert only_runner([first, rest]) is rest
    base = runs(rest)
    wait_for("its dependency job running", lambda: runs(rest) >= base + 3, nodes)
    assert runs(first) == 0
    factory.teardown()
