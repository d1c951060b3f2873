#!/usr/bin/env bash
# clang-format (must be clean) and clang-tidy (must be clean) over src/, and the
# folders importing one way (scripts/check_deps.py).
#   scripts/lint.sh          check
#   scripts/lint.sh --fix    rewrite files with clang-format
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${SPANHOUSE_BUILD_DIR:-build}"
mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
clang-format --dry-run --Werror "${files[@]}"
python3 scripts/check_deps.py
mapfile -t srcs < <(git ls-files 'src/*.cc')
# Sources found clean before, with nothing they are checked with changed since
# (scripts/tidy_cache.py), are not checked again; SPANHOUSE_TIDY_ALL=1 checks all.
# Each line of todo: a source and its key ("-": none).
if [[ "${SPANHOUSE_TIDY_ALL:-}" == 1 ]]; then
  mapfile -t todo < <(printf '%s -\n' "${srcs[@]}")
else
  mapfile -t todo < <(python3 scripts/tidy_cache.py "$BUILD_DIR" "${srcs[@]}")
fi
TIDY_CACHE="$(python3 scripts/tidy_cache.py --dir)"
export BUILD_DIR TIDY_CACHE
# One source a run, so each one found clean is recorded as such.
tidy_one() {
  local out
  out="$(clang-tidy -p "$BUILD_DIR" --quiet "$1" 2>&1 || true)"
  if grep -qE "(warning|error):" <<<"$out"; then
    printf '%s\n' "$out"
  elif [[ "$2" != - ]]; then
    touch "$TIDY_CACHE/$2"
  fi
}
export -f tidy_one
tidy_out=""
if ((${#todo[@]} > 0)); then
  tidy_out="$(printf '%s\n' "${todo[@]}" |
    xargs -P "$(nproc)" -L 1 bash -c 'tidy_one "$0" "$1"' 2>&1 || true)"
fi
if grep -qE "(warning|error):" <<<"$tidy_out"; then
  grep -E "(warning|error):" <<<"$tidy_out" >&2
  echo "lint: clang-tidy found problems" >&2
  exit 1
fi
echo "lint: clean (${#files[@]} files formatted, ${#srcs[@]} sources tidy, ${#todo[@]} checked now)"
