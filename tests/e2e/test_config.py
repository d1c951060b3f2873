"""Configuration and process-level behaviour of `spanhouse serve`."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import requests

from conftest import (clean_env, describe_response, free_ports, otlp_json_request,
                      otlp_json_span, spanhouse_bin, tail, trace_span_ids)

RUN_TIMEOUT_S = 30


def run_serve(args: list[str], env: dict | None = None, cwd: Path | None = None,
              timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Runs `spanhouse serve ARGS` expecting it to exit by itself; kills it and fails if not."""
    cmd = [spanhouse_bin(), "serve", *args]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=clean_env(env), cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not exit within {timeout}s (it should have)\n"
                    f"stdout:\n{tail(out)}\nstderr:\n{tail(err)}", pytrace=False)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def show(r: subprocess.CompletedProcess) -> str:
    return f"$ {' '.join(r.args)}\nexit {r.returncode}\nstdout:\n{tail(r.stdout)}\n" \
           f"stderr:\n{tail(r.stderr)}"


def parse_printed_config(text: str) -> dict:
    """The two-level YAML of --print-config as {"section.key" or "key": value}."""
    out, section = {}, None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.strip().partition(":")
        value = value.strip().strip('"').strip("'")
        if line.startswith((" ", "\t")):
            assert section, f"indented line without a section: {line!r}"
            out[f"{section}.{key}"] = value
        elif value == "":
            section = key
        else:
            section = None
            out[key] = value
    return out


def ports_args() -> list[str]:
    a, b, c, d = free_ports(4)
    return ["--otlp-http-listen", f"127.0.0.1:{a}", "--query-listen", f"127.0.0.1:{b}",
            "--otlp-grpc-listen", f"127.0.0.1:{c}", "--zipkin-listen", f"127.0.0.1:{d}"]


@pytest.mark.parametrize("yaml_text,key", [
    ("log_level: info\nfrobnicate: 3\n", "frobnicate"),
    ("otlp_http:\n  listen: 127.0.0.1:4318\n  bogus_limit: 10\n", "otlp_http.bogus_limit"),
    ("writer:\n  max_rows: 1000\nquery:\n  listen: 127.0.0.1:16686\n  colour: blue\n",
     "query.colour"),
], ids=["top-level", "in-otlp_http", "in-query"])
def test_unknown_key_exits_2(tmp_path, yaml_text, key):
    cfg = tmp_path / "spanhouse.yaml"
    cfg.write_text(yaml_text)
    data = tmp_path / "data"
    r = run_serve(["--config", str(cfg), "--data-dir", str(data), *ports_args()], cwd=tmp_path)
    assert r.returncode == 2, f"want exit 2 for unknown key {key!r}\n{show(r)}"
    assert key in r.stderr, f"stderr should name the key {key!r}\n{show(r)}"


@pytest.mark.parametrize("yaml_text,key", [
    ('otlp_http:\n  listen: "nope"\n', "otlp_http.listen"),
    ("query:\n  listen: 127.0.0.1:99999\n", "query.listen"),
    ("writer:\n  max_age_ms: 0\n", "writer.max_age_ms"),
    ("otlp_http:\n  threads: many\n", "otlp_http.threads"),
    ("queue:\n  max_bytes: 12 parsecs\n", "queue.max_bytes"),
    ("log_level: chatty\n", "log_level"),
], ids=["listen-nope", "port-out-of-range", "max_age-0", "threads-word", "bytes-unit",
        "log-level"])
def test_bad_value_exits_2(tmp_path, yaml_text, key):
    cfg = tmp_path / "spanhouse.yaml"
    cfg.write_text(yaml_text)
    r = run_serve(["--config", str(cfg), "--data-dir", str(tmp_path / "data")] +
                  ([] if "listen" in key else ports_args()), cwd=tmp_path)
    assert r.returncode == 2, f"want exit 2 for a bad value of {key!r}\n{show(r)}"
    assert key in r.stderr, f"stderr should name the key {key!r}\n{show(r)}"
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir()), \
        f"a config error must not touch the data dir\n{show(r)}"


