#!/usr/bin/env bash
# Fetches chDB's libchdb.so (embedded ClickHouse) from the npm registry into a
# cache outside the build tree, checked against a pinned integrity hash.
# Idempotent: does nothing when the pinned library is already cached.
set -euo pipefail

PKG="@chdb/lib-linux-x64-gnu"
VERSION="26.5.3"
INTEGRITY="sha512-fPrLmRt5Moor9yGz4mazbrNje4t7X9KB2mTGkXFWRxRBs2iKy8yh6jx11xsa0Qr3iDFMU/yHqd+bVdYJXu3QaQ=="

CACHE="${SPANHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spanhouse}"
DEST="$CACHE/chdb-$VERSION"
if [[ -f "$DEST/libchdb.so" && -f "$DEST/integrity" && "$(cat "$DEST/integrity")" == "$INTEGRITY" ]]; then
  exit 0
fi

command -v npm >/dev/null || { echo "fetch_chdb: npm is needed (apt-get install npm)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch_chdb: downloading $PKG@$VERSION (~170 MB) into $DEST"
(cd "$tmp" && npm pack --silent "$PKG@$VERSION" >/dev/null)
tgz="$(ls "$tmp"/*.tgz)"
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [[ "$got" != "$INTEGRITY" ]]; then
  echo "fetch_chdb: integrity mismatch for $PKG@$VERSION" >&2
  echo "  want $INTEGRITY" >&2
  echo "  got  $got" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$tmp" package/libchdb.so
mkdir -p "$DEST"
mv "$tmp/package/libchdb.so" "$DEST/libchdb.so.partial"
mv "$DEST/libchdb.so.partial" "$DEST/libchdb.so"
echo "$INTEGRITY" > "$DEST/integrity"
echo "fetch_chdb: ready: $DEST/libchdb.so"
