#!/usr/bin/env python3
"""Plots a dfccl-sim results file (docs/simulator.md).

Usage: scripts/python.sh scripts/plot_sim.py results/sim/sweep.h5 [--out results/sim]

Writes, for the blocks present in the file:
  deadlock_rate.png        block "scale": deadlock rate vs probability (disorder = sync = p), one panel per layout
                           family and model, one line per scale, Wilson 95 % intervals as error bars
  deadlock_rate_grid.png   block "grid": rate of models a and b vs sync probability, one line per disorder probability
  deadlock_rate_limit.png  block "limit": model c for each resident limit R, with a and b for reference
  deadlock_rate_length.png block "length": 100 vs 800 collectives per group
and prints the table behind each figure.
"""
import argparse
import os
import sys

import h5py
import matplotlib.pyplot as plt
import numpy as np

MODEL_TITLE = {
    "a": "(a) one queue per GPU",
    "b": "(b) stream per communicator + syncs",
    "c": "(c) (b) with R resident collectives",
    "d": "(d) DFCCL (preemption)",
}


def read_settings(path):
    with h5py.File(path, "r") as f:
        g = f["sim/settings"]
        cols = {}
        for name in g:
            v = g[name][()]
            if v.dtype.kind in ("O", "S"):
                v = np.array([x.decode() if isinstance(x, bytes) else str(x) for x in v])
            cols[name] = v
        meta = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    return cols, meta


def select(cols, **conds):
    mask = np.ones(len(cols["model"]), dtype=bool)
    for k, v in conds.items():
        mask &= cols[k] == v
    return mask


def family(layout):
    return layout.split(":")[0]


def errorbars(ax, x, rate, lo, hi, **kw):
    x, rate, lo, hi = map(np.asarray, (x, rate, lo, hi))
    order = np.argsort(x)
    x, rate, lo, hi = x[order], rate[order], lo[order], hi[order]
    yerr = np.vstack([100 * (rate - lo), 100 * (hi - rate)])
    ax.errorbar(x, 100 * rate, yerr=yerr, capsize=2.5, marker="o", markersize=3.5, linewidth=1.2, **kw)


YTICKS = [0, 0.5, 1, 2, 5, 10, 20, 50, 100]


def style_rate_axis(ax, xlabel):
    # Symmetric-log y axis: linear below 1 %, logarithmic above, so that 0.2 % and 5 % are both readable.
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1.0, linscale=0.6)
    ax.set_ylim(-0.05, 130)
    ax.set_yticks(YTICKS)
    ax.set_yticklabels([f"{t:g}" for t in YTICKS])
    ax.set_xlabel(xlabel)
    ax.grid(True, which="major", alpha=0.3)
    ax.axhline(7, color="0.5", linestyle=":", linewidth=1)


def footer(fig, meta, path):
    rev = meta.get("git_revision", "?")
    fig.text(0.01, 0.005, f"{os.path.basename(path)}  dfccl-sim {meta.get('dfccl_version', '?')} ({rev}), "
             f"{meta.get('date_utc', '?')}; bars: Wilson 95 % intervals; dotted line: 7 %; y axis linear below 1 %, "
             "logarithmic above", fontsize=7, color="0.35")


def plot_scale(cols, meta, path, out):
    m = select(cols, block="scale")
    if not m.any():
        return
    fams = [f for f in ("random", "megatron") if any(family(l) == f for l in cols["layout"][m])]
    models = [x for x in "abcd" if (m & (cols["model"] == x)).any()]
    fig, axes = plt.subplots(len(fams), len(models), figsize=(4.2 * len(models), 3.6 * len(fams)), squeeze=False,
                             sharey=True)
    print("block scale: deadlock rate (%) at p = disorder = sync probability")
    for i, fam in enumerate(fams):
        layouts = sorted({l for l in cols["layout"][m] if family(l) == fam},
                         key=lambda l: cols["ranks"][m & (cols["layout"] == l)][0])
        colors = plt.cm.viridis(np.linspace(0.0, 0.85, len(layouts)))
        for j, model in enumerate(models):
            ax = axes[i][j]
            for layout, color in zip(layouts, colors):
                s = m & (cols["layout"] == layout) & (cols["model"] == model)
                if not s.any():
                    continue
                ranks = cols["ranks"][s][0]
                trials = cols["trials"][s][0]
                errorbars(ax, cols["p_disorder"][s], cols["rate"][s], cols["ci_lo"][s], cols["ci_hi"][s], color=color,
                          label=f"{layout} ({ranks} GPUs, {trials} trials)")
                order = np.argsort(cols["p_disorder"][s])
                rates = " ".join(f"{100 * r:6.2f}" for r in cols["rate"][s][order])
                print(f"  {model} {layout:<24} p = {' '.join(f'{p:.0e}' for p in cols['p_disorder'][s][order])}")
                print(f"  {'':<26} %  = {rates}")
            style_rate_axis(ax, "p = disorder = sync probability")
            title = MODEL_TITLE[model]
            if model == "c":
                title = title.replace("R", f"R={cols['limit'][m & (cols['model'] == 'c')][0]}")
            ax.set_title(f"{title}\n{fam} layouts", fontsize=9)
            if j == 0:
                ax.set_ylabel("deadlocked trials (%)")
            if j == len(models) - 1:
                ax.legend(fontsize=7, loc="center left")
    colls = sorted(set(cols["colls"][m]))
    fig.suptitle(f"dfccl-sim: deadlock rate vs disorder/sync probability ({', '.join(map(str, colls))} collectives "
                 "per group per trial)", fontsize=11)
    footer(fig, meta, path)
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(os.path.join(out, "deadlock_rate.png"), dpi=110)
    plt.close(fig)


