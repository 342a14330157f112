#!/usr/bin/env python3
"""Validates dfccl-sim against the harness: same random scenarios, simulated rate vs measured rate.

Usage:
  scripts/python.sh scripts/validate_sim.py HARNESS.h5 [--sim build/bin/dfccl-sim] [--report FILE]
        [--layout L --colls C --disorder P --sync Q --seed S --first-trial F]   (when the file does not say)

The harness file must come from a `host-blocking` stress campaign whose ranks replayed dfccl_scenario programs
(docs/simulator.md, "Validation against the harness"): rank r of trial t runs Scenario::program(r, t) for the
scenario (layout, colls, disorder, sync, seed). The scenario is read from the `[sim]` table of the file's `config`
attribute (keys layout, colls, disorder, sync, seed, first_trial) or given on the command line.

What is compared, for the backend (default host-blocking; model a is its model):
  1. rates: the simulator's deadlock rate over the same trials must lie inside the harness's Wilson 95 % interval;
  2. trials: where the file has per-trial statuses (backends/<backend>/trials), each trial's outcome must agree
     (model a is deterministic given the programs, so the expected agreement is 100 %).
Exit status 0 when every check passes, 1 when one fails, 2 when the file cannot be compared.
"""
import argparse
import math
import os
import shlex
import subprocess
import sys
import tempfile
import tomllib

import h5py
import numpy as np

Z95 = 1.959963984540054


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


def column(g, name):
    v = g[name][()]
    if v.dtype.kind in ("O", "S"):
        return np.array([text(x) for x in v])
    return v


def read_harness(path, backend):
    with h5py.File(path, "r") as f:
        attrs = {k: text(v) if isinstance(v, (bytes, str)) else v for k, v in f.attrs.items()}
        if attrs.get("tool") != "dfccl-harness":
            print(f"{path}: tool is {attrs.get('tool')!r}, not dfccl-harness")
            raise SystemExit(2)
        if "summary" not in f:
            print(f"{path}: no /summary table")
            raise SystemExit(2)
        s = f["summary"]
        backends = column(s, "backend")
        rows = np.nonzero(backends == backend)[0]
        if len(rows) != 1:
            print(f"{path}: /summary has {len(rows)} rows for backend {backend!r} (backends: {sorted(set(backends))})")
            raise SystemExit(2)
        i = rows[0]
        summary = {c: column(s, c)[i] for c in ("trials", "deadlocked", "completed", "failed", "skipped", "ci_low",
                                                  "ci_high", "deadlock_rate") if c in s}
        per_trial = None
        tg = f"backends/{backend}/trials"
        if tg in f:
            per_trial = {"trial": column(f[tg], "trial"), "status": column(f[tg], "status")}
        return attrs, summary, per_trial


def scenario_from_config(config_text):
    try:
        cfg = tomllib.loads(config_text)
    except tomllib.TOMLDecodeError as e:
        print(f"warning: the file's config attribute is not TOML ({e})")
        return {}
    sim = cfg.get("sim", {})
    return {k: sim[k] for k in ("layout", "colls", "disorder", "sync", "seed", "first_trial") if k in sim}


