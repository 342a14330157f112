#!/usr/bin/env python3
"""Markdown table of dfccl vs NCCL from one harness HDF5 file that ran both backends (the tables of docs/results.md).

Usage: scripts/python.sh scripts/compare_table.py FILE.h5 [--coll all_reduce ...] [--sizes 8,1K,1M,...] [--base nccl]
Columns per size: median time of each backend (us), bus bandwidth (GB/s), and the ratio dfccl/base of busbw (base:
nccl, or e.g. dfccl-blocking for what preemption costs). Several bases, comma-separated (e.g. `--base
nccl,nccl-graph` on perf.sh's latency sweep): a time, a busbw and a ratio column for each. Where busbw is 0 (one
rank) the ratio is the base's time over dfccl's (the same quantity).
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


def ratio(td, bd, tb, bb):
    """dfccl's busbw over the base's; their times' inverse ratio where busbw is 0 (one rank)."""
    if bb > 0 and bd > 0:
        return f"{bd / bb:.2f}"
    return f"{tb / td:.2f}" if td > 0 and tb > 0 else "-"


def table(f, colls, sizes, bases):
    """The table's Markdown lines for the open harness file f: dfccl against each base, per collective and size (bytes),
    for the (collective, size) pairs that every backend ran."""
    d = load(f, "dfccl")
    ns = [load(f, b) for b in bases]
    names = ["NCCL" if b == "nccl" else b for b in bases]
    ratio_head = ["busbw ratio"] if len(bases) == 1 else [f"busbw ratio vs {b}" for b in names]
    head = (["collective", "size", "dfccl time (us)"] + [f"{b} time (us)" for b in names] + ["dfccl busbw (GB/s)"] +
            [f"{b} busbw (GB/s)" for b in names] + ratio_head)
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for c in colls:
        for s in sizes:
            if (c, s) not in d or any((c, s) not in n for n in ns):
                continue
            td, bd = d[(c, s)]
            rows = [n[(c, s)] for n in ns]
            cells = [c, human(s), f"{td:.1f}"] + [f"{t:.1f}" for t, _ in rows] + [f"{bd:.1f}"]
            cells += [f"{b:.1f}" for _, b in rows]
            cells += [ratio(td, bd, t, b) for t, b in rows]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--coll", nargs="*", default=["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"])
    ap.add_argument("--sizes", default="8,1K,64K,1M,16M,128M,256M,1G")
    ap.add_argument("--base", default="nccl", help="the backend(s) dfccl is compared with, comma-separated")
    a = ap.parse_args()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    with h5py.File(a.file, "r") as f:
        print("\n".join(table(f, a.coll, sizes, a.base.split(","))))


if __name__ == "__main__":
    main()
