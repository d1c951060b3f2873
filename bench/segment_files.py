#!/usr/bin/env python3
"""What appending to the durable queue's segment files costs the kernel: new files
against released ones written over (SegmentLog's recycling), side by side.

Appends --gib GiB in records of --record bytes (a loadgen request of ~500 spans)
to 64 MiB segments, the way SegmentLog does: a segment is synced when sealed;
two sealed segments stay live, older ones are released. `new` deletes a released
segment and creates the next one; `recycle` keeps up to 4 released files and
writes the next segments over them (renamed, written from the start). With
--sync-every-record each record is also fdatasync'ed (the `always` policy with
one request per group commit: the worst case). Prints per variant the wall
time, this process's user and system CPU, and the whole machine's busy CPU
(from /proc/stat: the kernel's writeback threads included), in turns.

Usage: bench/segment_files.py [--dir DIR] [--gib 3] [--record 406000] [--rounds 2]
                              [--sync-every-record]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time

SEGMENT = 64 << 20


def machine_busy() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # idle and iowait left out


def append(mode: str, d: str, total: int, record: bytes, sync_each: bool) -> dict:
    free: list[str] = []
    live: list[str] = []
    fd, size, seg, written = -1, 0, 0, 0
    busy0, ru0, t0 = machine_busy(), resource.getrusage(resource.RUSAGE_SELF), time.time()
    while written < total:
        if fd < 0 or size + len(record) > SEGMENT:
            if fd >= 0:
                os.fdatasync(fd)
                os.close(fd)
                live.append(path)
                while len(live) > 2:
                    old = live.pop(0)
                    if mode == "recycle" and len(free) < 4:
                        free.append(old + ".free")
                        os.rename(old, free[-1])
                    else:
                        os.remove(old)
            seg += 1
            path = os.path.join(d, f"{seg:020d}.seg")
            if mode == "recycle" and free:
                os.rename(free.pop(0), path)
                fd = os.open(path, os.O_WRONLY)
            else:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, b"\0" * 32)  # a header
            os.fdatasync(fd)
            size = 32
        os.write(fd, record)
        size += len(record)
        written += len(record)
        if sync_each:
            os.fdatasync(fd)
    os.close(fd)
    ru1, busy1, t1 = resource.getrusage(resource.RUSAGE_SELF), machine_busy(), time.time()
    for name in os.listdir(d):
        os.remove(os.path.join(d, name))
    return {"wall": t1 - t0, "user": ru1.ru_utime - ru0.ru_utime,
            "sys": ru1.ru_stime - ru0.ru_stime, "busy": busy1 - busy0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="", help="where to write (default: a temporary directory "
                    "under the system's temp dir: use the data disk's file system)")
    ap.add_argument("--gib", type=float, default=3.0)
    ap.add_argument("--record", type=int, default=406000, help="bytes per append")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sync-every-record", action="store_true")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="segment-files-", dir=args.dir or None)
    try:
        record = os.urandom(args.record)
        total = int(args.gib * (1 << 30))
        print(f"{args.gib} GiB in records of {args.record} bytes, 64 MiB segments, fdatasync "
              f"{'after every record' if args.sync_every_record else 'per segment'}")
        print(f"{'round':>5} {'variant':<8} {'wall s':>7} {'user s':>7} {'sys s':>7} "
              f"{'machine busy CPU-s':>19}")
        sums = {"new": 0.0, "recycle": 0.0}
        for r in range(1, args.rounds + 1):
            for mode in ("new", "recycle"):
                m = append(mode, d, total, record, args.sync_every_record)
                sums[mode] += m["busy"]
                print(f"{r:>5} {mode:<8} {m['wall']:>7.2f} {m['user']:>7.2f} {m['sys']:>7.2f} "
                      f"{m['busy']:>19.2f}")
        if sums["new"]:
            print(f"recycle / new, machine busy CPU over all rounds: "
                  f"{sums['recycle'] / sums['new']:.2f}")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
