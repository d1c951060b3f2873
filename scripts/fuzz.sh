#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang++-14, ASan + UBSan) and runs them.
#   scripts/fuzz.sh TARGET SECONDS   one target: otlp_proto, otlp_json, decompress, zipkin_json,
#                                    zipkin_proto, http_request or durable_log
#   scripts/fuzz.sh all SECONDS      every target for SECONDS each (what CI runs): the five
#                                    decoders side by side, then the other two side by side
# Fails on a crash, an ASan or UBSan report, a leak, a broken invariant or an input that takes
# longer than 25 s; the input is then in build-fuzz/artifacts/TARGET/ (reproduce it with
# build-fuzz/fuzz_TARGET FILE). New coverage found is kept in build-fuzz/corpus/TARGET/ and
# picked up by the next run; the checked-in seeds in tests/fuzz/corpus/ are only read.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true  # the compile cache, as in setup.sh

# What `all` runs at the same time, one group after the other: each group takes SECONDS. The
# decoders share the cores as they always have; the HTTP parser and the durable log (whose
# every input opens a log, with its thread and files) get a core each in a second minute
# rather than making seven share two cores.
groups=("otlp_proto otlp_json decompress zipkin_json zipkin_proto" "columnar http_request durable_log")
read -ra targets <<<"${groups[*]}"
if [[ $# -ne 2 || ! "$2" =~ ^[0-9]+$ || ! " all ${targets[*]} " == *" $1 "* ]]; then
  echo "usage: scripts/fuzz.sh {$(IFS='|'; echo "${targets[*]}")|all} SECONDS" >&2
  exit 2
fi
seconds="$2"
if [[ "$1" == all ]]; then
  run=("${targets[@]}")
else
  run=("$1")
  groups=("$1")
fi

BUILD_DIR="${SPANHOUSE_FUZZ_BUILD_DIR:-build-fuzz}"
CXX_FUZZ="${SPANHOUSE_FUZZ_CXX:-clang++-14}"
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S tests/fuzz -B "$BUILD_DIR" -G Ninja -DCMAKE_CXX_COMPILER="$CXX_FUZZ" >/dev/null
fi
cmake --build "$BUILD_DIR" --target "${run[@]/#/fuzz_}" -j"$(nproc)" >/dev/null

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

# Runs one target; prints its last status line (execs, coverage, corpus) or, on a finding,
# the end of its log and where the input was saved.
fuzz_one() {
  local target="$1" work="$BUILD_DIR/corpus/$1" artifacts="$BUILD_DIR/artifacts/$1"
  local log="$BUILD_DIR/fuzz-$1.log"
  mkdir -p "$work" "$artifacts"
  local args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1
              -artifact_prefix="$artifacts/")
  [[ -f "tests/fuzz/$target.dict" ]] && args+=(-dict="tests/fuzz/$target.dict")
  # The first corpus directory is where libFuzzer writes what it finds; the seeds stay as they are.
  if ! "$BUILD_DIR/fuzz_$target" "${args[@]}" "$work" "tests/fuzz/corpus/$target" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz: $target FAILED; input saved in $artifacts/ (full log: $log)" >&2
    return 1
  fi
  echo "fuzz: $target: $(grep -E '^#[0-9]+' "$log" | tail -n 1)"
}

failed=0
for group in "${groups[@]}"; do
  echo "fuzz: $group for ${seconds}s"
  pids=()
  for t in $group; do
    fuzz_one "$t" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
done
exit "$failed"
