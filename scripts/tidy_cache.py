#!/usr/bin/env python3
"""Which sources clang-tidy must check again: a source found clean before is skipped while
nothing it is checked with has changed.

  tidy_cache.py BUILD_DIR SRC...   prints "SRC KEY" for each source to check ("-" as its key
                                   when it has none); one found clean then is recorded by
                                   creating the empty file KEY in the directory
  tidy_cache.py --dir              prints that directory

A source's key hashes clang-tidy's version, .clang-tidy, the source's compile command, the
source itself and every header its object depends on (ninja's record of the last build:
the project's files by content, the system's by path, size and modification time). A source
ninja has no record of, or one that had warnings, is always checked. Keys are empty files
under $XDG_CACHE_HOME/spanhouse/tidy (~/.cache when unset), so a fresh clone on the same
machine checks only what differs from what was found clean.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "spanhouse" / "tidy"


def ninja_deps(build: Path) -> dict[str, list[str]]:
    """Object -> the files it was compiled from, as ninja recorded them."""
    out = subprocess.run(["ninja", "-C", str(build), "-t", "deps"], capture_output=True,
                         text=True, check=True).stdout
    deps: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            current = line.split(":", 1)[0]
            deps[current] = [] if "(VALID)" in line else None
        elif current is not None and deps[current] is not None:
            deps[current].append(line.strip())
    return deps


class Hasher:
    """A file's digest, once per run; relative paths are ninja's, from the build directory."""

    def __init__(self, build: Path) -> None:
        self.build = build
        self.memo: dict[str, bytes] = {}

    def of(self, path: str) -> bytes:
        if path not in self.memo:
            p = Path(path) if os.path.isabs(path) else self.build / path
            try:
                if ROOT in p.resolve().parents:
                    digest = hashlib.sha256(p.read_bytes()).digest()
                else:
                    st = p.stat()
                    digest = hashlib.sha256(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode()).digest()
            except OSError:
                digest = b"missing:" + path.encode()
            self.memo[path] = digest
        return self.memo[path]


def keys(build: Path, sources: list[str]) -> dict[str, str | None]:
    commands = {}
    for entry in json.loads((build / "compile_commands.json").read_text()):
        src = os.path.relpath(os.path.join(entry["directory"], entry["file"]), ROOT)
        command = entry.get("command") or " ".join(entry.get("arguments", []))
        words = command.split()
        obj = words[words.index("-o") + 1] if "-o" in words[:-1] else ""
        commands[src] = (command, obj)
    deps = ninja_deps(build)
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    config = (ROOT / ".clang-tidy").read_bytes() if (ROOT / ".clang-tidy").exists() else b""
    hasher = Hasher(build)
    out: dict[str, str | None] = {}
    for src in sources:
        command, obj = commands.get(src, ("", ""))
        headers = deps.get(obj)
        if not command or headers is None:
            out[src] = None  # never built here: no record of what it includes
            continue
        h = hashlib.sha256()
        h.update(version.encode() + b"\0" + config + b"\0")
        h.update(command.replace(str(ROOT), "<root>").encode() + b"\0")
        h.update(hasher.of(str(ROOT / src)))
        # Named alike whether ninja recorded them absolute or relative (ccache's
        # base directory makes them relative), in the order of those names.
        named = {}
        for dep in headers:
            full = Path(os.path.normpath(build / dep))
            named[os.path.relpath(full, ROOT) if ROOT in full.parents else str(full)] = dep
        for name in sorted(named):
            h.update(name.encode() + b"\0" + hasher.of(named[name]))
        out[src] = h.hexdigest()
    return out


def main(argv: list[str]) -> int:
    cache = cache_dir()
    if argv == ["--dir"]:
        cache.mkdir(parents=True, exist_ok=True)
        print(cache)
        return 0
    if len(argv) < 1:
        print(__doc__, file=sys.stderr)
        return 2
    build, sources = Path(argv[0]), argv[1:]
    if not build.is_absolute():
        build = ROOT / build
    for src, key in keys(build, sources).items():
        if key is None or not (cache / key).exists():
            print(f"{src} {key or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
