#!/usr/bin/env bash
# Builds the OpenTelemetry Collector distribution of tools/otelcol (OTLP receiver, OTLP
# exporter, the contrib loadbalancing exporter) that tests/e2e/otelcol_server.py runs in
# front of several spanhouse nodes. scripts/setup_clients.sh calls this.
#
# The OpenTelemetry Collector Builder, pinned by the `tool` directive of tools/otelcol/go.mod,
# is built first; it then generates the distribution's sources from tools/otelcol/builder.yaml
# (each component at a pinned version) and compiles them, all in a cache outside the checkout:
#   ${XDG_CACHE_HOME:-~/.cache}/spanhouse/otelcol-v0.161.0/otelcol   the collector
#                                                      .../src       its generated module
#                                                      .../build.log the builder's log
# Go's own module and build caches hold what it downloads and compiles, as for Jaeger
# (setup_clients.sh). Many minutes on 2 cores the first time; redone only when builder.yaml,
# go.mod or go.sum change (a hash of them is kept beside the binary).
set -euo pipefail
cd "$(dirname "$0")/.."

OTELCOL_VERSION=v0.161.0  # keep in step with tools/otelcol and tests/e2e/otelcol_server.py

if ! command -v go >/dev/null; then
  echo "setup: no Go toolchain; the OpenTelemetry Collector front test will be skipped"
  exit 0
fi

tool=$PWD/tools/otelcol
dir=${XDG_CACHE_HOME:-$HOME/.cache}/spanhouse/otelcol-$OTELCOL_VERSION
inputs_hash=$(cat "$tool/builder.yaml" "$tool/go.mod" "$tool/go.sum" | sha256sum | cut -d' ' -f1)
if [[ -x "$dir/otelcol" && -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$inputs_hash" ]]; then
  exit 0
fi

echo "setup: building the OpenTelemetry Collector $OTELCOL_VERSION (tools/otelcol) into $dir" \
  "(many minutes the first time)"
mkdir -p "$dir"
rm -f "$dir/.stamp"
(cd "$tool" && go build -trimpath -o "$dir/builder" go.opentelemetry.io/collector/cmd/builder)
# The builder writes its sources under output_path (`src`), relative to where it runs.
rm -rf "$dir/src"
if ! (cd "$dir" && ./builder --config "$tool/builder.yaml") >"$dir/build.log" 2>&1; then
  tail -n 40 "$dir/build.log" >&2
  echo "setup: the OpenTelemetry Collector build failed (log: $dir/build.log)" >&2
  exit 1
fi
mv -f "$dir/src/otelcol-spanhouse" "$dir/otelcol"
echo "$inputs_hash" >"$dir/.stamp"
