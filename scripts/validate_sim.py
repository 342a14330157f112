#!/usr/bin/env python3
"""Validates dfccl-sim against real runs: the harness replayed the simulator's own scenarios; compare trial by trial.

Usage:
  scripts/python.sh scripts/validate_sim.py REPLAY.h5 [REPLAY.h5 ...] [--sim build/bin/dfccl-sim]
        [--report FILE.md] [--h5 FILE.h5] [--plot FILE.png] [--reference-trials 100000]

Each REPLAY.h5 is a dfccl-harness file of a replay workload (workload kind `replay`, docs/harness.md): rank r of
harness trial t ran Scenario::program(r, first_trial + t) of the scenario in the file's /replay attributes (layout,
colls, p_disorder, p_sync, seed, first_trial), and /backends/<backend>/replay has each trial's outcome.

For every backend of every file, the simulator runs the backend's model on exactly the same trials (dfccl-sim
--per-trial, same seed and first trial): host-blocking (one FIFO per rank, no preemption) is model (a), host
(preemptive) model (d). Checks:
  1. per trial: the harness's outcome (completed / deadlocked) equals the model's; model (a) is deterministic given
     the programs, so any disagreement is a bug on one side or a watchdog that fired on a slow trial;
  2. rate: the simulator's prediction from an independent, larger set of trials (--reference-trials, the trials after
     the replayed ones) lies inside the harness's Wilson 95 % interval. With perfect per-trial agreement this fails
     only by chance (about 5 % of settings).
Also reported: the slowest completed trial against the watchdog's timeout (a timeout too close to it would turn slow
trials into false deadlocks).

Outputs: the report (console, --report as Markdown), --h5 a small HDF5 file with one row per (setting, backend) and
one per (setting, backend, trial) (docs/hdf5-layout.md, section "validate_sim.py"), --plot a figure.
Exit status 0 when every check passes, 1 when one fails, 2 when a file cannot be compared.
"""
import argparse
import datetime
import math
import os
import shlex
import socket
import subprocess
import sys
import tempfile

import h5py
import numpy as np

Z95 = 1.959963984540054
MODEL_OF = {"host-blocking": "a", "host": "d", "dfccl": "d", "nccl": "a"}
MODEL_NAME = {"a": "queue", "b": "stream", "d": "dfccl"}


def wilson(k, n, z=Z95):
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (0.0 if k == 0 else c - h), (1.0 if k == n else c + h)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def strings(ds):
    return np.array([text(x) for x in ds[()]])


def pct(x):
    return f"{100 * x:.1f} %"


def read_replay(path):
    with h5py.File(path, "r") as f:
        attrs = {k: (text(v) if isinstance(v, (bytes, str)) else v) for k, v in f.attrs.items()}
        if attrs.get("tool") != "dfccl-harness" or attrs.get("workload_kind") != "replay" or "replay" not in f:
            print(f"{path}: not a dfccl-harness replay file (tool {attrs.get('tool')!r}, workload_kind "
                  f"{attrs.get('workload_kind')!r}); run a replay workload (docs/harness.md)")
            raise SystemExit(2)
        sc = {k: (text(v) if isinstance(v, (bytes, str)) else v.item() if hasattr(v, "item") else v)
              for k, v in f["replay"].attrs.items()}
        backends = {}
        for b in f["backends"]:
            g = f"backends/{b}"
            if "replay" not in f[g] or len(f[g]["replay"]["trial"]) == 0:
                continue
            t = f[g]["trials"]
            r = f[g]["replay"]
            backends[b] = {
                "scenario_trial": r["scenario_trial"][()].astype(np.int64),
                "status": strings(r["status"]),
                "elapsed_s": t["elapsed_s"][()],
                "detect_s": t["detect_s"][()],
                "disordered_ranks": r["disordered_ranks"][()],
                "program_syncs": r["program_syncs"][()],
            }
        s = f["summary"]
        summary = {text(b): {c: s[c][i] for c in ("wrong", "wall_s", "failed", "skipped")}
                   for i, b in enumerate(s["backend"][()])}
        import tomllib
        cfg = tomllib.loads(attrs.get("config", "")) if attrs.get("config") else {}
        timeout = float(cfg.get("run", {}).get("timeout", float("nan")))
        return attrs, sc, backends, summary, timeout


