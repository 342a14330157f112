#!/usr/bin/env python3
"""Plots the network path's bandwidth against its ceiling (docs/net-transport.md, "Bandwidth"): the harness's bus
bandwidth per size for each HDF5 file (a collective, one line per file, labelled by the file's name) and the
ucx_perftest tag_bw bandwidth of a CSV (size_bytes, iterations, bandwidth_overall_MBps in UCX's 2^20-byte MB) on
the same transport, as network_<coll>.png.
Usage: scripts/python.sh scripts/plot_net.py FILE.h5 [...] --perftest CSV --coll broadcast --out DIR
"""
import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import dfccl_results as dr  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--perftest", required=True, help="ucx_perftest tag_bw CSV")
    ap.add_argument("--coll", default="broadcast")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for path in a.files:
        df = dr.variant(dr.cases([path]))
        df = df[df["coll"] == a.coll].sort_values("bytes")
        if df.empty:
            raise SystemExit(f"{path}: no {a.coll} rows")
        ax.plot(df["bytes"], df["busbw_GBs"], marker="o", label=os.path.splitext(os.path.basename(path))[0])
    pt = pd.read_csv(a.perftest, comment="#", names=["bytes", "iterations", "MBps"])
    ax.plot(pt["bytes"], pt["MBps"] * 1048576 / 1e9, marker="s", linestyle="--", color="black",
            label="ucx_perftest tag_bw (ceiling)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_title(f"{a.coll}, 2 ranks: network path vs its transport")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    run = dr.run_attributes(a.files[0])
    fig.text(0.01, 0.01, dr.provenance(run), fontsize=6)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    os.makedirs(a.out, exist_ok=True)
    out = os.path.join(a.out, f"network_{a.coll}.png")
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