def plot_grid(cols, meta, path, out):
    m = select(cols, block="grid")
    if not m.any():
        return
    layouts = list(dict.fromkeys(cols["layout"][m]))
    models = [x for x in "ab" if (m & (cols["model"] == x)).any()]
    fig, axes = plt.subplots(len(layouts), len(models), figsize=(4.6 * len(models), 3.6 * len(layouts)),
                             squeeze=False, sharey=True)
    print("block grid: deadlock rate (%) vs sync probability, per disorder probability")
    for i, layout in enumerate(layouts):
        for j, model in enumerate(models):
            ax = axes[i][j]
            ds = sorted(set(cols["p_disorder"][m & (cols["layout"] == layout)]))
            colors = plt.cm.plasma(np.linspace(0.0, 0.8, len(ds)))
            for d, color in zip(ds, colors):
                s = m & (cols["layout"] == layout) & (cols["model"] == model) & (cols["p_disorder"] == d)
                ps = cols["p_sync"][s]
                # Sync probability 0 is drawn at the left edge of the log axis.
                x = np.where(ps > 0, ps, min(ps[ps > 0]) / 4)
                errorbars(ax, x, cols["rate"][s], cols["ci_lo"][s], cols["ci_hi"][s], color=color,
                          label=f"disorder {d:g}")
                order = np.argsort(ps)
                print(f"  {model} {layout:<18} disorder {d:<7g} sync {' '.join(f'{p:g}' for p in ps[order])}: "
                      f"{' '.join(f'{100 * r:.2f}' for r in cols['rate'][s][order])} %")
            style_rate_axis(ax, "sync probability (leftmost point: 0)")
            ax.set_title(f"{MODEL_TITLE[model]}\n{layout}", fontsize=9)
            if j == 0:
                ax.set_ylabel("deadlocked trials (%)")
            if j == len(models) - 1:
                ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("dfccl-sim: disorder and sync probabilities separately", fontsize=11)
    footer(fig, meta, path)
    fig.tight_layout(rect=(0, 0.02, 1, 0.96))
    fig.savefig(os.path.join(out, "deadlock_rate_grid.png"), dpi=110)
    plt.close(fig)


def plot_limit(cols, meta, path, out):
    m = select(cols, block="limit")
    if not m.any():
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    layout = cols["layout"][m][0]
    series = [("a", 0, "(a) queue = (c) R=1")] + [("c", r, f"(c) R={r}") for r in sorted(set(cols["limit"][m])) if r > 0]
    series.append(("b", 0, "(b) unlimited streams"))
    colors = plt.cm.cividis(np.linspace(0.0, 0.9, len(series)))
    print("block limit: deadlock rate (%) of model c per resident limit R")
    for (model, r, label), color in zip(series, colors):
        s = m & (cols["model"] == model) & (cols["limit"] == r)
        if not s.any():
            continue
        errorbars(ax, cols["p_disorder"][s], cols["rate"][s], cols["ci_lo"][s], cols["ci_hi"][s], color=color,
                  label=label)
        order = np.argsort(cols["p_disorder"][s])
        print(f"  {label:<24} {' '.join(f'{100 * x:.2f}' for x in cols['rate'][s][order])} %")
    style_rate_axis(ax, "p = disorder = sync probability")
    ax.set_ylabel("deadlocked trials (%)")
    ax.set_title(f"resident-collective limit R, {layout}", fontsize=10)
    ax.legend(fontsize=7, loc="center left")
    footer(fig, meta, path)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(os.path.join(out, "deadlock_rate_limit.png"), dpi=110)
    plt.close(fig)


def plot_length(cols, meta, path, out):
    m = select(cols, block="length")
    if not m.any():
        return
    models = [x for x in "abd" if (m & (cols["model"] == x)).any()]
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.6), squeeze=False, sharey=True)
    print("block length: deadlock rate (%) per collectives per group")
    for j, model in enumerate(models):
        ax = axes[0][j]
        for c, color in zip(sorted(set(cols["colls"][m])), ("tab:blue", "tab:red", "tab:green")):
            s = m & (cols["model"] == model) & (cols["colls"] == c)
            layout = cols["layout"][s][0]
            errorbars(ax, cols["p_disorder"][s], cols["rate"][s], cols["ci_lo"][s], cols["ci_hi"][s], color=color,
                      label=f"{layout}, {c} colls/group")
            order = np.argsort(cols["p_disorder"][s])
            print(f"  {model} {c:>4} colls: {' '.join(f'{100 * x:.2f}' for x in cols['rate'][s][order])} %")
        style_rate_axis(ax, "p = disorder = sync probability")
        ax.set_title(MODEL_TITLE[model], fontsize=9)
        if j == 0:
            ax.set_ylabel("deadlocked trials (%)")
        if j == len(models) - 1:
            ax.legend(fontsize=7, loc="center left")
    fig.suptitle("dfccl-sim: trial length (64 GPUs, 32 groups of 4)", fontsize=11)
    footer(fig, meta, path)
    fig.tight_layout(rect=(0, 0.03, 1, 0.94))
    fig.savefig(os.path.join(out, "deadlock_rate_length.png"), dpi=110)
    plt.close(fig)


