"""The built-in web UI in a real browser.

Debian's Chromium, driven by playwright-core (tests/ui/browse.mjs, pinned in
tests/ui/package-lock.json; both installed by scripts/setup.sh --tests), opens
the UI of a real spanhouse filled by the real OpenTelemetry SDK
(ui_traces.py): the trace view is measured span by span against what was sent
(nesting, order, durations as text and as bar geometry, errors, the critical
path, span details, collapsing); the overview, search, service page and
dependency graph are checked where this spanhouse serves their endpoints, and
skipped with the reason where it does not (their "not served" notices are
checked instead). Screenshots are kept under build/ui-artifacts/
(SPANHOUSE_UI_ARTIFACTS to change), one folder per test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

from conftest import REPO_ROOT, SpanhouseFactory, otlp_json_request, otlp_json_span
import ui_traces

UI_DIR = REPO_ROOT / "tests" / "ui"
BROWSE = UI_DIR / "browse.mjs"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("SPANHOUSE_UI_ARTIFACTS") or
                 REPO_ROOT / os.environ.get("SPANHOUSE_BUILD_DIR", "build") / "ui-artifacts")
QUERY_TOKEN = "ui-test-query-token-0123456789"
ERROR_RED = "rgb(200, 55, 45)"  # app.css --err


def _browser_problem() -> str:
    if shutil.which("node") is None:
        return "node is not installed"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}"
    if not (UI_DIR / "node_modules" / "playwright-core").is_dir():
        return "tests/ui/node_modules has no playwright-core"
    return ""


@pytest.fixture(scope="module", autouse=True)
def browser_ready():
    problem = _browser_problem()
    if problem:
        # The browser is a test tool like the venv: a missing one is a broken setup, not a skip.
        pytest.fail(f"{problem}: run scripts/setup.sh --tests", pytrace=False)
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)


class Filled:
    def __init__(self, sh, sent):
        self.sh = sh
        self.sent = sent
        self.checkout = sent["checkout"]
        self.trace_id = self.checkout["trace_id"]


@pytest.fixture(scope="module")
def ui(tmp_path_factory, request, backend) -> Filled:
    """One spanhouse with the UI test's traces, all stored."""
    work = tmp_path_factory.mktemp("ui")
    config = work / "spanhouse.yaml"
    # The dependency job looks every second and takes a minute 120 s after it
    # ended (the default lag); ui_traces.py's spans are 90 s old when sent.
    config.write_text("dependencies:\n  interval_s: 1\n  lag_s: 120\n")
    factory = SpanhouseFactory(work, clickhouse=backend)
    request.module._spanhouse_factories = [factory]
    sh = factory(config=config)
    sent = ui_traces.send(sh.traces_url)
    for t in [sent["checkout"]] + sent["products"]:
        want = len(t["spans"])
        sh.wait_for_trace(t["trace_id"], lambda d, n=want: sum(len(x["spans"]) for x in d["data"]) == n,
                          what=f"did not show all {want} spans")
    yield Filled(sh, sent)
    factory.teardown()


def browse(base: str, scenario: str, out: Path, **arg) -> dict:
    """Runs one browse.mjs scenario; fails the test if the page could not be driven
    or misbehaved (an uncaught error, a console error, a dialog, a request elsewhere)."""
    cmd = ["node", str(BROWSE), "--base", base, "--out", str(out), "--scenario", scenario,
           "--arg", json.dumps(arg)]
    env = dict(os.environ, CHROMIUM=CHROMIUM)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"browse.mjs {scenario} did not finish in 180 s; screenshots in {out}\n{e.stderr}",
                    pytrace=False)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    result = json.loads(lines[-1]) if lines else {"ok": False, "error": "no JSON on stdout"}
    if proc.returncode != 0 or not result.get("ok"):
        pytest.fail(f"browse.mjs {scenario} failed (exit {proc.returncode}): {result.get('error')}\n"
                    f"stderr: {proc.stderr[-4000:]}\nscreenshots: {out}", pytrace=False)
    assert result["pageErrors"] == [], result["pageErrors"]
    assert result["consoleErrors"] == [], result["consoleErrors"]
    assert result["dialogs"] == [], f"a dialog opened (injected script?): {result['dialogs']}"
    assert result["foreignRequests"] == [], f"requests outside spanhouse: {result['foreignRequests']}"
    return result


