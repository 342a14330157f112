#!/usr/bin/env python3
"""Plots the steps of PyTorch workload files (dfccl-torch HDF5, workloads/pytorch; read by scripts/dfccl_results.py)
as one PNG per file: the loss per step above, the step time per step below (warm-up steps hollow), with the
summary's median step time, step-time CV and throughput in the title and the file's provenance in the footer.
Usage: scripts/python.sh workloads/pytorch/plot_steps.py FILE.h5 [...] --out DIR
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import dfccl_results as dr  # noqa: E402


def plot(path, out):
    steps = dr.steps([path])
    summ = dr.summary([path])
    if steps.empty:
        raise SystemExit(f"plot_steps.py: {path} has no steps")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for backend, rows in steps.groupby("backend"):
        timed, warm = rows[rows["warmup"] == 0], rows[rows["warmup"] == 1]
        top.plot(rows["step"], rows["loss"], marker=".", label=backend)
        bottom.plot(timed["step"], timed["time_s"] * 1e3, marker=".", label=backend)
        bottom.plot(warm["step"], warm["time_s"] * 1e3, marker="o", linestyle="none", fillstyle="none",
                    color=bottom.lines[-1].get_color(), label=f"{backend} (warm-up)")
    top.set_ylabel("loss")
    bottom.set_ylabel("step time (ms)")
    bottom.set_xlabel("step")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    row = summ.iloc[0]
    unit = dr.run_attributes(path).get("sample_unit", "samples")
    top.set_title(f"{row['workload']} ({row['layout']}): median {row['step_time_median_s'] * 1e3:.1f} ms, "
                  f"CV {row['step_time_cv']:.3f}, {row['throughput']:.0f} {unit}/s", fontsize=10)
    fig.text(0.01, 0.005, dr.provenance(steps.iloc[0]), fontsize=6, va="bottom")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    name = os.path.join(out, os.path.splitext(os.path.basename(path))[0] + "-steps.png")
    fig.savefig(name, dpi=120)
    plt.close(fig)
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for p in a.files:
        print(plot(p, a.out))


if __name__ == "__main__":
    main()
