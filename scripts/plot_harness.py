#!/usr/bin/env python3
"""Plots dfccl-harness HDF5 files (docs/hdf5-layout.md, section dfccl-harness; read by dfccl_results.py) as PNG:
  bandwidth_<coll>.png   busbw vs size, one line per backend (and file); below it, where a file ran both dfccl and
                         the base backend (--base, default nccl), a panel with dfccl's busbw over the base's
  latency_<coll>.png     median time vs size, shaded from the fastest to the slowest iteration
  cv_<coll>.png          coefficient of variation of the per-iteration times vs size
  deadlock_rate.png      deadlock rate per backend and workload, with the 95 % Wilson interval
  step_<workload>.png    per-collective end-to-end latency of step workloads, per backend
Sizes are in bytes with binary units (1K = 1024). Each figure's footer names the files it shows: version and commit,
ranks, machine and GPUs, date (dfccl_results.provenance).
Usage: scripts/python.sh scripts/plot_harness.py FILE.h5 [...] --out DIR [--base nccl]
"""
import argparse
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # noqa: E402

import dfccl_results as dr  # noqa: E402

METRICS = [("busbw_GBs", "bus bandwidth (GB/s)", "bandwidth", False),
           ("time_median_us", "median time (us)", "latency", True),
           ("cv", "coefficient of variation", "cv", False)]
# Rows that compare a backend with itself: the same collective, size and place in the workload.
MATCH = ["coll", "bytes", "in_place", "dtype", "group", "priority", "entry"]
FOOTER_FILES = 4


def size_axis(ax, sizes):
    """A log-2 x axis of byte sizes with at most about 12 labelled ticks (8, 1K, 32K, 1M, 1G; binary units) and an
    unlabelled tick at every other power of 2 in between."""
    lo = int(math.floor(math.log2(max(1, min(sizes)))))
    hi = int(math.ceil(math.log2(max(1, max(sizes)))))
    step = next(s for s in (1, 2, 5, 10, 20) if (hi - lo) // s <= 12)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in range(lo, hi + 1) if k % step == 0]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: dr.size_label(x)))
    ax.xaxis.set_minor_locator(FixedLocator([2.0 ** k for k in range(lo, hi + 1)]))
    ax.xaxis.set_minor_formatter(NullFormatter())


def footer(fig, df):
    """Writes one provenance line per file of df (at most FOOTER_FILES) at the figure's bottom; returns the height
    (figure fraction) it takes."""
    runs = df.drop_duplicates("path")
    lines = [dr.provenance(r) for _, r in runs.head(FOOTER_FILES).iterrows()]
    if len(runs) > FOOTER_FILES:
        lines.append(f"... and {len(runs) - FOOTER_FILES} more files")
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=6.5, color="0.35", va="bottom", ha="left")
    return 0.02 + 0.02 * len(lines)


def save(fig, df, path):
    bottom = footer(fig, df)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def label(r, several_files):
    return f"{r['backend']} ({r['file']})" if several_files else r["backend"]


