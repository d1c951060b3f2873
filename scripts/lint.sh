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
tidy_out="$(printf '%s\n' "${srcs[@]}" |
  xargs -P "$(nproc)" -n 3 clang-tidy -p "$BUILD_DIR" --quiet 2>&1 || true)"
if grep -qE "(warning|error):" <<<"$tidy_out"; then
  grep -E "(warning|error):" <<<"$tidy_out" >&2
  echo "lint: clang-tidy found problems" >&2
  exit 1
fi
echo "lint: clean (${#files[@]} files formatted, ${#srcs[@]} sources tidy)"
