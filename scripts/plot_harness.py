#!/usr/bin/env python3
"""Plots dfccl-harness HDF5 files (docs/hdf5-layout.md, section dfccl-harness) as PNG:
  bandwidth_<coll>.png   busbw vs size, one line per backend (and file)
  latency_<coll>.png     median time vs size
  cv_<coll>.png          coefficient of variation of the per-iteration times vs size
  deadlock_rate.png      deadlock rate per backend and workload, with the 95 % Wilson interval
  step_<workload>.png    per-collective end-to-end latency of step workloads, per backend
Usage: scripts/python.sh scripts/plot_harness.py FILE.h5 [...] --out DIR
"""
import argparse
import collections
import os
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def table(group):
    return {k: np.array([text(x) for x in group[k][()]]) if group[k].dtype.kind in "OS" else np.array(group[k][()])
            for k in group.keys()}


def load(path):
    runs = []
    with h5py.File(path, "r") as f:
        if text(f.attrs.get("tool", "")) != "dfccl-harness":
            print(f"plot_harness: {path}: not a dfccl-harness file, skipped", file=sys.stderr)
            return runs
        workload = text(f.attrs["workload"])
        kind = text(f.attrs["workload_kind"])
        summary = table(f["summary"]) if "summary" in f else {}
        for i, backend in enumerate(summary.get("backend", [])):
            g = f["backends"][backend]
            runs.append(dict(file=os.path.basename(path), workload=workload, kind=kind, backend=backend,
                             collectives=table(g["collectives"]) if "collectives" in g else {},
                             summary={k: v[i] for k, v in summary.items()}))
    return runs


def size_plots(runs, out):
    by_coll = collections.defaultdict(list)
    for r in runs:
        c = r["collectives"]
        if not len(c.get("coll", [])):
            continue
        for coll in sorted(set(c["coll"])):
            mask = (c["coll"] == coll) & (c["time_kind"] == "iteration")
            if mask.sum() >= 2:
                by_coll[coll].append((r, mask))
    made = []
    for coll, items in by_coll.items():
        for metric, ylabel, name, logy in [("busbw_GBs", "bus bandwidth (GB/s)", "bandwidth", False),
                                           ("time_median_us", "median time (us)", "latency", True),
                                           ("cv", "coefficient of variation", "cv", False)]:
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for r, mask in items:
                c = r["collectives"]
                order = np.argsort(c["bytes"][mask])
                x = c["bytes"][mask][order]
                y = c[metric][mask][order]
                label = r["backend"] if len({i[0]["file"] for i in items}) == 1 else f"{r['backend']} ({r['file']})"
                ax.plot(x, y, marker="o", ms=3, label=label)
                if metric == "time_median_us":
                    lo, hi = c["time_min_us"][mask][order], c["time_max_us"][mask][order]
                    ax.fill_between(x, lo, hi, alpha=0.15)
            ax.set_xscale("log", base=2)
            if logy:
                ax.set_yscale("log")
            ax.set_xlabel("size S (bytes)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{coll}: {ylabel} vs size")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
            path = os.path.join(out, f"{name}_{coll}.png")
            fig.tight_layout()
            fig.savefig(path, dpi=120)
            plt.close(fig)
            made.append(path)
    return made


def deadlock_plot(runs, out):
    rows = [r for r in runs if r["summary"].get("trials", 0) > r["summary"].get("skipped", 0)]
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows)), 4.5))
    labels, rates, lo, hi = [], [], [], []
    for r in rows:
        s = r["summary"]
        labels.append(f"{r['workload']}\n{r['backend']}")
        rates.append(s["deadlock_rate"])
        lo.append(max(0.0, s["deadlock_rate"] - s["ci_low"]))
        hi.append(max(0.0, s["ci_high"] - s["deadlock_rate"]))
    x = np.arange(len(rows))
    ax.bar(x, rates, yerr=[lo, hi], capsize=4, color="tab:red", alpha=0.7)
    for i, r in enumerate(rows):
        s = r["summary"]
        ran = s["completed"] + s["deadlocked"] + s["failed"]
        ax.text(i, min(1.02, rates[i] + hi[i] + 0.02), f"{s['deadlocked']}/{ran}", ha="center", fontsize=8)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("deadlock rate (95% Wilson interval)")
    ax.set_title("Deadlock rate per backend and workload")
    ax.grid(True, axis="y", alpha=0.3)
    path = os.path.join(out, "deadlock_rate.png")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]


def step_plots(runs, out):
    made = []
    by_workload = collections.defaultdict(list)
    for r in runs:
        c = r["collectives"]
        if r["kind"] == "step" and len(c.get("coll", [])):
            by_workload[r["workload"]].append(r)
    for workload, items in by_workload.items():
        fig, ax = plt.subplots(figsize=(8, 4.5))
        width = 0.8 / len(items)
        for k, r in enumerate(items):
            c = r["collectives"]
            mask = c["time_kind"] == "e2e"
            y = c["time_median_us"][mask]
            ax.bar(np.arange(mask.sum()) + k * width, y, width, label=r["backend"])
        ax.set_xlabel("collective of the step (in order)")
        ax.set_ylabel("median end-to-end latency (us)")
        ax.set_yscale("log")
        ax.set_title(f"{workload}: per-collective latency")
        ax.legend()
        path = os.path.join(out, f"step_{workload}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        made.append(path)
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default="results/plots")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    runs = []
    for path in args.files:
        if os.path.exists(path):
            runs += load(path)
        else:
            print(f"plot_harness: {path}: no such file", file=sys.stderr)
    made = size_plots(runs, args.out) + deadlock_plot(runs, args.out) + step_plots(runs, args.out)
    for p in made:
        print(p)
    if not made:
        print("plot_harness: nothing to plot", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