def pct(x):
    return "0" if x == 0 else f"{100 * x:.3g}"


def markdown(cols):
    """Markdown tables of every block (rates in %), for docs/simulator.md."""
    out = []
    m = select(cols, block="scale")
    if m.any():
        ps = sorted(set(cols["p_disorder"][m]))
        out.append("Block `scale`, deadlocked trials in % at p = disorder = sync probability (100 collectives/group):\n")
        out.append("| model | layout | GPUs | trials | " + " | ".join(f"{p:g}" for p in ps) + " |")
        out.append("|---" * (4 + len(ps)) + "|")
        for model in "abcd":
            for fam in ("random", "megatron"):
                layouts = sorted({l for l in cols["layout"][m & (cols["model"] == model)] if family(l) == fam},
                                 key=lambda l: cols["ranks"][m & (cols["layout"] == l)][0])
                for layout in layouts:
                    s = m & (cols["model"] == model) & (cols["layout"] == layout)
                    rate = dict(zip(cols["p_disorder"][s], cols["rate"][s]))
                    name = model if model != "c" else f"c (R={cols['limit'][s][0]})"
                    out.append(f"| {name} | `{layout}` | {cols['ranks'][s][0]} | {cols['trials'][s][0]} | "
                               + " | ".join(pct(rate[p]) if p in rate else "" for p in ps) + " |")
        out.append("")
    m = select(cols, block="grid")
    if m.any():
        ss = sorted(set(cols["p_sync"][m]))
        out.append("Block `grid`, deadlocked trials in % (500 trials; rows: model, layout, disorder; columns: sync):\n")
        out.append("| model | layout | disorder | " + " | ".join(f"sync {x:g}" for x in ss) + " |")
        out.append("|---" * (3 + len(ss)) + "|")
        for model in "ab":
            for layout in dict.fromkeys(cols["layout"][m]):
                for d in sorted(set(cols["p_disorder"][m])):
                    s = m & (cols["model"] == model) & (cols["layout"] == layout) & (cols["p_disorder"] == d)
                    if not s.any():
                        continue
                    rate = dict(zip(cols["p_sync"][s], cols["rate"][s]))
                    out.append(f"| {model} | `{layout}` | {d:g} | " + " | ".join(pct(rate.get(x, 0)) for x in ss) + " |")
        out.append("")
    for block, title in (("limit", "Block `limit` (model c per R; a and b for reference)"),
                         ("length", "Block `length` (collectives per group)")):
        m = select(cols, block=block)
        if not m.any():
            continue
        ps = sorted(set(cols["p_disorder"][m]))
        out.append(f"{title}, deadlocked trials in % at p = disorder = sync:\n")
        out.append("| model | layout | colls | trials | " + " | ".join(f"{p:g}" for p in ps) + " |")
        out.append("|---" * (4 + len(ps)) + "|")
        keys = dict.fromkeys(zip(cols["model"][m], cols["limit"][m], cols["layout"][m], cols["colls"][m]))
        for model, limit, layout, colls in keys:
            s = m & (cols["model"] == model) & (cols["limit"] == limit) & (cols["layout"] == layout) & \
                (cols["colls"] == colls)
            rate = dict(zip(cols["p_disorder"][s], cols["rate"][s]))
            name = model if model != "c" else f"c (R={limit})"
            out.append(f"| {name} | `{layout}` | {colls} | {cols['trials'][s][0]} | "
                       + " | ".join(pct(rate[p]) if p in rate else "" for p in ps) + " |")
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("h5", help="dfccl-sim results file")
    ap.add_argument("--out", default="results/sim", help="folder for the PNG files")
    ap.add_argument("--markdown", help="also write Markdown tables of every block to this file")
    a = ap.parse_args()
    cols, meta = read_settings(a.h5)
    if meta.get("tool") != "dfccl-sim":
        sys.exit(f"{a.h5}: not a dfccl-sim file (tool = {meta.get('tool')!r})")
    os.makedirs(a.out, exist_ok=True)
    plot_scale(cols, meta, a.h5, a.out)
    plot_grid(cols, meta, a.h5, a.out)
    plot_limit(cols, meta, a.h5, a.out)
    plot_length(cols, meta, a.h5, a.out)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(cols) + "\n")
        print(f"tables written to {a.markdown}")
    print(f"plots written to {a.out}/")


if __name__ == "__main__":
    main()