def test_precedence_yaml_env_flag(tmp_path):
    cfg = tmp_path / "spanhouse.yaml"
    cfg.write_text("query:\n  listen: 127.0.0.1:21111\nwriter:\n  max_age_ms: 250\n")
    base = ["--config", str(cfg), "--print-config"]

    r = run_serve(base, cwd=tmp_path)
    assert r.returncode == 0, show(r)
    printed = parse_printed_config(r.stdout)
    assert printed.get("query.listen") == "127.0.0.1:21111", f"YAML alone\n{show(r)}"
    assert printed.get("writer.max_age_ms") == "250", f"YAML alone\n{show(r)}"
    for key in ("data_dir", "log_level", "otlp_http.listen", "otlp_http.max_body_bytes",
                "otlp_http.threads", "query.listen", "queue.max_bytes", "writer.max_rows",
                "writer.max_bytes", "writer.max_age_ms"):
        assert key in printed, f"--print-config lacks {key!r}\n{show(r)}"

    env = {"SPANHOUSE_QUERY_LISTEN": "127.0.0.1:22222"}
    r = run_serve(base, env=env, cwd=tmp_path)
    assert r.returncode == 0, show(r)
    printed = parse_printed_config(r.stdout)
    assert printed.get("query.listen") == "127.0.0.1:22222", \
        f"SPANHOUSE_QUERY_LISTEN should override the YAML\n{show(r)}"
    assert printed.get("writer.max_age_ms") == "250", show(r)

    r = run_serve(base + ["--query-listen", "127.0.0.1:23333"], env=env, cwd=tmp_path)
    assert r.returncode == 0, show(r)
    printed = parse_printed_config(r.stdout)
    assert printed.get("query.listen") == "127.0.0.1:23333", \
        f"--query-listen should override SPANHOUSE_QUERY_LISTEN\n{show(r)}"
    assert printed.get("writer.max_age_ms") == "250", show(r)


def test_bad_env_value_exits_2(tmp_path):
    r = run_serve(["--data-dir", str(tmp_path / "data"), "--print-config"],
                  env={"SPANHOUSE_QUERY_LISTEN": "nope"}, cwd=tmp_path)
    assert r.returncode == 2, show(r)
    assert "SPANHOUSE_QUERY_LISTEN" in r.stderr or "query.listen" in r.stderr, show(r)


def listing(root: Path) -> dict:
    """Every file and directory under root (root included) -> (mtime_ns, size, mode)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [""] + dirnames + filenames:
            p = Path(dirpath) / name if name else Path(dirpath)
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_mtime_ns, st.st_size, st.st_mode)
    return out


def test_second_instance_on_same_data_dir(spanhouse, tmp_path):
    first = spanhouse
    # Something stored, so the data dir holds real table data.
    trace_id, span_id = os.urandom(16).hex(), os.urandom(8).hex()
    r = first.post_traces(otlp_json_request([otlp_json_span(trace_id, span_id, "before")]))
    assert r.status_code == 200, describe_response(r)
    first.wait_for_trace(trace_id, lambda d: span_id in trace_span_ids(d))

    before = listing(first.data_dir)
    second = run_serve(["--data-dir", str(first.data_dir), *ports_args()], cwd=tmp_path)
    after = listing(first.data_dir)

    assert second.returncode == 1, f"second spanhouse on a data dir in use: want exit 1\n" \
                                   f"{show(second)}"
    changed = {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
               if before.get(k) != after.get(k)}
    assert not changed, f"the second spanhouse changed the data dir: {changed}\n{show(second)}"

    # The first one keeps serving: health, intake and queries.
    assert first.running(), f"the first spanhouse died\n{first.diagnostics()}"
    h = requests.get(first.healthz_url, timeout=10)
    assert h.status_code == 200 and h.text.strip() == "ok", describe_response(h)
    span2 = os.urandom(8).hex()
    r = first.post_traces(otlp_json_request([otlp_json_span(trace_id, span2, "after")]))
    assert r.status_code == 200, describe_response(r)
    doc = first.wait_for_trace(trace_id, lambda d: span2 in trace_span_ids(d))
    assert sorted(trace_span_ids(doc)) == sorted([span_id, span2])

    # Last, so that the checks above run even when this one fails.
    where = " (it went to stdout instead)" if "is in use by another spanhouse" in second.stdout \
        else ""
    assert "is in use by another spanhouse" in second.stderr, \
        f"want the 'in use' message on stderr{where}\n{show(second)}"


def test_logs_go_to_stderr(spanhouse):
    """The brief: spanhouse logs 'spanhouse ready' on stderr once it listens."""
    assert "spanhouse ready" in spanhouse.stderr_text(), \
        f"'spanhouse ready' is not on stderr\n{spanhouse.diagnostics()}"


def test_sigint_stops_cleanly(spanhouse):
    trace_id, span_id = os.urandom(16).hex(), os.urandom(8).hex()
    r = spanhouse.post_traces(otlp_json_request([otlp_json_span(trace_id, span_id, "int")]))
    assert r.status_code == 200, describe_response(r)
    rc = spanhouse.stop(signal.SIGINT)
    assert rc == 0, f"exit {rc} after SIGINT\n{spanhouse.diagnostics()}"
    spanhouse.start()
    spanhouse.wait_for_trace(trace_id, lambda d: span_id in trace_span_ids(d),
                             what="lost the span queued at SIGINT")
