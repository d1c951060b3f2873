"""Hot/cold tiering end to end.

`spanhouse serve` with the intervals shortened to seconds: spans sent over
OTLP are stored on the hot volume, moved by the engine to the cold volume (a
directory, or a bucket on a real S3-compatible server, gofakes3), still
returned by the query API from there, and deleted after the retention. Where
the data lies is read from /metrics (spanhouse_storage_rows by table and
disk) and from the files on the cold side.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

from conftest import otlp_json_request, otlp_json_span, tail, trace_span_ids

MOVE_AFTER_S = 3
RETENTION_S = 40
SPANS = 5
MOVE_DEADLINE_S = 90.0
DELETE_DEADLINE_S = 150.0


def storage_rows(sh) -> dict:
    """{(table, disk): rows} from the spanhouse_storage_rows gauges of /metrics."""
    r = requests.get(f"{sh.query_url}/metrics", timeout=30)
    assert r.status_code == 200, r.text
    out = {}
    for line in r.text.splitlines():
        if not line.startswith("spanhouse_storage_rows{"):
            continue
        labels, _, value = line.partition("} ")
        fields = dict(kv.split("=", 1) for kv in labels[len("spanhouse_storage_rows{"):].split(","))
        out[(fields["table"].strip('"'), fields["disk"].strip('"'))] = int(value)
    return out


def spans_by_disk(sh) -> dict:
    return {disk: rows for (table, disk), rows in storage_rows(sh).items()
            if table == "spans" and rows > 0}


def poll(what: str, check, deadline_s: float, diagnostics) -> object:
    """Calls check() until it returns something truthy; fails with the last value."""
    deadline = time.monotonic() + deadline_s
    last = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} within {deadline_s:.0f}s; last: {last!r}\n{diagnostics()}",
                        pytrace=False)
        time.sleep(0.5)


def files_under(path: Path) -> list[Path]:
    return [p for p in Path(path).rglob("*") if p.is_file()] if Path(path).exists() else []


def send_trace(sh) -> tuple[str, set]:
    trace_id = os.urandom(16).hex()
    now = time.time_ns()
    spans = [otlp_json_span(trace_id, os.urandom(8).hex(), f"op {i}", start_ns=now + i * 1000)
             for i in range(SPANS)]
    r = sh.post_traces(otlp_json_request(spans, "tiering"))
    assert r.status_code == 200, r.text
    return trace_id, {s["spanId"] for s in spans}


def move_read_delete(sh, cold_disk: str, cold_files) -> None:
    """The life of one trace: hot, then cold (and still read), then gone."""
    trace_id, ids = send_trace(sh)
    sh.wait_for_trace(trace_id, lambda d: len(trace_span_ids(d)) == SPANS, what="was not stored")

    where = poll(f"the spans did not all move to disk {cold_disk!r}",
                 lambda: (lambda m: m if m == {cold_disk: SPANS} else None)(spans_by_disk(sh)),
                 MOVE_DEADLINE_S, lambda: f"{spans_by_disk(sh)}\n{sh.diagnostics()}")
    assert where == {cold_disk: SPANS}
    assert cold_files(), "the cold side holds no files although the engine says the part is there"

    # Read back from the cold volume, every span.
    r = sh.get_trace(trace_id)
    assert r.status_code == 200, r.text
    assert set(trace_span_ids(r.json())) == ids

    # Past the retention the part is dropped and the trace is gone.
    poll("the spans were not deleted", lambda: not spans_by_disk(sh), DELETE_DEADLINE_S,
         sh.diagnostics)
    poll("the trace is still answered", lambda: sh.get_trace(trace_id).status_code == 404,
         30.0, sh.diagnostics)


def test_spans_move_to_a_cold_directory_are_read_there_and_deleted(spanhouse_factory, tmp_path):
    cold = tmp_path / "cold-volume"
    cfg = tmp_path / "spanhouse.yaml"
    cfg.write_text(f"storage:\n  cold_path: {cold}\n  move_after_s: {MOVE_AFTER_S}\n"
                   f"  retention_s: {RETENTION_S}\n")
    sh = spanhouse_factory(config=cfg)
    engine_config = (sh.data_dir / "clickhouse-config.xml").read_text()
    assert f"<path>{cold}/</path>" in engine_config, engine_config
    move_read_delete(sh, "cold", lambda: [p for p in files_under(cold)
                                          if p.name == "columns.txt"])


def test_default_cold_volume_is_a_directory_in_the_data_dir(spanhouse_factory):
    sh = spanhouse_factory()
    engine_config = (sh.data_dir / "clickhouse-config.xml").read_text()
    data_dir = os.path.normpath(os.path.abspath(sh.data_dir))
    assert f"<path>{data_dir}/cold/</path>" in engine_config, engine_config
    assert (sh.data_dir / "cold").is_dir()
    assert oct((sh.data_dir / "clickhouse-config.xml").stat().st_mode & 0o777) == "0o600"


def gofakes3_bin() -> str | None:
    """The gofakes3 binary (scripts/setup.sh --tests installs it with `go install`)."""
    found = os.environ.get("GOFAKES3_BIN") or shutil.which("gofakes3")
    if found:
        return found
    candidates = []
    if shutil.which("go"):
        try:
            gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True,
                                    timeout=30).stdout.strip()
            candidates += [Path(p) / "bin" / "gofakes3" for p in gopath.split(":") if p]
        except (OSError, subprocess.TimeoutExpired):
            pass
    candidates.append(Path.home() / "go" / "bin" / "gofakes3")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


@pytest.fixture
def s3_server(tmp_path):
    """A real S3-compatible server (gofakes3, file-system backend) on 127.0.0.1."""
    binary = gofakes3_bin()
    if binary is None:
        pytest.skip("gofakes3 is not installed (scripts/setup.sh --tests installs it)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = tmp_path / "s3"
    log = open(tmp_path / "gofakes3.log", "w")
    proc = subprocess.Popen([binary, "-host", f"127.0.0.1:{port}", "-backend", "fs",
                             "-fs.path", str(root), "-fs.create", "-initialbucket", "spans"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("gofakes3 did not start:\n" +
                            tail((tmp_path / "gofakes3.log").read_text()), pytrace=False)
            time.sleep(0.1)
        yield {"endpoint": f"http://127.0.0.1:{port}/spans/cold/",
               "list_url": f"http://127.0.0.1:{port}/spans?list-type=2&prefix=cold/"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_spans_move_to_an_s3_bucket_are_read_there_and_deleted(spanhouse_factory, tmp_path,
                                                               s3_server):
    cfg = tmp_path / "spanhouse.yaml"
    cfg.write_text(f"storage:\n  move_after_s: {MOVE_AFTER_S}\n  retention_s: {RETENTION_S}\n"
                   f"  s3_endpoint: {s3_server['endpoint']}\n  s3_region: us-east-1\n")
    sh = spanhouse_factory(config=cfg, env={
        "SPANHOUSE_STORAGE_S3_ACCESS_KEY_ID": "spanhouse",
        "SPANHOUSE_STORAGE_S3_SECRET_ACCESS_KEY": "not-a-secret"})
    engine_config = (sh.data_dir / "clickhouse-config.xml").read_text()
    assert "<type>s3</type>" in engine_config, engine_config
    assert "<secret_access_key>not-a-secret</secret_access_key>" in engine_config
    # The bucket's objects are the parts' files (the engine keeps only
    # references in the data directory): list them from the server.
    def objects() -> list[str]:
        r = requests.get(s3_server["list_url"], timeout=10)
        assert r.status_code == 200, r.text
        return re.findall(r"<Key>([^<]+)</Key>", r.text)

    assert objects() == [], "objects in the bucket before any move"
    move_read_delete(sh, "cold_s3", objects)
