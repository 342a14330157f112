#!/usr/bin/env python3
"""The hierarchical all-reduce study (scripts/hierarchy_study.sh): from DIR/flat.h5 (all-reduce of the world),
DIR/hier.h5 (the same with DFCCL_HIERARCHY=1, where measured), DIR/rail.h5 (all-reduce between hosts, ranks of equal local rank) and DIR/local.h5 (reduce-scatter and all-gather
inside each host), the time of the flat ring against the sum of the three stages a hierarchical all-reduce of size S
runs: reduce-scatter(S) inside the host, all-reduce(S / L) between hosts, all-gather(S) inside the host (L: ranks per
host; the harness's medians, slowest rank: a lower bound of the chained stages). Prints the table and writes DIR/hierarchy.csv and DIR/hierarchy.png.
Usage: scripts/python.sh scripts/plot_hierarchy.py DIR --per-host L [--label TEXT]
"""
import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import dfccl_results as dr  # noqa: E402


def medians(path, coll):
    """{size S in bytes: median time in us} of coll's out-of-place rows in the harness file at path."""
    df = dr.variant(dr.cases([path]))
    df = df[df["coll"] == coll]
    if df.empty:
        raise SystemExit(f"{path}: no {coll} rows")
    return dict(zip(df["bytes"], df["time_median_us"]))


def study(d, per_host):
    """One row per size S that every stage was measured at: flat and stage times (us) and hierarchical / flat."""
    flat = medians(os.path.join(d, "flat.h5"), "all_reduce")
    rail = medians(os.path.join(d, "rail.h5"), "all_reduce")
    rs = medians(os.path.join(d, "local.h5"), "reduce_scatter")
    ag = medians(os.path.join(d, "local.h5"), "all_gather")
    built_path = os.path.join(d, "hier.h5")
    built = medians(built_path, "all_reduce") if os.path.exists(built_path) else {}
    rows = []
    for s in sorted(flat):
        if s in rs and s in ag and s // per_host in rail:
            hier = rs[s] + rail[s // per_host] + ag[s]
            row = dict(bytes=s, flat_us=flat[s], reduce_scatter_us=rs[s], rail_all_reduce_us=rail[s // per_host],
                       all_gather_us=ag[s], hierarchical_us=hier, speedup=flat[s] / hier)
            if s in built:
                row.update(built_us=built[s], built_speedup=flat[s] / built[s])
            rows.append(row)
    if not rows:
        raise SystemExit(f"{d}: no size measured by every stage")
    return pd.DataFrame(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--per-host", type=int, required=True, help="ranks per host (L)")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    df = study(a.dir, a.per_host)
    df.to_csv(os.path.join(a.dir, "hierarchy.csv"), index=False)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(df["bytes"], df["flat_us"] / 1e3, marker="o", label="flat ring (world)")
    ax.plot(df["bytes"], df["hierarchical_us"] / 1e3, marker="s",
            label="its stages timed apart: RS(host) + AR(between hosts, S/L) + AG(host)")
    if "built_us" in df:
        ax.plot(df["bytes"], df["built_us"] / 1e3, marker="^", label="hierarchical (DFCCL_HIERARCHY=1)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("all-reduce size S (bytes)")
    ax.set_ylabel("time (ms, median, slowest rank)")
    ax.set_title(f"all-reduce across fake hosts: {a.label}" if a.label else "all-reduce across fake hosts")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(a.dir, "hierarchy.png"), dpi=120)


if __name__ == "__main__":
    main()
