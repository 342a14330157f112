#!/usr/bin/env python3
"""Plots the fault workload's trials (workloads/fault.toml; /backends/<b>/faults, read by dfccl_results.faults) as
one PNG per file and backend, fault_<backend>.png:
  left   per trial: from the kill to the last survivor's failure (detect), to the first collective completed on the
         shrunk communicator by every survivor (recover), with the issue's 2 s bound
  right  the same times sorted (an empirical distribution), and the time to shrink (last failure to last shrunk
         communicator); the title counts trials, hangs, failures and wrong elements
The footer names the file: version and commit, ranks, machine, date (dfccl_results.provenance).
Usage: scripts/python.sh scripts/plot_fault.py FILE.h5 [...] --out DIR
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import dfccl_results as dr  # noqa: E402

BOUND_S = 2.0  # issue 55: from the kill to the first collective on the shrunk communicator


def plot(df, out):
    """One figure for the trials df of one file and backend; returns its path."""
    r = df.iloc[0]
    done = df[df.status == "completed"]
    ms = {k: done[k].to_numpy() * 1e3 for k in ("detect_s", "shrink_s", "recover_s")}
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    a.plot(done.trial, ms["recover_s"], "o", ms=3, label="kill to first collective on the shrunk communicator")
    a.plot(done.trial, ms["detect_s"], ".", ms=3, label="kill to the last survivor's failure")
    a.axhline(BOUND_S * 1e3, color="0.5", ls="--", lw=1, label=f"{BOUND_S:.0f} s bound")
    a.set_xlabel("trial")
    a.set_ylabel("ms after the kill")
    a.set_yscale("log")
    a.legend(fontsize=7, loc="upper left")
    for key, name in (("detect_s", "detect"), ("shrink_s", "shrink (last failure to last shrunk)"),
                      ("recover_s", "recover (kill to first collective)")):
        v = np.sort(ms[key])
        if len(v):
            b.step(v, np.arange(1, len(v) + 1) / len(v), where="post",
                   label=f"{name}: median {np.median(v):.0f} ms, max {v.max():.0f} ms")
    b.axvline(BOUND_S * 1e3, color="0.5", ls="--", lw=1)
    b.set_xscale("log")
    b.set_ylim(0, 1.02)
    b.set_xlabel("ms")
    b.set_ylabel("fraction of completed trials")
    b.legend(fontsize=7, loc="lower right")
    hung = int((df.status == "deadlocked").sum())
    failed = int((df.status == "failed").sum())
    fig.suptitle(f"{r['backend']}: {len(df)} trials, {r['world_nranks']} ranks, a random rank killed at a random time: "
                 f"{len(done)} recovered, {hung} hung, {failed} failed, {int(df.wrong.sum())} wrong elements, "
                 f"lost collectives per survivor: median {int(np.median(done.lost)) if len(done) else 0}", fontsize=9)
    fig.text(0.01, 0.005, dr.provenance(r), fontsize=6.5, color="0.35", va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    path = os.path.join(out, f"fault_{r['backend']}.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default="results/plots")
    args = ap.parse_args()
    try:
        df = dr.faults(args.files)
    except (OSError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    if df.empty:
        print("plot_fault.py: no fault trials in these files", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    for _, part in df.groupby(["path", "backend"], sort=False):
        print(plot(part, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
