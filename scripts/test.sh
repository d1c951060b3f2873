#!/usr/bin/env bash
# Sets everything up, then runs every test: unit and integration (ctest, real
# chDB), the web UI's logic (node), end to end (pytest: real spanhouse processes,
# real OpenTelemetry SDK, the web UI in Chromium), the Jaeger API's conformance with
# Jaeger v2 itself (tests/conformance),
# the decoders' fuzz targets (tests/fuzz), and the format/lint checks.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true  # the compile cache, as in setup.sh
scripts/setup.sh --tests
BUILD_DIR="${SPANHOUSE_BUILD_DIR:-build}"

echo "== format and lint ($(date -u +%T), ${SECONDS}s)"
scripts/lint.sh

echo "== unit and integration tests (ctest) ($(date -u +%T), ${SECONDS}s)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)"

echo "== web UI logic (node --test) ($(date -u +%T), ${SECONDS}s)"
node --test tests/ui/model.test.mjs

echo "== sink runtime, queue, batcher, deferred-answer and read-switch tests under ThreadSanitizer ($(date -u +%T), ${SECONDS}s)"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="-fsanitize=thread" >/dev/null
cmake --build build-tsan --target sink_test pipeline_test storage_test net_test receivers_test query_test -j"$(nproc)"
TSAN_OPTIONS="halt_on_error=1" build-tsan/sink_test
TSAN_OPTIONS="halt_on_error=1" build-tsan/pipeline_test
TSAN_OPTIONS="halt_on_error=1" build-tsan/storage_test
# The HTTP server's cross-thread parts: answers given on other threads, Stop.
TSAN_OPTIONS="halt_on_error=1" build-tsan/net_test --gtest_filter='HttpResponder*:*Defer*:*Answer*:*Stop*'
# The receivers answering from the durable queue's sync thread (the shared intake's deferred
# answers: OTLP/HTTP, Zipkin, the intake alone). Not the OTLP/gRPC receiver's tests: Debian's
# libgrpc and absl are not built with ThreadSanitizer, which then reports races inside them
# (epoll and absl::Mutex internals) on every call; suppressing those would hide ours too.
TSAN_OPTIONS="halt_on_error=1" build-tsan/receivers_test --gtest_filter='-OtlpGrpcReceiver.*'
# The read switch: a store's call on a thread of its own, the other store's beside it.
TSAN_OPTIONS="halt_on_error=1" build-tsan/query_test --gtest_filter='ReadSwitch*'

echo "== fuzzing (libFuzzer, ASan + UBSan: the decoders, the columnar batch reader, the HTTP request parser and the durable log reader, 60 s each, two rounds side by side) ($(date -u +%T), ${SECONDS}s)"
scripts/fuzz.sh all 60

echo "== end-to-end tests (pytest) ($(date -u +%T), ${SECONDS}s)"
SPANHOUSE_BIN="$PWD/$BUILD_DIR/spanhouse" .venv/bin/python -m pytest -q tests/e2e

echo "== the Jaeger API against Jaeger v2 itself (tests/conformance) ($(date -u +%T), ${SECONDS}s)"
SPANHOUSE_BIN="$PWD/$BUILD_DIR/spanhouse" .venv/bin/python -m pytest -q tests/conformance
