"""Jaeger's indices as teams run them, on a real OpenSearch 2.19 and a real Elasticsearch 7.10.2
node (`search_store`), each checked against Jaeger v1.75.0 itself:

- index layouts: rollover indices behind read and write aliases (Jaeger's use_aliases) and a
  date separator other than '-' (Jaeger's date_layout). spanhouse dual-writes in the layout and
  a Jaeger configured the same way reads its traces as it reads its own; spanhouse reads the
  traces that Jaeger wrote, and they equal Jaeger's answer;
- authentication: an API key and a client certificate, each refused when missing or wrong by a
  guard in front of the node (search_proxy.py: the nodes have no security plugin); refused
  credentials hold the spans back (nothing dead-lettered) until they are fixed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import free_ports
from jaeger_server import jaeger_factory  # noqa: F401  (a fixture)
from search_proxy import SearchProxy
from test_auth_tls import make_cert, run_serve
from test_migration import (count, metric, normalized_trace, rich_request, run_cli,
                            trace_view, wait_until)

# Jaeger's settings for each layout, and spanhouse's keys for the same.
LAYOUTS = {
    "aliases": ({"use_aliases": True}, "  use_aliases: true\n"),
    "dotted-dates": ({"indices": {"spans": {"date_layout": "2006.01.02"},
                                  "services": {"date_layout": "2006.01.02"}}},
                     "  index_date_separator: '.'\n"),
}


def config(path: Path, store, url: str, prefix: str, extra: str = "", dual_write: bool = True,
           read_from: str = "clickhouse") -> Path:
    """spanhouse's configuration: the search store's section named for its engine."""
    text = f"secondary:\n  type: {store.engine}\n" if dual_write else ""
    text += (f"{store.engine}:\n  urls: {url}\n  index_prefix: {prefix}\n"
             "  shards: 1\n  replicas: 0\n" + extra +
             f"query:\n  read_from: {read_from}\nwriter:\n  max_age_ms: 300\n")
    path.write_text(text)
    return path


def same_traces(ours, theirs, traces, view=trace_view) -> None:
    """Each trace as `ours` answers it equals `theirs`'s answer, as `view` sees them."""
    for trace in traces:
        a, b = ours.get_trace(trace), theirs.get_trace(trace)
        assert a.status_code == 200 and b.status_code == 200, (trace, a.text, b.text)
        assert view(a.json()) == view(b.json()), trace


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_jaeger_layouts_both_ways(search_store, spanhouse_factory, jaeger_factory, tmp_path,
                                  layout):
    jaeger_options, keys = LAYOUTS[layout]
    prefix = f"lay-{layout[:3]}"
    # spanhouse dual-writes in the layout; with aliases it creates the first index behind them
    # (as Jaeger's es-rollover init does) after its templates.
    sh = spanhouse_factory("writer", config=config(tmp_path / "w.yaml", search_store,
                                                    search_store.url, prefix, keys))
    body, counts = rich_request(5, seed=40 + len(layout))
    assert sh.post_traces(body).status_code == 200
    total = sum(counts.values())
    wait_until("spanhouse's documents", lambda: count(search_store, f"{prefix}-jaeger-span-*")
               == total)
    indices = search_store.request("GET", f"/_cat/indices/{prefix}-jaeger-span-*",
                                   params={"h": "index", "format": "json"}).json()
    names = {i["index"] for i in indices}
    if layout == "aliases":
        assert names == {f"{prefix}-jaeger-span-000001"}, names
        aliases = search_store.request("GET", f"/{prefix}-jaeger-span-000001/_alias").json()
        got = aliases[f"{prefix}-jaeger-span-000001"]["aliases"]
        assert set(got) == {f"{prefix}-jaeger-span-read", f"{prefix}-jaeger-span-write"}
        assert got[f"{prefix}-jaeger-span-write"].get("is_write_index") is True
    else:
        day = time.strftime("%Y.%m.%d", time.gmtime(time.time() - 5))
        assert f"{prefix}-jaeger-span-{day}" in names, names

    # Jaeger, set up the same way, reads spanhouse's documents as it reads those it wrote
    # itself in its default layout...
    ref = jaeger_factory("reference", storage=search_store.engine, search_url=search_store.url,
                         index_prefix=f"ref-{layout[:3]}")
    assert ref.post_otlp_json(body).status_code == 200
    for trace in counts:
        ref.wait_for_trace(trace, counts[trace])
    jaeger = jaeger_factory("jaeger", storage=search_store.engine, search_url=search_store.url,
                            index_prefix=prefix, create_mappings=False,
                            storage_options=jaeger_options)
    same_traces(jaeger, ref, counts, normalized_trace)
    # ...and writes traces of its own into the same layout, which spanhouse reads from it.
    body2, counts2 = rich_request(4, seed=90 + len(layout))
    assert jaeger.post_otlp_json(body2).status_code == 200
    wait_until("Jaeger's documents", lambda: count(search_store, f"{prefix}-jaeger-span-*")
               == total + sum(counts2.values()))
    reader = spanhouse_factory("reader", config=config(
        tmp_path / "r.yaml", search_store, search_store.url, prefix, keys, dual_write=False,
        read_from=search_store.engine))
    for trace in counts2:
        jaeger.wait_for_trace(trace, counts2[trace])
    same_traces(reader, jaeger, counts2)
    r = reader.get_trace(next(iter(counts2)))
    assert r.headers.get("X-Spanhouse-Read-Source") == search_store.engine
    # The services Jaeger lists are those both wrote.
    services = reader.session.get(reader.query_url + "/api/services", timeout=10).json()["data"]
    assert {"shop-0", "shop-1", "shop-2"} <= set(services)

    # The backfill reads the same layout: every document, spanhouse's and Jaeger's, imported.
    target = spanhouse_factory("target")
    now = time.time()
    checkpoint = tmp_path / "backfill.checkpoint"
    flags = ["--use-aliases"] if layout == "aliases" else ["--date-layout", "2006.01.02"]
    r = run_cli(["backfill", "--from", search_store.engine, "--url", search_store.url,
                 "--index-prefix", prefix, "--server", target.query_url,
                 "--start", str(int(now - 3600)), "--end", str(int(now + 60)),
                 "--checkpoint", str(checkpoint)] + flags)
    assert r.returncode == 0, r.stderr + r.stdout
    assert json.loads(checkpoint.read_text())["imported"] == total + sum(counts2.values())
    same_traces(target, jaeger, counts2)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """The guard's server certificate, and a client certificate it trusts."""
    server_dir = tmp_path_factory.mktemp("server-cert")
    client_dir = tmp_path_factory.mktemp("client-cert")
    return make_cert(server_dir), make_cert(client_dir)