def run_sim(sim, sc, models, first, trials, per_trial):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "sim.h5")
        cmd = [sim, "-q", "-m", ",".join(models), "-l", sc["layout"], "-c", str(sc["colls"]),
               "-d", repr(float(sc["p_disorder"])), "-s", repr(float(sc["p_sync"])), "--seed", str(sc["seed"]),
               "--first-trial", str(first), "-t", str(trials), "-o", out]
        if per_trial:
            cmd.append("--per-trial")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        res = {}
        with h5py.File(out, "r") as f:
            s = f["sim/settings"]
            letters = strings(s["model"])
            for i, m in enumerate(letters):
                res[m] = {"deadlocks": int(s["deadlocks"][i]), "trials": int(s["trials"][i]),
                          "rate": float(s["rate"][i]), "ci": (float(s["ci_lo"][i]), float(s["ci_hi"][i]))}
            if per_trial:
                t = f["sim/trials"]
                setting = t["setting"][()]
                for i, m in enumerate(letters):
                    sel = setting == i
                    res[m]["per_trial"] = dict(zip(t["trial"][()][sel].tolist(), t["deadlocked"][()][sel].tolist()))
        # The command as a reader would type it (no temporary file).
        shown = [c for c in cmd if c != out and c != "-o"]
        return res, shlex.join(shown)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="dfccl-harness files of replay workloads")
    ap.add_argument("--sim", default=os.environ.get("DFCCL_SIM", "build/bin/dfccl-sim"))
    ap.add_argument("--reference-trials", type=int, default=100000,
                    help="trials of the simulator's independent prediction (after the replayed ones)")
    ap.add_argument("--report", help="write the report as Markdown")
    ap.add_argument("--h5", help="write the comparison as a small HDF5 file")
    ap.add_argument("--plot", help="write a figure (PNG)")
    a = ap.parse_args()

    lines = []

    def say(s=""):
        print(s)
        lines.append(s)

    settings = []  # one dict per (file, backend)
    trial_rows = []  # (setting row, scenario trial, harness, simulator, elapsed)
    all_ok = True
    say("# dfccl-sim against the harness: the same scenarios, trial by trial")
    say()
    say(f"Generated by `scripts/validate_sim.py {' '.join(shlex.quote(x) for x in sys.argv[1:])}` on "
        f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.")
    for path in a.files:
        attrs, sc, backends, summary, timeout = read_replay(path)
        if not backends:
            print(f"{path}: no backend with replay trials")
            return 2
        say()
        say(f"## `{sc['layout']}` ({sc['ranks']} ranks, {sc['groups']} groups), {sc['colls']} collectives per group, "
            f"disorder {sc['p_disorder']}, sync {sc['p_sync']}, seed {sc['seed']}: {', '.join(backends)}")
        say()
        say(f"Harness file `{path}`: {attrs.get('command_line', '?')}")
        say(f"(git {attrs.get('git_revision', '?')}, {attrs.get('date_utc', '?')}, {attrs.get('hostname', '?')}; "
            f"every submission posts one {sc['coll']} of {sc['bytes']} B; watchdog timeout {timeout:g} s).")
        for b, h in backends.items():
            model = MODEL_OF.get(b)
            if model is None:
                say(f"- backend {b}: no model known for it, skipped")
                continue
            trials = h["scenario_trial"]
            first, n = int(trials.min()), len(trials)
            if not np.array_equal(trials, np.arange(first, first + n)):
                print(f"{path}: backend {b}: scenario trials are not consecutive")
                return 2
            same, same_cmd = run_sim(a.sim, sc, [model], first, n, True)
            ref, ref_cmd = run_sim(a.sim, sc, [model], first + n, a.reference_trials, False)
            same, ref = same[model], ref[model]
            status = h["status"]
            comparable = (status == "completed") | (status == "deadlocked")
            hd = (status == "deadlocked").astype(int)
            sd = np.array([same["per_trial"][int(t)] for t in trials], dtype=int)
            agree = int(((hd == sd) & comparable).sum())
            disagree = int(((hd != sd) & comparable).sum())
            other = int((~comparable).sum())
            k, m = int(hd[comparable].sum()), int(comparable.sum())
            lo, hi = wilson(k, m)
            inside = lo <= ref["rate"] <= hi
            completed_el = h["elapsed_s"][status == "completed"]
            max_el = float(completed_el.max()) if len(completed_el) else float("nan")
            p99_el = float(np.percentile(completed_el, 99)) if len(completed_el) else float("nan")
            ok_trials = disagree == 0 and other == 0 and m > 0
            ok = ok_trials and inside
            all_ok &= ok
            confusion = {(x, y): int(((hd == x) & (sd == y) & comparable).sum()) for x in (0, 1) for y in (0, 1)}
            say()
            say(f"### {b} vs model ({model}) {MODEL_NAME[model]}")
            say()
            say(f"| | trials | deadlocked | rate | Wilson 95 % |")
            say(f"|---|---|---|---|---|")
            say(f"| harness `{b}` (scenario trials {first}-{first + n - 1}) | {m} | {k} | {pct(k / max(m, 1))} | "
                f"[{pct(lo)}, {pct(hi)}] |")
            say(f"| simulator, model ({model}), the same trials | {same['trials']} | {same['deadlocks']} | "
                f"{pct(same['rate'])} | [{pct(same['ci'][0])}, {pct(same['ci'][1])}] |")
            say(f"| simulator, model ({model}), {ref['trials']} other trials ({first + n}-{first + n + ref['trials'] - 1}) "
                f"| {ref['trials']} | {ref['deadlocks']} | {pct(ref['rate'])} | [{pct(ref['ci'][0])}, {pct(ref['ci'][1])}] |")
            say()
            say(f"- per trial: **{agree}/{m} agree**, {disagree} disagree"
                + (f", {other} neither completed nor deadlocked" if other else "")
                + f"; harness × simulator (0 completed, 1 deadlocked): 00: {confusion[(0, 0)]}, 01: {confusion[(0, 1)]}, "
                f"10: {confusion[(1, 0)]}, 11: {confusion[(1, 1)]} — {'PASS' if ok_trials else 'FAIL'}")
            bad = [int(t) for t, x, y, c in zip(trials, hd, sd, comparable) if c and x != y]
            if bad:
                say(f"  - disagreeing scenario trials: {bad[:30]}{' ...' if len(bad) > 30 else ''}")
            if other:
                say(f"  - not comparable: {dict(zip(*np.unique(status[~comparable], return_counts=True)))}")
            say(f"- rate: the simulator's independent prediction {pct(ref['rate'])} is "
                f"{'inside' if inside else 'OUTSIDE'} the harness's interval [{pct(lo)}, {pct(hi)}] — "
                f"{'PASS' if inside else 'FAIL'}")
            say(f"- watchdog: completed trials took at most {max_el:.3f} s (99th percentile {p99_el:.3f} s) against a "
                f"timeout of {timeout:g} s; wrong elements {summary[b]['wrong']}; the backend ran "
                f"{summary[b]['wall_s']:.0f} s")
            say(f"- simulator: `{same_cmd}` and `{ref_cmd}`")
            row = {"file": os.path.basename(path), "layout": sc["layout"], "ranks": sc["ranks"], "groups": sc["groups"],
                   "colls": sc["colls"], "p_disorder": sc["p_disorder"], "p_sync": sc["p_sync"], "seed": sc["seed"],
                   "first_trial": first, "backend": b, "model": model, "trials": m, "deadlocked": k,
                   "rate": k / max(m, 1), "ci_lo": lo, "ci_hi": hi, "sim_deadlocked": same["deadlocks"],
                   "sim_rate": same["rate"], "reference_trials": ref["trials"], "reference_rate": ref["rate"],
                   "reference_ci_lo": ref["ci"][0], "reference_ci_hi": ref["ci"][1], "agree": agree,
                   "disagree": disagree, "not_comparable": other, "rate_inside": int(inside), "timeout_s": timeout,
                   "max_completed_s": max_el, "wrong": int(summary[b]["wrong"]), "wall_s": float(summary[b]["wall_s"])}
            settings.append(row)
            for t, x, y, c, el in zip(trials, hd, sd, comparable, h["elapsed_s"]):
                trial_rows.append((len(settings) - 1, int(t), int(x) if c else -1, int(y), float(el)))
    say()
    say("## Summary")
    say()
    say("| layout | ranks | disorder | sync | backend | model | trials | harness deadlocked | harness Wilson 95 % "
        "| simulator, same trials | per-trial agreement | simulator, independent trials | inside | slowest completed trial / timeout (silence) |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in settings:
        say(f"| `{r['layout']}` | {r['ranks']} | {r['p_disorder']} | {r['p_sync']} | {r['backend']} | {r['model']} | "
            f"{r['trials']} | {r['deadlocked']} ({pct(r['rate'])}) | [{pct(r['ci_lo'])}, {pct(r['ci_hi'])}] | "
            f"{r['sim_deadlocked']} ({pct(r['sim_rate'])}) | {r['agree']}/{r['trials']} | "
            f"{pct(r['reference_rate'])} of {r['reference_trials']} | {'yes' if r['rate_inside'] else 'NO'} | "
            f"{r['max_completed_s']:.2f} s / {r['timeout_s']:g} s |")
    say()
    say(f"Result: {'PASS' if all_ok else 'FAIL'}")

    if a.report:
        with open(a.report, "w") as f:
            f.write("\n".join(lines) + "\n")
    if a.h5:
        write_h5(a.h5, settings, trial_rows)
    if a.plot:
        plot(a.plot, settings)
    return 0 if all_ok else 1


def write_h5(path, settings, trial_rows):
    rev = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    with h5py.File(path, "w") as f:
        f.attrs["tool"] = "validate_sim.py"
        f.attrs["git_revision"] = rev or "unknown"
        f.attrs["date_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        f.attrs["hostname"] = socket.gethostname()
        f.attrs["command_line"] = shlex.join(["scripts/validate_sim.py"] + sys.argv[1:])
        s = f.create_group("settings")
        str_t = h5py.string_dtype()
        for key in settings[0]:
            vals = [r[key] for r in settings]
            if isinstance(vals[0], str):
                s.create_dataset(key, data=np.array(vals, dtype=object), dtype=str_t)
            elif isinstance(vals[0], float):
                s.create_dataset(key, data=np.array(vals, dtype=np.float64))
            else:
                s.create_dataset(key, data=np.array(vals, dtype=np.int64))
        t = f.create_group("trials")
        cols = list(zip(*trial_rows))
        for name, col, dt in (("setting", cols[0], np.int64), ("scenario_trial", cols[1], np.int64),
                              ("harness", cols[2], np.int64), ("simulator", cols[3], np.int64),
                              ("elapsed_s", cols[4], np.float64)):
            t.create_dataset(name, data=np.array(col, dtype=dt), compression="gzip", shuffle=True)


def plot(path, settings):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    labels = []
    for i, r in enumerate(settings):
        labels.append(f"{r['layout']}\n{r['ranks']} ranks, {r['backend']}")
        ax.errorbar(i - 0.12, 100 * r["rate"], yerr=[[100 * (r["rate"] - r["ci_lo"])], [100 * (r["ci_hi"] - r["rate"])]],
                    fmt="o", color="tab:blue", capsize=4, label="harness (Wilson 95 %)" if i == 0 else None)
        ax.plot(i, 100 * r["sim_rate"], "x", color="tab:orange", ms=8,
                label="simulator, same trials" if i == 0 else None)
        ax.errorbar(i + 0.12, 100 * r["reference_rate"],
                    yerr=[[100 * (r["reference_rate"] - r["reference_ci_lo"])],
                          [100 * (r["reference_ci_hi"] - r["reference_rate"])]],
                    fmt="s", color="tab:green", capsize=4, ms=5,
                    label="simulator, independent trials" if i == 0 else None)
        ax.annotate(f"{r['agree']}/{r['trials']}\nagree", (i, 100 * max(r["ci_hi"], r["reference_rate"]) + 2),
                    ha="center", fontsize=7)
    ax.set_xticks(range(len(settings)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("deadlocked trials (%)")
    ax.set_xlim(-0.5, len(settings) - 0.5)
    ax.set_ylim(-3, max(60, 100 * max(r["ci_hi"] for r in settings) + 12))
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title("dfccl-sim vs dfccl-harness replays (host-blocking = model a, host = model d)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