def artifacts(request) -> Path:
    return ARTIFACTS / request.node.name


def missing_endpoint(sh, path: str, **params) -> bool:
    """True when spanhouse answers `path` with its generic "no such route" 404."""
    r = sh.session.get(sh.query_url + path, params=params, timeout=30)
    if r.status_code != 404:
        return False
    try:
        msg = r.json()["errors"][0]["msg"]
    except (ValueError, KeyError, IndexError, TypeError):
        return True
    return msg.startswith("not found: /")


def require_served(sh, *paths: str) -> None:
    missing = [p for p in paths if missing_endpoint(sh, p)]
    assert not missing, f"spanhouse does not serve {', '.join(missing)}, which the pages use"


def parse_duration_text(text: str) -> tuple[float, float]:
    """'107.04ms' -> (107040 µs, the rounding's half-step in µs)."""
    m = re.fullmatch(r"(\d+)m (\d+)s", text)
    if m:
        return int(m[1]) * 60e6 + int(m[2]) * 1e6, 0.5e6
    m = re.fullmatch(r"(\d+(?:\.(\d+))?)(µs|ms|s)", text)
    assert m, f"not a duration: {text!r}"
    unit = {"µs": 1, "ms": 1e3, "s": 1e6}[m[3]]
    decimals = len(m[2] or "")
    return float(m[1]) * unit, 0.5 * unit / 10 ** decimals + 1e-6


def expected_tree(spans: list[dict]) -> tuple[list[str], dict]:
    """Depth-first order (children by start time, then id) and depth per span id."""
    kids: dict[str, list[dict]] = {}
    for s in spans:
        kids.setdefault(s["parent_span_id"], []).append(s)
    for v in kids.values():
        v.sort(key=lambda s: (s["start_ns"], s["span_id"]))
    order, depth = [], {}

    def walk(s, d):
        order.append(s["span_id"])
        depth[s["span_id"]] = d
        for c in kids.get(s["span_id"], []):
            walk(c, d + 1)

    for root in kids[""]:
        walk(root, 0)
    return order, depth


# ---------------------------------------------------------------------------


