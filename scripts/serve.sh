#!/usr/bin/env bash
# Sets everything up, then runs spanhouse serve on embedded ClickHouse in
# ./data with the default ports (OTLP/HTTP 127.0.0.1:4318, query 127.0.0.1:16686).
# Extra arguments go to `spanhouse serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec "${SPANHOUSE_BUILD_DIR:-build}/spanhouse" serve --data-dir ./data "$@"
