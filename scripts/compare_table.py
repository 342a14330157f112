#!/usr/bin/env python3
"""Markdown table of dfccl vs NCCL from one harness HDF5 file that ran both backends (the tables of docs/results.md).

Usage: scripts/python.sh scripts/compare_table.py FILE.h5 [--coll all_reduce ...] [--sizes 8,1K,1M,...] [--base nccl]
                                                  [--in-place]
Columns per size: median time of each backend (us), bus bandwidth (GB/s), and the ratio dfccl/base of busbw (base:
nccl, or e.g. dfccl-blocking for what preemption costs). Several bases, comma-separated (e.g. `--base
nccl,nccl-graph` on perf.sh's latency sweep): a time, a busbw and a ratio column for each. Where busbw is 0 (one
rank) the ratio is the base's time over dfccl's (the same quantity). Out-of-place measurements by default; --in-place
compares the in-place ones.
"""
import argparse
import sys

import dfccl_results as dr

human = dr.human_bytes
parse_size = dr.parse_size


def load(df, backend, in_place=False):
    """{(coll, bytes): (median time in us, busbw in GB/s)} of the backend's rows timed per iteration in df, a
    dfccl_results.cases() table of one file, out-of-place (or in-place); the last row wins where a (coll, bytes) pair
    repeats."""
    rows = dr.variant(df, in_place)
    rows = rows[(rows["backend"] == backend) & (rows["time_kind"] == "iteration")]
    return {(c, int(b)): (t, bw) for c, b, t, bw in zip(rows["coll"], rows["bytes"], rows["time_median_us"],
                                                        rows["busbw_GBs"])}


def ratio(td, bd, tb, bb):
    """dfccl's busbw over the base's; their times' inverse ratio where busbw is 0 (one rank)."""
    if bb > 0 and bd > 0:
        return f"{bd / bb:.2f}"
    return f"{tb / td:.2f}" if td > 0 and tb > 0 else "-"


def table(df, colls, sizes, bases, in_place=False):
    """The table's Markdown lines for df, the dfccl_results.cases() table of one harness file: dfccl against each base,
    per collective and size (bytes), for the (collective, size) pairs that every backend ran, out-of-place (or
    in-place)."""
    d = load(df, "dfccl", in_place)
    ns = [load(df, b, in_place) for b in bases]
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
    ap.add_argument("--in-place", action="store_true", help="compare the in-place measurements (default: out-of-place)")
    a = ap.parse_args()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    df = dr.cases(a.file)
    missing = [b for b in ["dfccl"] + a.base.split(",") if b not in set(df["backend"])]
    if missing:
        have = ", ".join(dict.fromkeys(df["backend"]))
        print(f"compare_table: {a.file}: no backend {', '.join(missing)} (it has {have})", file=sys.stderr)
        return 2
    print("\n".join(table(df, a.coll, sizes, a.base.split(","), a.in_place)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