def test_ui_files_are_served(ui):
    sh = ui.sh
    r = requests.get(sh.query_url + "/", timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html"), r.headers
    assert "default-src 'none'" in r.headers["Content-Security-Policy"]
    assert '<script type="module" src="/ui/app.js">' in r.text
    page = requests.get(sh.query_url + f"/trace/{ui.trace_id}", timeout=30)
    assert page.status_code == 200 and page.text == r.text  # client-side routes get index.html
    js = requests.get(sh.query_url + "/ui/app.js", timeout=30)
    assert js.status_code == 200 and js.headers["Content-Type"].startswith("text/javascript")
    again = requests.get(sh.query_url + "/ui/app.js", headers={"If-None-Match": js.headers["ETag"]},
                         timeout=30)
    assert again.status_code == 304 and again.content == b""
    assert requests.get(sh.query_url + "/ui/nope.js", timeout=30).status_code == 404
    assert requests.post(sh.query_url + "/", data=b"x", timeout=30).status_code == 405


def test_trace_waterfall(ui, request):
    spans = ui.checkout["spans"]
    by_id = {s["span_id"]: s for s in spans}
    p3 = next(s for s in spans if s["key"] == "P3")
    c1 = next(s for s in spans if s["key"] == "C1")
    res = browse(ui.sh.query_url, "trace", artifacts(request), traceId=ui.trace_id,
                 detailSpanId=p3["span_id"], collapseSpanId=c1["span_id"])

    # Reached by typing the id (in capitals) into the box at the top.
    assert res["url"].endswith(f"/trace/{ui.trace_id}"), res["url"]
    assert res["meta"]["traceId"] == ui.trace_id
    assert res["meta"]["spanCount"] == str(len(spans))

    rows = res["rows"]
    order, depth = expected_tree(spans)
    assert [r["spanId"] for r in rows] == order, "rows not in depth-first order by start time"
    t0 = min(s["start_ns"] for s in spans) // 1000
    t_end = max(s["end_ns"] for s in spans) // 1000
    trace_us = t_end - t0
    got, want = parse_duration_text(res["meta"]["duration"])
    assert abs(got - trace_us) <= want, (res["meta"]["duration"], trace_us)

    root_x = rows[0]["indentX"]
    step = next(r["indentX"] for r in rows if r["depth"] == "1") - root_x
    assert step >= 8, f"children are not indented: {step}px"
    for r in rows:
        s = by_id[r["spanId"]]
        what = f"span {s['key']} ({s['service']}: {s['name']})"
        assert r["visible"], what
        assert (r["service"], r["operation"]) == (s["service"], s["name"]), what
        assert int(r["depth"]) == depth[s["span_id"]], what
        assert r["parentId"] == s["parent_span_id"], what
        assert r["indentX"] == pytest.approx(root_x + depth[s["span_id"]] * step, abs=0.5), what
        dur_us = (s["end_ns"] - s["start_ns"]) // 1000
        assert int(r["durationUs"]) == dur_us, what
        shown, tol = parse_duration_text(r["durationText"])
        assert abs(shown - dur_us) <= tol, f"{what}: shows {r['durationText']}, sent {dur_us} µs"
        # The bar sits where the span ran, as wide as it lasted, on the trace's scale.
        track = r["track"]
        x = track["x"] + (s["start_ns"] // 1000 - t0) / trace_us * track["width"]
        w = max(dur_us / trace_us * track["width"], 1)
        assert r["bar"]["x"] == pytest.approx(x, abs=1.0), f"{what}: bar starts at {r['bar']['x']}, want {x}"
        assert r["bar"]["width"] == pytest.approx(w, abs=1.0), f"{what}: bar {r['bar']['width']} px, want {w}"
        assert r["isError"] == s["error"] and (r["error"] == "true") == s["error"], what
        assert (r["barColor"] == ERROR_RED) == s["error"], f"{what}: bar colour {r['barColor']}"
        on_path = s["key"] not in ui.sent["off_critical_path"]
        assert (r["critical"] == "true") == on_path, f"{what}: critical path"
        assert (r["criticalSegments"] > 0) == on_path, what

    # The details of the failed card-network call.
    d = res["detail"]
    assert d["attributes"]["ui.test.key"] == "P3"
    assert d["attributes"]["otel.status_code"] == "ERROR"
    assert d["attributes"]["otel.status_description"] == "card declined"
    assert d["attributes"]["span.kind"] == "client"
    assert d["resource"]["service.version"] == "1.4.2"
    assert any("exception" in e and "CardDeclined" in e for e in d["events"]), d["events"]
    # Markup in an attribute is shown as text, never run.
    assert any("card declined <script>alert(1)</script>" in e for e in d["events"]), d["events"]
    assert d["scripts"] == 0
    assert "ERROR" in d["errorTexts"]

    # Collapsing C1 hides exactly its descendants; expanding shows them again.
    descendants = {s["span_id"] for s in spans
                   if s["key"] in {"C2", "C3", "I1", "I2", "C4", "P1", "P2", "P3"}}
    assert set(res["collapse"]["hidden"]) == descendants
    assert res["collapse"]["hiddenAfterExpand"] == 0


def test_unknown_trace_and_page_say_so(ui, request):
    res = browse(ui.sh.query_url, "page", artifacts(request), path="/trace/0123456789abcdef0123456789abcdef")
    assert [n["kind"] for n in res["notices"]] == ["warn"], res["notices"]
    assert "0123456789abcdef0123456789abcdef was not found" in res["notices"][0]["text"]
    assert res["rows"] == 0
    res = browse(ui.sh.query_url, "page", artifacts(request), path="/trace/not-hex!")
    assert [n["kind"] for n in res["notices"]] == ["error"], res["notices"]
    assert "HTTP 400" in res["notices"][0]["text"], res["notices"]


def test_overview_lists_services(ui, request):
    require_served(ui.sh, "/api/services", "/api/spanhouse/services/summary")
    res = browse(ui.sh.query_url, "overview", artifacts(request))
    rows = {r["service"]: r for r in res["rows"]}
    assert {"frontend", "checkout", "inventory", "payment", "catalog"} <= set(rows), list(rows)
    for name in ("frontend", "checkout", "payment"):
        cells = rows[name]["cells"]
        assert cells["calls"] not in ("", "–", "0"), (name, cells)
        assert cells["p99_ms"] not in ("", "–"), (name, cells)
    assert rows["payment"]["cells"]["error_rate"] not in ("0%", "–"), rows["payment"]
    assert rows["inventory"]["cells"]["error_rate"] == "0%", rows["inventory"]
    assert rows["frontend"]["sparklines"] == 2, rows["frontend"]


def test_search_finds_and_opens_traces(ui, request):
    require_served(ui.sh, "/api/services", "/api/traces")
    res = browse(ui.sh.query_url, "search", artifacts(request), service="frontend",
                 minDuration="10ms", open=ui.trace_id)
    assert "service=frontend" in res["url"] and "minDuration=10ms" in res["url"], res["url"]
    assert res["fieldTag"] == "select"
    found = {r["traceId"] for r in res["results"]}
    want = {ui.trace_id} | {t["trace_id"] for t in ui.sent["products"]}
    assert want <= found, f"missing: {want - found}"
    assert res["dots"] == len(res["results"])
    assert res["opened"] and res["opened"]["rows"] == len(ui.checkout["spans"]), res["opened"]


def test_service_page(ui, request):
    require_served(ui.sh, "/api/spanhouse/services/summary", "/api/metrics/calls",
                       "/api/metrics/errors", "/api/metrics/latencies", "/api/traces",
                       "/api/spanhouse/services/frontend/operations/summary")
    res = browse(ui.sh.query_url, "service", artifacts(request), service="frontend")
    assert res["notices"] == [], res["notices"]
    assert len(res["tiles"]) == 6, res["tiles"]
    assert [c["title"] for c in res["charts"]] == ["Requests per second", "Errors (% of requests)", "Latency"]
    assert [c["lines"] for c in res["charts"]] == [1, 1, 3], res["charts"]
    assert {"GET /checkout", "GET /products"} <= set(res["operations"]), res["operations"]
    assert res["slowTraces"] and res["slowTraces"][0] == ui.trace_id, res["slowTraces"]


def test_dependency_graph(ui, request):
    require_served(ui.sh, "/api/dependencies")
    want = {("frontend", "checkout"), ("checkout", "inventory"), ("checkout", "payment"),
            ("frontend", "catalog")}
    deadline = time.monotonic() + 150
    while True:  # the spans' minute is computed 30-90 s after they were sent
        doc = ui.sh.session.get(ui.sh.query_url + "/api/dependencies", timeout=30,
                                params={"endTs": int(time.time() * 1000), "lookback": 3600_000}).json()
        have = {(e["parent"], e["child"]) for e in doc.get("data") or []}
        if want <= have:
            break
        assert time.monotonic() < deadline, f"edges {want - have} not computed; have {have}"
        time.sleep(1)
    res = browse(ui.sh.query_url, "dependencies", artifacts(request))
    assert {"frontend", "checkout", "inventory", "payment", "catalog"} <= set(res["nodes"])
    assert want <= {tuple(e) for e in res["edges"]}, res["edges"]


def test_token_prompt(spanhouse_factory, request):
    """With auth.query_tokens the UI's files load without a token; the UI asks for
    one when /api refuses, keeps it, and sends it."""
    sh = spanhouse_factory("ui-auth", env={"SPANHOUSE_AUTH_QUERY_TOKENS": QUERY_TOKEN})
    trace_id = "5b8efff798038103d269b633813fc60c"
    now = time.time_ns()
    spans = [otlp_json_span(trace_id, "00000000000000a1", "root", start_ns=now, dur_ns=9_000_000),
             otlp_json_span(trace_id, "00000000000000a2", "child", parent="00000000000000a1",
                            start_ns=now + 1_000_000, dur_ns=5_000_000),
             otlp_json_span(trace_id, "00000000000000a3", "grandchild", parent="00000000000000a2",
                            start_ns=now + 2_000_000, dur_ns=2_000_000)]
    assert sh.post_traces(otlp_json_request(spans, service="auth-ui")).status_code == 200
    sh.session.headers["Authorization"] = f"Bearer {QUERY_TOKEN}"
    sh.wait_for_trace(trace_id, lambda d: len(d["data"][0]["spans"]) == 3)
    assert requests.get(sh.query_url + f"/api/traces/{trace_id}", timeout=30).status_code == 401
    assert requests.get(sh.query_url + "/ui/app.js", timeout=30).status_code == 200

    res = browse(sh.query_url, "token", artifacts(request), traceId=trace_id, token=QUERY_TOKEN)
    assert res["status"] == 200
    assert res["panelShown"], "the token panel did not open on a 401"
    assert any("query token" in n["text"] for n in res["before"]), res["before"]
    assert res["rows"] == 3
    assert res["stored"]


def test_pages_say_what_share_sampling_keeps(spanhouse_factory, tmp_path, request):
    """With head and tail sampling on, the services and search pages say what is kept and that
    the metrics still count every span."""
    config = tmp_path / "sampling.yaml"
    config.write_text("sampling:\n  head:\n    probability: 0.25\n    services: cart=0.01\n"
                      "  tail:\n    policies: error; rate 5/s\n")
    sh = spanhouse_factory("ui-sampling", config=config)
    for path in ("/", "/search"):
        res = browse(sh.query_url, "page", artifacts(request), path=path)
        texts = [n["text"] for n in res["notices"] if n["kind"] == "info"]
        assert any("Sampling keeps 25% of traces (cart: 1%); of those, the traces these policies "
                   "keep: error; rate 5/s." in t and "count every span" in t
                   for t in texts), (path, res["notices"])


def test_a_trace_page_names_a_node_it_could_not_ask(tmp_path, request):
    """Three nodes that forward to each other, one of them down: a trace page on another node
    draws what it has and says which node's spans may be missing."""
    from test_otelcol_front import placement
    from test_peers import start_nodes

    factory, nodes = start_nodes(tmp_path, request)
    try:
        now = time.time_ns()
        while True:  # a trace node-a owns, so its page is whole without node-c
            trace_id = os.urandom(16).hex()
            spans = [otlp_json_span(trace_id, f"{i + 1:016x}", f"op{i}",
                                    parent=f"{i:016x}" if i else "", start_ns=now + i * 1000,
                                    dur_ns=1_000_000) for i in range(3)]
            for i, span in enumerate(spans):
                assert nodes[i].post_traces(otlp_json_request([span], "peers-ui")).status_code == 200
            nodes[2].wait_for_trace(trace_id, lambda d: len(d["data"][0]["spans"]) == 3)
            if placement(nodes[:1], {trace_id: spans})[trace_id][0]:
                break
        nodes[2].kill()
        res = browse(nodes[0].query_url, "page", artifacts(request), path=f"/trace/{trace_id}")
        assert res["rows"] == 3, res
        warned = [n["text"] for n in res["notices"] if n["kind"] == "warn"]
        assert any("node-c" in t and "may be missing" in t for t in warned), res["notices"]
    finally:
        factory.teardown()