def ratio_rows(rows, base):
    """dfccl's rows of each file in rows matched with the base backend's: bytes, file and `ratio`, dfccl's busbw over
    the base's (the base's median time over dfccl's where a busbw is 0, one rank); empty when no file has both."""
    out = []
    for path, one in rows.groupby("path", sort=False):
        d, b = one[one["backend"] == "dfccl"], one[one["backend"] == base]
        if d.empty or b.empty:
            continue
        m = d.merge(b, on=MATCH, suffixes=("", "_base"))
        bw = (m["busbw_GBs"] > 0) & (m["busbw_GBs_base"] > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            m["ratio"] = np.where(bw, m["busbw_GBs"] / m["busbw_GBs_base"].where(bw, 1.0),
                                  m["time_median_us_base"] / m["time_median_us"])
        out.append(m.sort_values("bytes"))
    return pd.concat(out) if out else pd.DataFrame()


def ratio_panel(ax, ratios, base, several_files):
    for _, m in ratios.groupby("path", sort=False):
        ax.plot(m["bytes"], m["ratio"], marker="o", ms=3, color="tab:green",
                label=m["file"].iloc[0] if several_files else None)
    ax.axhline(1.0, color="0.4", linewidth=0.8, linestyle="--")
    name = "NCCL" if base == "nccl" else base
    ax.set_ylabel(f"dfccl / {name}\nbusbw")
    ax.grid(True, which="major", alpha=0.3)
    if several_files:
        ax.legend(fontsize=7)


def metric_figure(rows, coll, metric, base):
    """The figure of one metric of one collective over rows (timed per iteration); returns (figure, main axes)."""
    key, ylabel, _, logy = metric
    ratios = ratio_rows(rows, base) if key == "busbw_GBs" else pd.DataFrame()
    if ratios.empty:
        fig, ax = plt.subplots(figsize=(7, 4.8))
        axes = [ax]
    else:
        fig, axes = plt.subplots(2, 1, figsize=(7, 6.2), sharex=True, gridspec_kw={"height_ratios": [3, 1.2]})
    several = rows["path"].nunique() > 1
    for _, r in rows.groupby(["path", "backend"], sort=False):
        r = r.sort_values("bytes")
        axes[0].plot(r["bytes"], r[key], marker="o", ms=3, label=label(r.iloc[0], several))
        if key == "time_median_us":
            axes[0].fill_between(r["bytes"], r["time_min_us"], r["time_max_us"], alpha=0.15)
    if logy:
        axes[0].set_yscale("log")
    axes[0].set_ylabel(ylabel)
    axes[0].set_title(f"{coll}: {ylabel} vs size")
    axes[0].grid(True, which="major", alpha=0.3)
    axes[0].legend()
    if not ratios.empty:
        ratio_panel(axes[1], ratios, base, several)
    size_axis(axes[-1], rows["bytes"])
    axes[-1].set_xlabel("size S (bytes, 1K = 1024)")
    return fig


def size_plots(cases, out, base):
    """bandwidth_, latency_ and cv_<coll>.png for each collective with at least two sizes timed per iteration in a
    (file, backend), out-of-place."""
    made = []
    timed = dr.variant(cases)  # out-of-place: one point per size
    timed = timed[timed["time_kind"] == "iteration"]
    for coll in sorted(set(timed["coll"])):
        rows = timed[timed["coll"] == coll]
        rows = rows.groupby(["path", "backend"], sort=False).filter(lambda g: len(g) >= 2)
        if rows.empty:
            continue
        for metric in METRICS:
            fig = metric_figure(rows, coll, metric, base)
            made.append(save(fig, rows, os.path.join(out, f"{metric[2]}_{coll}.png")))
    return made


def deadlock_plot(summary, out):
    rows = summary[summary["trials"] > summary["skipped"]].reset_index(drop=True)
    if rows.empty:
        return []
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows)), 4.8))
    rates = rows["deadlock_rate"].to_numpy()
    lo = np.maximum(0.0, rates - rows["ci_low"].to_numpy())
    hi = np.maximum(0.0, rows["ci_high"].to_numpy() - rates)
    x = np.arange(len(rows))
    ax.bar(x, rates, yerr=[lo, hi], capsize=4, color="tab:red", alpha=0.7)
    for i, s in rows.iterrows():
        ran = s["completed"] + s["deadlocked"] + s["failed"]
        ax.text(i, min(1.02, rates[i] + hi[i] + 0.02), f"{s['deadlocked']}/{ran}", ha="center", fontsize=8)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{w}\n{b}" for w, b in zip(rows["workload"], rows["backend"])], fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("deadlock rate (95% Wilson interval)")
    ax.set_title("Deadlock rate per backend and workload")
    ax.grid(True, axis="y", alpha=0.3)
    return [save(fig, rows, os.path.join(out, "deadlock_rate.png"))]


def step_plots(cases, out):
    made = []
    steps = cases[(cases["workload_kind"] == "step") & (cases["time_kind"] == "e2e")]
    for workload, rows in steps.groupby("workload", sort=False):
        runs = list(rows.groupby(["path", "backend"], sort=False))
        fig, ax = plt.subplots(figsize=(8, 4.8))
        width = 0.8 / len(runs)
        several = rows["path"].nunique() > 1
        for k, (_, r) in enumerate(runs):
            ax.bar(np.arange(len(r)) + k * width, r["time_median_us"], width, label=label(r.iloc[0], several))
        ax.set_xlabel("collective of the step (in order)")
        ax.set_ylabel("median end-to-end latency (us)")
        ax.set_yscale("log")
        ax.set_title(f"{workload}: per-collective latency")
        ax.legend()
        made.append(save(fig, rows, os.path.join(out, f"step_{workload}.png")))
    return made


def load(paths):
    """(cases, summary) tables of the readable harness files among paths; the others are named on stderr."""
    cases, summaries = [], []
    for path in paths:
        try:
            cases.append(dr.cases(path))
            summaries.append(dr.summary(path))
        except (OSError, ValueError) as e:
            print(f"plot_harness: {e}; skipped", file=sys.stderr)
    if not cases:
        return None, None
    return dr.concat(cases), dr.concat(summaries)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default="results/plots")
    ap.add_argument("--base", default="nccl", help="backend that dfccl's busbw is divided by in the ratio panel")
    args = ap.parse_args()
    cases, summary = load(args.files)
    made = []
    if cases is not None:
        os.makedirs(args.out, exist_ok=True)
        made = size_plots(cases, args.out, args.base) + deadlock_plot(summary, args.out) + step_plots(cases, args.out)
    for p in made:
        print(p)
    if not made:
        print("plot_harness: nothing to plot", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
