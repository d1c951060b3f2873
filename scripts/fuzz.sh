#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang++-14, ASan + UBSan) and runs one of them.
#   scripts/fuzz.sh TARGET SECONDS     TARGET: otlp_proto, otlp_json, decompress or all
# Fails on a crash, an ASan or UBSan report, a leak, a broken invariant or an input that takes
# longer than 25 s; the input is then in build-fuzz/artifacts/TARGET/ (reproduce it with
# build-fuzz/fuzz_TARGET FILE). New coverage found is kept in build-fuzz/corpus/TARGET/ and
# picked up by the next run; the checked-in seeds in tests/fuzz/corpus/ are only read.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(otlp_proto otlp_json decompress)
if [[ $# -ne 2 || ! "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh {otlp_proto|otlp_json|decompress|all} SECONDS" >&2
  exit 2
fi
if [[ "$1" == all ]]; then
  for t in "${targets[@]}"; do "$0" "$t" "$2"; done
  exit 0
fi
target="$1"
seconds="$2"
[[ " ${targets[*]} " == *" $target "* ]] || { echo "fuzz: unknown target '$target'" >&2; exit 2; }

BUILD_DIR="${SPANHOUSE_FUZZ_BUILD_DIR:-build-fuzz}"
CXX_FUZZ="${SPANHOUSE_FUZZ_CXX:-clang++-14}"
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S tests/fuzz -B "$BUILD_DIR" -G Ninja -DCMAKE_CXX_COMPILER="$CXX_FUZZ" >/dev/null
fi
cmake --build "$BUILD_DIR" --target "fuzz_$target" -j"$(nproc)" >/dev/null

work="$BUILD_DIR/corpus/$target"
artifacts="$BUILD_DIR/artifacts/$target"
mkdir -p "$work" "$artifacts"
args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1
      -artifact_prefix="$artifacts/")
[[ -f "tests/fuzz/$target.dict" ]] && args+=(-dict="tests/fuzz/$target.dict")

echo "fuzz: $target for ${seconds}s"
# The first corpus directory is where libFuzzer writes what it finds; the seeds stay untouched.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
log="$BUILD_DIR/fuzz-$target.log"
if ! "$BUILD_DIR/fuzz_$target" "${args[@]}" "$work" "tests/fuzz/corpus/$target" >"$log" 2>&1; then
  tail -n 60 "$log" >&2
  echo "fuzz: $target FAILED; input saved in $artifacts/ (full log: $log)" >&2
  exit 1
fi
# The last status line (execs, coverage, corpus) and the final stats.
grep -E '^#[0-9]+' "$log" | tail -n 1
grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" || true
