#!/usr/bin/env python3
"""Markdown table of dfccl vs NCCL from one harness HDF5 file that ran both backends (the README's headline table).

Usage: scripts/python.sh scripts/compare_table.py FILE.h5 [--coll all_reduce ...] [--sizes 8,1K,1M,...] [--base nccl]
Columns per size: median time of each backend (us), bus bandwidth (GB/s), and the ratio dfccl/base of busbw (base:
nccl, or e.g. dfccl-blocking for what preemption costs).
"""
import argparse

import h5py


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)


def human(n):
    for u, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f and n % f == 0:
            return f"{n // f} {u}"
    return f"{n} B"


def load(f, backend):
    g = f[f"backends/{backend}/collectives"]
    text = lambda k: [x.decode() if isinstance(x, bytes) else x for x in g[k][()]]
    rows = {}
    for coll, group, nbytes, t, bw, kind in zip(text("coll"), text("group"), g["bytes"][()], g["time_median_us"][()],
                                                g["busbw_GBs"][()], text("time_kind")):
        rows[(coll, int(nbytes))] = (t, bw)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--coll", nargs="*", default=["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"])
    ap.add_argument("--sizes", default="8,1K,64K,1M,16M,128M,256M,1G")
    ap.add_argument("--base", default="nccl", help="the backend dfccl is compared with")
    a = ap.parse_args()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    with h5py.File(a.file, "r") as f:
        d, n = load(f, "dfccl"), load(f, a.base)
    b = "NCCL" if a.base == "nccl" else a.base
    print(f"| collective | size | dfccl time (us) | {b} time (us) | dfccl busbw (GB/s) | {b} busbw (GB/s) | busbw ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c in a.coll:
        for s in sizes:
            if (c, s) not in d or (c, s) not in n:
                continue
            (td, bd), (tn, bn) = d[(c, s)], n[(c, s)]
            ratio = f"{bd / bn:.2f}" if bn > 0 and bd > 0 else "-"
            print(f"| {c} | {human(s)} | {td:.1f} | {tn:.1f} | {bd:.1f} | {bn:.1f} | {ratio} |")


if __name__ == "__main__":
    main()
