#!/usr/bin/env python3
"""Plots the network path's bandwidth against its ceiling (docs/net-transport.md, "Bandwidth"): the harness's bus
bandwidth per size for each HDF5 file and backend (a collective, one line per file and backend, labelled by both) and
the ucx_perftest tag_bw bandwidth of a CSV (size_bytes, iterations, bandwidth_overall_MBps in UCX's 2^20-byte MB) on
the same transport, as network_<coll>.png (--name: <name>_<coll>.png). --mean: the bandwidth from the mean over the
timed iterations instead of the table's median (iteration timing: a backend whose iterations end in bursts, such as
a broadcast's receiver behind a root that runs ahead, has medians far below its means).
Without --perftest, no ceiling line (files that compare backends only).
Usage: scripts/python.sh scripts/plot_net.py FILE.h5 [...] [--perftest CSV] --coll broadcast --out DIR [--mean]
"""
import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import dfccl_results as dr  # noqa: E402


def backend_rows(path, coll, mean):
    """[(backend, out-of-place rows of coll sorted by size)] of the file; with mean, busbw_GBs is recomputed from the
    mean of the row's timed iterations (busbw / algbw is the collective's factor, so it scales with 1 / time)."""
    out = []
    every = dr.cases([path])
    for backend in every["backend"].unique():
        rows = every[every["backend"] == backend].reset_index(drop=True)
        if mean:
            means = dr.iterations(path, backend).groupby("row")["time_us"].mean()
            rows = rows.assign(busbw_GBs=rows["busbw_GBs"] * rows["time_median_us"] / rows.index.map(means))
        df = dr.variant(rows)
        df = df[df["coll"] == coll].sort_values("bytes")
        if df.empty:
            raise SystemExit(f"{path}: no {coll} rows for {backend}")
        out.append((backend, df))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--perftest", help="ucx_perftest tag_bw CSV")
    ap.add_argument("--coll", default="broadcast")
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="network", help="file name prefix")
    ap.add_argument("--mean", action="store_true", help="bandwidth from the mean iteration time")
    a = ap.parse_args()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for path in a.files:
        for backend, df in backend_rows(path, a.coll, a.mean):
            label = os.path.splitext(os.path.basename(path))[0]
            ax.plot(df["bytes"], df["busbw_GBs"], marker="o", label=f"{label}: {backend}")
    if a.perftest:
        pt = pd.read_csv(a.perftest, comment="#", names=["bytes", "iterations", "MBps"])
        ax.plot(pt["bytes"], pt["MBps"] * 1048576 / 1e9, marker="s", linestyle="--", color="black",
                label="ucx_perftest tag_bw (ceiling)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_title(f"{a.coll}, 2 ranks: network path vs " + ("its transport" if a.perftest else "NCCL's sockets"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    run = dr.run_attributes(a.files[0])
    fig.text(0.01, 0.01, dr.provenance(run), fontsize=6)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    os.makedirs(a.out, exist_ok=True)
    out = os.path.join(a.out, f"{a.name}_{a.coll}.png")
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
