"""`spanhouse bench storage --compare opensearch`: the same loadgen spans in embedded chDB and,
as Jaeger documents, in a real OpenSearch node; both bytes-per-span figures come out, and the
bench's indices and templates are gone afterwards."""

from __future__ import annotations

import re
import subprocess

from conftest import clean_env, spanhouse_bin


def test_bench_storage_compare_opensearch(opensearch):
    out = subprocess.run(
        [spanhouse_bin(), "bench", "storage", "--spans", "5000", "--block-spans", "5000",
         "--lookups", "5", "--compare", "opensearch", "--opensearch-url", opensearch.url],
        capture_output=True, text=True, timeout=600, env=clean_env())
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    clickhouse = re.search(r"^ClickHouse\s+([0-9.]+) bytes/span", text, re.M)
    opensearch_bytes = re.search(r"^OpenSearch\s+([0-9.]+) bytes/span", text, re.M)
    ratio = re.search(r"^ratio opensearch / clickhouse: ([0-9.]+)", text, re.M)
    assert clickhouse and opensearch_bytes and ratio, text[-3000:]
    assert float(clickhouse.group(1)) > 0
    assert float(opensearch_bytes.group(1)) > 0
    assert float(ratio.group(1)) > 0
    assert re.search(r"loadgen replay corpus, seed 1\)", text), text[-3000:]
    spans = int(re.search(r"the same (\d+) spans as Jaeger documents", text).group(1))
    assert f"{spans} span documents (counted)" in text
    # Nothing of the bench's is left in the cluster.
    indices = opensearch.request("GET", "_cat/indices/bench-*", params={"h": "index"}).text
    assert indices.strip() == ""
    templates = opensearch.request("GET", "_cat/templates/bench-*", params={"h": "name"}).text
    assert templates.strip() == ""