def run_sim(sim, sc, trials, threads):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "sim.h5")
        cmd = [sim, "-q", "-m", "a", "-l", sc["layout"], "-c", str(sc["colls"]), "-d", repr(float(sc["disorder"])),
               "-s", repr(float(sc["sync"])), "--seed", str(sc["seed"]), "--first-trial", str(sc.get("first_trial", 0)),
               "-t", str(trials), "--per-trial", "-o", out]
        if threads:
            cmd += ["-j", str(threads)]
        print("$ " + shlex.join(cmd))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with h5py.File(out, "r") as f:
            s = f["sim/settings"]
            t = f["sim/trials"]
            return ({"deadlocks": int(s["deadlocks"][0]), "trials": int(s["trials"][0]), "rate": float(s["rate"][0]),
                     "ci": (float(s["ci_lo"][0]), float(s["ci_hi"][0])), "first_cycle": text(s["first_cycle"][0])},
                    {"trial": t["trial"][()], "deadlocked": t["deadlocked"][()]}, shlex.join(cmd))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("harness", help="HDF5 file of a host-blocking stress campaign on dfccl_scenario programs")
    ap.add_argument("--backend", default="host-blocking")
    ap.add_argument("--sim", default=os.environ.get("DFCCL_SIM", "build/bin/dfccl-sim"))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--report", help="also write the report to this file")
    for k, t in (("layout", str), ("colls", int), ("disorder", float), ("sync", float), ("seed", int),
                 ("first-trial", int)):
        ap.add_argument(f"--{k}", type=t, help="scenario parameter when the file's config has no [sim] table")
    a = ap.parse_args()

    lines = []

    def say(s=""):
        print(s)
        lines.append(s)

    attrs, summary, per_trial = read_harness(a.harness, a.backend)
    sc = scenario_from_config(attrs.get("config", ""))
    for k in ("layout", "colls", "disorder", "sync", "seed", "first_trial"):
        v = getattr(a, k)
        if v is not None:
            sc[k] = v
    missing = [k for k in ("layout", "colls", "disorder", "sync", "seed") if k not in sc]
    if missing:
        print(f"{a.harness}: scenario parameters {missing} are neither in the config's [sim] table nor on the command "
              "line; the harness must replay dfccl_scenario programs for a comparison (docs/simulator.md)")
        return 2

    trials = int(summary["trials"]) - int(summary.get("skipped", 0))
    failed = int(summary.get("failed", 0))
    k = int(summary["deadlocked"])
    if failed:
        say(f"warning: {failed} failed trials in the harness run (neither completed nor deadlocked); they are "
            "excluded from the per-trial comparison and counted as not deadlocked in the rate")
    lo, hi = wilson(k, trials)
    sim, sim_trials, cmd = run_sim(a.sim, sc, trials, a.threads)

    say(f"harness file: {a.harness} (git {attrs.get('git_revision', '?')}, {attrs.get('date_utc', '?')})")
    say(f"scenario: layout {sc['layout']}, {sc['colls']} collectives per group, disorder {sc['disorder']}, "
        f"sync {sc['sync']}, seed {sc['seed']}, first trial {sc.get('first_trial', 0)}")
    say(f"simulator: {cmd}")
    say(f"harness {a.backend}: {k}/{trials} deadlocked = {100 * k / max(trials, 1):.2f} %, "
        f"Wilson 95 % [{100 * lo:.2f} %, {100 * hi:.2f} %]")
    say(f"simulator model a: {sim['deadlocks']}/{sim['trials']} deadlocked = {100 * sim['rate']:.2f} %, "
        f"Wilson 95 % [{100 * sim['ci'][0]:.2f} %, {100 * sim['ci'][1]:.2f} %]")
    ok = lo <= sim["rate"] <= hi
    say(f"check 1 (simulated rate inside the measured interval): {'PASS' if ok else 'FAIL'}")

    if per_trial is not None:
        sim_by_trial = dict(zip(sim_trials["trial"].tolist(), sim_trials["deadlocked"].tolist()))
        agree = disagree = 0
        confusion = {(h, s): 0 for h in (0, 1) for s in (0, 1)}
        examples = []
        for t, st in zip(per_trial["trial"].tolist(), per_trial["status"].tolist()):
            if st not in ("completed", "deadlocked"):
                continue
            t_abs = int(t)  # the harness's trial column is the scenario's trial index
            if t_abs not in sim_by_trial:
                continue
            h = int(st == "deadlocked")
            s = int(sim_by_trial[t_abs])
            confusion[(h, s)] += 1
            if h == s:
                agree += 1
            else:
                disagree += 1
                if len(examples) < 10:
                    examples.append(f"trial {t_abs}: harness {st}, simulator {'deadlocked' if s else 'completed'}")
        n = agree + disagree
        say(f"check 2 (per-trial outcomes): {agree}/{n} agree; harness x simulator (0 = completed, 1 = deadlocked): "
            + ", ".join(f"{h}{s}: {c}" for (h, s), c in confusion.items()))
        for e in examples:
            say("  " + e)
        ok2 = n > 0 and disagree == 0
        say(f"check 2: {'PASS' if ok2 else 'FAIL'}")
        ok = ok and ok2
    else:
        say("check 2 (per-trial outcomes): skipped, the file has no per-trial statuses")
    if sim["first_cycle"]:
        say(f"simulator's first deadlock cycle: {sim['first_cycle']}")
    say(f"result: {'PASS' if ok else 'FAIL'}")
    if a.report:
        with open(a.report, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
