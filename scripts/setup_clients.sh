#!/usr/bin/env bash
# Installs the real clients of tests/e2e/test_clients.py, each pinned, each
# from its own package registry (scripts/setup.sh --tests calls this; the
# Python SDK comes with .venv from tests/e2e/requirements.txt):
#   tests/e2e/clients/node  npm ci: OpenTelemetry JS SDK + OTLP exporters, zipkin-js
#   tests/e2e/clients/go    go build: OpenTelemetry Go SDK + otlptracegrpc -> emit_otel
#   tests/e2e/clients/java  mvn package: OpenTelemetry Java SDK + exporter-otlp
#                           -> target/emit-otel.jar (dependencies in target/lib)
#   tools/otelcol           the OpenTelemetry Collector Builder: OTLP in, loadbalancing out,
#                           for tests/e2e/otelcol_server.py (scripts/setup_otelcol.sh)
#   tests/opensearch        mvn package: a real OpenSearch 2.19.6 node for
#                           tests/e2e/opensearch_server.py -> target/opensearch-launcher.jar
#                           (the server and its modules in target/lib)
#   tests/elasticsearch     mvn package: a real Elasticsearch 7.10.2 node (OSS, no x-pack),
#                           the same way -> target/elasticsearch-launcher.jar
# Idempotent: each is redone only when its pinned inputs changed (a hash of them
# is kept beside the output). A missing toolchain skips its client with a note;
# its tests then skip (and fail under CI, which has every toolchain).
set -euo pipefail
cd "$(dirname "$0")/../tests/e2e/clients"

# Prints a hash of the given files; `up_to_date STAMP FILES...` is true when
# STAMP holds it (and STAMP's output exists).
inputs_hash() { cat "$@" | sha256sum | cut -d' ' -f1; }
up_to_date() {
  local stamp=$1
  shift
  [[ -f "$stamp" && "$(cat "$stamp")" == "$(inputs_hash "$@")" ]]
}

# Node.js: the OpenTelemetry JS SDK and zipkin-js.
if command -v npm >/dev/null; then
  if ! up_to_date node/node_modules/.spanhouse-stamp node/package.json node/package-lock.json; then
    echo "setup: installing the Node.js test clients (npm ci)"
    (cd node && npm ci --no-audit --no-fund --silent)
    inputs_hash node/package.json node/package-lock.json >node/node_modules/.spanhouse-stamp
  fi
else
  echo "setup: no npm; the Node.js and Zipkin client tests will be skipped"
fi

# Go: the OpenTelemetry Go SDK over OTLP/gRPC.
if command -v go >/dev/null; then
  mapfile -t go_inputs < <(ls go/go.mod go/go.sum go/*.go)
  if [[ ! -x go/emit_otel ]] || ! up_to_date go/.emit_otel.stamp "${go_inputs[@]}"; then
    echo "setup: building the Go test client (go build)"
    (cd go && go build -o emit_otel .)
    inputs_hash "${go_inputs[@]}" >go/.emit_otel.stamp
  fi
else
  echo "setup: no Go toolchain; the Go client test will be skipped"
fi

# Java: the OpenTelemetry Java SDK over OTLP/HTTP and OTLP/gRPC. Offline first
# (everything may be in ~/.m2 already), then from Maven Central.
if command -v mvn >/dev/null && command -v java >/dev/null; then
  mapfile -t java_inputs < <(find java/pom.xml java/src -type f | sort)
  if [[ ! -f java/target/emit-otel.jar ]] ||
      ! up_to_date java/target/.spanhouse-stamp "${java_inputs[@]}"; then
    echo "setup: building the Java test client (mvn package)"
    (cd java && { mvn -q -B -o package >/dev/null 2>&1 || mvn -q -B package; })
    inputs_hash "${java_inputs[@]}" >java/target/.spanhouse-stamp
  fi
else
  echo "setup: no Maven or Java; the Java client tests will be skipped"
fi

# Jaeger v2 (cmd/jaeger of github.com/jaegertracing/jaeger), the reference
# implementation that tests/e2e/jaeger_server.py runs: pinned by the `tool`
# directive of tools/jaeger/go.mod, built once into a cache outside the checkout
# (several minutes on 2 cores the first time) and rebuilt only when
# tools/jaeger/go.mod or go.sum change. Go's own module and build caches hold
# what it downloads and compiles.
if command -v go >/dev/null; then
  jaeger_tool=$(cd ../../../tools/jaeger && pwd)
  jaeger_dir=${XDG_CACHE_HOME:-$HOME/.cache}/spanhouse/jaeger-v1.75.0
  if [[ ! -x "$jaeger_dir/jaeger" ]] ||
      ! up_to_date "$jaeger_dir/.stamp" "$jaeger_tool/go.mod" "$jaeger_tool/go.sum"; then
    echo "setup: building Jaeger v1.75.0 (cmd/jaeger) into $jaeger_dir (minutes the first time)"
    mkdir -p "$jaeger_dir"
    (cd "$jaeger_tool" && CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X github.com/jaegertracing/jaeger/internal/version.latestVersion=v1.75.0" \
      -o "$jaeger_dir/jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
    mv -f "$jaeger_dir/jaeger.tmp" "$jaeger_dir/jaeger"
    inputs_hash "$jaeger_tool/go.mod" "$jaeger_tool/go.sum" >"$jaeger_dir/.stamp"
  fi
else
  echo "setup: no Go toolchain; the Jaeger reference tests will be skipped"
fi

# The OpenTelemetry Collector (contrib's loadbalancing exporter) that
# tests/e2e/otelcol_server.py runs in front of several spanhouse nodes: built the same way,
# with the OpenTelemetry Collector Builder, into the same cache (setup_otelcol.sh says how).
../../../scripts/setup_otelcol.sh

# OpenSearch and Elasticsearch: not clients, the servers the migration tests and Jaeger's
# stores write to, built the same way (their jars, ~50 MB each, come from Maven Central into
# ~/.m2). Each is rebuilt from an empty target/ so a version bump leaves no old jar in
# target/lib beside the new one.
build_search_launcher() {
  local name=$1 title=$2
  local dir=../../$name
  if command -v mvn >/dev/null && command -v java >/dev/null; then
    local inputs
    mapfile -t inputs < <(find "$dir/pom.xml" "$dir/src" -type f | sort)
    if [[ ! -f "$dir/target/$name-launcher.jar" ]] ||
        ! up_to_date "$dir/target/.spanhouse-stamp" "${inputs[@]}"; then
      echo "setup: building the $title test server (mvn package)"
      rm -rf "$dir/target"
      (cd "$dir" && { mvn -q -B -o package >/dev/null 2>&1 || mvn -q -B package; })
      inputs_hash "${inputs[@]}" >"$dir/target/.spanhouse-stamp"
    fi
  else
    echo "setup: no Maven or Java; the $title tests will be skipped"
  fi
}
build_search_launcher opensearch OpenSearch
build_search_launcher elasticsearch Elasticsearch