def test_api_key_and_client_certificate(search_store, spanhouse_factory, tmp_path, certs):
    (server_cert, server_key), (client_cert, client_key) = certs
    key = "c3BhbmhvdXNlOnRlc3Qta2V5LTEyMw=="
    proxy = SearchProxy(search_store.url, api_key=key, cert=(server_cert, server_key),
                        client_ca=client_cert)
    try:
        tls = f"  tls_ca_file: {server_cert}\n"
        client = f"  tls_cert: {client_cert}\n  tls_key: {client_key}\n"
        body, counts = rich_request(4, seed=77)
        total = sum(counts.values())

        # Both credentials: every span is written, each request carrying the key.
        sh = spanhouse_factory("authed", config=config(
            tmp_path / "a.yaml", search_store, proxy.url, "auth-ok",
            tls + client + f"  api_key: {key}\n"))
        assert sh.post_traces(body).status_code == 200
        wait_until("documents through the guard",
                   lambda: count(search_store, "auth-ok-jaeger-span-*") == total)
        assert proxy.forwarded > 0 and proxy.refused == 0
        assert set(proxy.keys_seen) == {f"ApiKey {key}"}
        # The engine was checked through it at start.
        engine = {"opensearch": "OpenSearch", "elasticsearch": "Elasticsearch"}[search_store.engine]
        assert f"{engine} {search_store.version}" in sh.stderr_text(), sh.stderr_text()[-2000:]

        # A wrong key: refused, retried, nothing dead-lettered; fixed, everything arrives.
        wrong = config(tmp_path / "b.yaml", search_store, proxy.url, "auth-key",
                       tls + client + "  api_key: d3Jvbmc=\n")
        sh2 = spanhouse_factory("wrong-key", config=wrong)
        assert sh2.post_traces(body).status_code == 200
        wait_until("the wrong key refused", lambda: proxy.refused >= 2)
        time.sleep(2)
        assert count(search_store, "auth-key-jaeger-span-*") == 0
        assert metric(sh2, "spanhouse_sink_dead_letter_rows_total", 'sink="opensearch"') == 0
        sh2.stop_ok()
        config(tmp_path / "b.yaml", search_store, proxy.url, "auth-key",
               tls + client + f"  api_key: {key}\n")
        sh2.start()
        wait_until("the held spans once the key is right",
                   lambda: count(search_store, "auth-key-jaeger-span-*") == total)

        # No client certificate: the handshake is refused; nothing is written.
        failures = proxy.handshake_failures
        sh3 = spanhouse_factory("no-cert", config=config(
            tmp_path / "c.yaml", search_store, proxy.url, "auth-cert",
            tls + f"  api_key: {key}\n"))
        assert sh3.post_traces(body).status_code == 200
        wait_until("handshakes refused", lambda: proxy.handshake_failures >= failures + 2)
        assert count(search_store, "auth-cert-jaeger-span-*") == 0
        assert metric(sh3, "spanhouse_sink_dead_letter_rows_total", 'sink="opensearch"') == 0
    finally:
        proxy.close()


def test_an_unsupported_engine_stops_start_up(tmp_path):
    """A cluster that says it is Elasticsearch 8: a start-up error naming it, not a stream of
    failed writes."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = b'{"version":{"number":"8.15.0"},"tagline":"You Know, for Search"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    (port,) = free_ports(1)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cfg = tmp_path / "es8.yaml"
        cfg.write_text(f"secondary:\n  type: elasticsearch\nelasticsearch:\n"
                       f"  urls: http://127.0.0.1:{port}\n")
        otlp, query, grpc, zipkin = free_ports(4)
        r = run_serve(["--data-dir", str(tmp_path / "data"), "--config", str(cfg),
                       "--otlp-http-listen", f"127.0.0.1:{otlp}",
                       "--query-listen", f"127.0.0.1:{query}",
                       "--otlp-grpc-listen", f"127.0.0.1:{grpc}",
                       "--zipkin-listen", f"127.0.0.1:{zipkin}"], {}, tmp_path)
        assert r.returncode != 0, r.stderr
        assert "Elasticsearch 8.15.0 is not supported" in r.stderr, r.stderr[-2000:]
        assert "Elasticsearch 7.x" in r.stderr
    finally:
        server.shutdown()
