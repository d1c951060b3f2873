#!/usr/bin/env bash
# Sets up everything spanhouse needs on a fresh Debian 12 machine, then builds
# it. Idempotent: a second run installs nothing and rebuilds only what changed.
#   scripts/setup.sh            build deps, libchdb, release build in ./build
#   scripts/setup.sh --tests    also the test tools (Python venv with the real
#                               OpenTelemetry SDK; the Node.js, Go and Java
#                               clients of test_clients.py, and the OpenSearch
#                               and Elasticsearch test nodes: setup_clients.sh;
#                               gofakes3, a real S3-compatible server, from the
#                               Go module proxy; Chromium and playwright-core
#                               for the UI's browser test)
set -euo pipefail
cd "$(dirname "$0")/.."

want_tests=0
[[ "${1:-}" == "--tests" ]] && want_tests=1

# Debian 12 (bookworm) packages; the release pins their versions.
PKGS=(build-essential cmake ninja-build pkg-config git ca-certificates curl openssl
      libboost1.81-dev libsimdjson-dev libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
      libzstd-dev zlib1g-dev libssl-dev libgrpc++-dev libgtest-dev npm python3 python3-venv ccache)
# clang-14 and its runtimes (libFuzzer, ASan, UBSan) build the fuzz targets (tests/fuzz);
# Debian's Chromium (and a font for its screenshots) is the browser the UI test drives (tests/ui);
# Debian's clickhouse-server (18.16) is the real remote server the schema tests run on, and
# Debian's zookeeper (3.8, standalone) the coordinator of the real cluster of them that
# tests/e2e/clickhouse_cluster.py starts (replication, ON CLUSTER DDL).
if ((want_tests)); then
  PKGS+=(clang-format clang-tidy clang-14 libclang-rt-14-dev chromium fonts-dejavu-core
         clickhouse-server zookeeper)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Tools that may come from elsewhere on a developer machine (pyenv python, nodesource npm).
if ((${#missing[@]})); then
  keep=()
  for p in "${missing[@]}"; do
    case "$p" in
      npm) command -v npm >/dev/null || keep+=("$p") ;;
      python3) command -v python3 >/dev/null || keep+=("$p") ;;
      python3-venv) python3 -c 'import venv, ensurepip' 2>/dev/null || keep+=("$p") ;;
      *) keep+=("$p") ;;
    esac
  done
  missing=("${keep[@]+"${keep[@]}"}")
fi
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

scripts/fetch_chdb.sh

# Compiles are cached (ccache, ~/.cache/ccache), shared by every checkout of
# the project: paths under the checkout are hashed relative to it.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
BUILD_DIR="${SPANHOUSE_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${SPANHOUSE_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"

if ((want_tests)); then
  if [[ ! -x .venv/bin/python ]]; then python3 -m venv .venv; fi
  if ! cmp -s tests/e2e/requirements.txt .venv/.requirements 2>/dev/null; then
    .venv/bin/pip install -q --disable-pip-version-check -r tests/e2e/requirements.txt
    cp tests/e2e/requirements.txt .venv/.requirements
  fi
  # Real clients in other languages (tests/e2e/clients), pinned; the OpenSearch and
  # Elasticsearch nodes of tests/e2e/opensearch_server.py.
  scripts/setup_clients.sh
  # The UI's browser test (tests/ui): playwright-core, pinned by its lock file, drives the
  # chromium package above; no browser is downloaded.
  if ! cmp -s tests/ui/package-lock.json tests/ui/node_modules/.spanhouse-lock 2>/dev/null; then
    (cd tests/ui && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent)
    cp tests/ui/package-lock.json tests/ui/node_modules/.spanhouse-lock
  fi
  # The S3 cold volume's test (tests/e2e/test_tiering.py) runs against gofakes3,
  # pinned; installed into $(go env GOPATH)/bin unless that version is there.
  GOFAKES3_VERSION=v1.2.0
  if command -v go >/dev/null; then
    gofakes3="$(go env GOPATH | cut -d: -f1)/bin/gofakes3"
    if ! go version -m "$gofakes3" 2>/dev/null |
        grep -qE "^\s*mod\s+github.com/johannesboyne/gofakes3\s+$GOFAKES3_VERSION\s"; then
      echo "setup: installing gofakes3 $GOFAKES3_VERSION"
      go install "github.com/johannesboyne/gofakes3/cmd/gofakes3@$GOFAKES3_VERSION"
    fi
  else
    echo "setup: no Go toolchain; the S3 cold-volume test will be skipped"
  fi
fi
