#!/usr/bin/env python3
"""Writes docs/results.md from the committed HDF5 files in results/ (results/README.md names the command, commit and
machine of each), and prints the README's headline table, which docs/results.md opens with. tests/docs/ regenerates
both and fails where they differ from what is committed: after changing a file in results/ (or this script), run
  scripts/python.sh scripts/results_doc.py            # writes docs/results.md
  scripts/python.sh scripts/results_doc.py --headline # the table to paste between the README's headline markers
Usage: scripts/python.sh scripts/results_doc.py [--out FILE] [--headline]
"""
import argparse
import glob
import os
import re
import sys
import textwrap

import dfccl_results as dr
from compare_table import human, load, parse_size, ratio, table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU = "results/gpu"
SWEEP = f"{GPU}/sweep-2xH200.h5"
STRESS = {"dfccl": f"{GPU}/stress-dfccl-2xH200.h5", "nccl": f"{GPU}/stress-nccl-2xH200.h5"}
COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"]


def sizes(text):
    return [parse_size(s) for s in text.split(",")]


def cases(path):
    return dr.cases(os.path.join(ROOT, path))


def summary(path):
    """The rows of the file's /summary table, one dict per backend (docs/hdf5-layout.md)."""
    return dr.summary(os.path.join(ROOT, path)).to_dict("records")


def attr(path, name):
    return dr.run_attributes(os.path.join(ROOT, path))[name]


def rate(r):
    return f"{r['deadlock_rate']:.2g} ({r['ci_low']:.2g} – {r['ci_high']:.2g})"


def headline():
    """At most 12 rows: all-reduce on 2xH200 (small-message time, busbw at a few sizes) and the stress outcome."""
    df = cases(SWEEP)
    d, n = load(df, "dfccl"), load(df, "nccl")
    nccl = f"NCCL {attr(STRESS['nccl'], 'nccl_version')}"
    lines = [f"| 2×H200, float32 | dfccl | {nccl} | dfccl / NCCL |", "|---|---:|---:|---:|"]
    for s in sizes("8,64K"):
        (td, bd), (tn, bn) = d[("all_reduce", s)], n[("all_reduce", s)]
        lines.append(f"| all-reduce {human(s)}, time (µs) | {td:.1f} | {tn:.1f} | {ratio(td, bd, tn, bn)} |")
    for s in sizes("1M,4M,16M,256M,1G"):
        (td, bd), (tn, bn) = d[("all_reduce", s)], n[("all_reduce", s)]
        lines.append(f"| all-reduce {human(s)}, busbw (GB/s) | {bd:.1f} | {bn:.1f} | {ratio(td, bd, tn, bn)} |")
    sd, sn = summary(STRESS["dfccl"])[0], summary(STRESS["nccl"])[0]
    lines.append(f"| stress workload: trials deadlocked | {sd['deadlocked']} of {sd['trials']} | "
                 f"{sn['deadlocked']} of {sn['trials']} | |")
    lines.append(f"| stress workload: wrong elements | {sd['wrong']} | {sn['wrong']} | |")
    return lines


def outcomes(paths):
    """One row per backend of each harness file: how its trials (a stress trial, or a sweep's case) ended."""
    lines = ["| file | backend | ranks | trials | completed | deadlocked | wrong | deadlock rate (95 % CI) |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for p in paths:
        ranks = attr(p, "nranks")
        for r in summary(p):
            lines.append(f"| `{os.path.relpath(p, 'results')}` | {r['backend']} | {ranks} | {r['trials']} | "
                         f"{r['completed']} | {r['deadlocked']} | {r['wrong']} | {rate(r)} |")
    return lines


def torch_runs(paths):
    """One row per PyTorch workload file (workloads/pytorch): its training outcome."""
    lines = ["| file | backend | ranks | layout | steps | median step (ms) | loss difference from one process | "
             "wrong |", "|---|---|---:|---|---:|---:|---:|---:|"]
    for p in paths:
        for r in summary(p):
            diff = r.get("reference_max_rel_diff")
            lines.append(f"| `{os.path.relpath(p, 'results')}` | {r['backend']} | {attr(p, 'nranks')} | "
                         f"{attr(p, 'layout')} | {r['steps']} | {r['step_time_median_s'] * 1e3:.1f} | "
                         f"{'' if diff is None else f'{diff:.2g}'} | {r['wrong']} |")
    return lines


def fault_runs(paths):
    """One row per backend of each fault workload file (workloads/fault.toml): its trials, and the times from the
    kill (median and largest over the recovered trials)."""
    lines = ["| file | backend | ranks | trials | recovered | hung | wrong | kill to detection (ms) | shrink (ms) | "
             "kill to first collective (ms) | lost collectives |", "|---|---|---:|---:|---:|---:|---:|---|---|---|---|"]

    def spread(v, scale=1e3):
        return f"{v.median() * scale:.0f}, max {v.max() * scale:.0f}" if len(v) else "–"

    for p in paths:
        df = dr.faults(os.path.join(ROOT, p))
        for backend, t in df.groupby("backend", sort=False):
            done = t[t["status"] == "completed"]
            lines.append(f"| `{os.path.relpath(p, 'results')}` | {backend} | {attr(p, 'nranks')} | {len(t)} | "
                         f"{len(done)} | {int((t['status'] == 'deadlocked').sum())} | {int(t['wrong'].sum())} | "
                         f"{spread(done['detect_s'])} | {spread(done['shrink_s'])} | {spread(done['recover_s'])} | "
                         f"{spread(done['lost'], 1)} |")
    return lines


def harness_files(pattern):
    return [p for p in files(pattern) if attr(p, "tool") != "dfccl-torch"]


def torch_files(pattern):
    return [p for p in files(pattern) if attr(p, "tool") == "dfccl-torch"]


def compare(path, colls, size_list, base="nccl"):
    return table(cases(path), colls, sizes(size_list), [base])


def host_completion(path):
    d = load(cases(path), "dfccl")
    lines = ["| size | dfccl time (us) | dfccl busbw (GB/s) |", "|---:|---:|---:|"]
    lines += [f"| {human(s)} | {t:.1f} | {b:.1f} |" for (c, s), (t, b) in sorted(d.items()) if c == "all_reduce"]
    return lines


def files(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


def para(text, bullet=False):
    """text as Markdown lines of at most 120 columns; a bullet item when asked."""
    if bullet:
        return textwrap.wrap(text, 120, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False)
    return textwrap.wrap(text, 120, break_on_hyphens=False)


def section(title, *paragraphs):
    out = ["", f"## {title}"]
    for t in paragraphs:
        out += [""] + para(t)
    return out + [""]


def document():
    nccl = attr(STRESS["nccl"], "nccl_version")
    sweep_sizes = "8,64K,1M,2M,4M,8M,16M,64M,128M,256M,512M,1G"
    out = ["# Results", "", "<!-- Generated by scripts/results_doc.py from the HDF5 files in results/; do not edit "
           "(tests/docs checks it). -->", ""]
    out += para("Every table here is computed from the HDF5 files in `results/` by `scripts/python.sh "
                "scripts/results_doc.py`; `results/README.md` gives each file's command, commit, machine and date, and "
                "`docs/harness.md` what the columns mean. Times are medians; busbw follows nccl-tests. The two-GPU "
                "files are from run 80 (2026-12-01, commit fa9b6e9) of `docs/lab/gpu-runs.md`; what changed in the "
                "library since then, "
                "measured on one GPU only, is in `docs/lab/results-notes.md`.")
    out += section("Headline (2×H200 with NVLink)", "The README's table. Ratios above 1 mean dfccl is faster.")
    out += headline()
    out += section("Deadlock stress",
                   "The `stress` workload (`docs/harness.md`): random per-rank orders over 3 communicators, forced and "
                   "implicit synchronizations (`cudaDeviceSynchronize`, `cudaMallocHost`/`cudaFreeHost`, "
                   "`cudaHostRegister`, `cudaFree`, first launches of lazily loaded kernels), exact verification. A "
                   "deadlocked trial is detected by the harness's watchdog and recovered by abort (`ncclCommAbort` for "
                   f"NCCL {nccl}). Plot: `results/gpu/deadlock_rate.png`.")
    out += outcomes(list(STRESS.values()))
    out += section("Sweep: every collective, dfccl and NCCL in the same run",
                   "float32, 2 ranks on 2×H200. NCCL runs on blocking communicators (its fast path); dfccl completes "
                   "on the stream with `dfcclWait`. Timed as nccl-tests does: CUDA events only around batches of 20 "
                   "iterations (`--timing batch`). Plots: `results/gpu/{bandwidth,latency,cv}_<collective>.png`. From "
                   f"`scripts/python.sh scripts/compare_table.py {SWEEP} --sizes {sweep_sizes}`:")
    out += compare(SWEEP, COLLS, sweep_sizes)
    out += section("bfloat16 all-reduce", "The same run, `--dtype bfloat16 --collectives all_reduce`:")
    out += compare(f"{GPU}/sweep-bfloat16-2xH200.h5", ["all_reduce"], "8,64K,1M,8M,16M,64M,128M,256M,512M,1G")
    out += section("What preemption costs on an in-order workload",
                   "The same build in blocking mode (no preemption, like NCCL) as the base, all-reduce, batch timing:")
    out += compare(f"{GPU}/sweep-blocking-2xH200.h5", ["all_reduce"], "8,64K,1M,2M,8M,16M,64M,128M,256M,512M,1G",
                   "dfccl-blocking")
    out += section("Host completion",
                   "All-reduce completed on the host (`--completion host`: `dfcclSynchronize`, which polls before it "
                   "sleeps), timed by the host clock around every iteration: from submission to the result seen by the "
                   "host.")
    out += host_completion(f"{GPU}/sweep-host-completion-2xH200.h5")
    out += section("Several ranks on one GPU",
                   "2, 4 or 8 ranks time-sliced on one H200 (run 101 under MPS): the multi-rank protocol on the CUDA "
                   "executor with real peers. These say nothing about speed or NVLink; `odd-*` are sizes 12 B × 3^k.")
    out += outcomes(harness_files("results/gpu/one-gpu/*/*.h5"))
    out += section("PyTorch programs on one GPU",
                   "`workloads/pytorch/` programs with their ranks time-sliced on one GPU: each file's training "
                   "against the same model trained by one process (`--check`); exactness only, not speed.")
    out += torch_runs(torch_files("results/gpu/one-gpu/*/*.h5"))
    out += section("8 ranks on the host executor",
                   "One CPU thread per daemon block, 8 MPI ranks on a 2-core machine: outcomes only. The blocking "
                   "backend is NCCL's behaviour. Plot: `results/host/deadlock_rate.png`.")
    out += outcomes(harness_files("results/host/*.h5"))
    fault = files("results/host/fault/*.h5")
    if fault:
        out += section("A dead rank, survived",
                       "The fault workload (`workloads/fault.toml`, docs/harness.md \"Fault workload\"): in each trial a "
                       "random rank's process is killed with SIGKILL at a random time, the survivors shrink "
                       "(`dfcclCommShrink`) and run exact collectives on the smaller communicator. Times from the kill "
                       "(median, max over the recovered trials). Plot: `results/host/fault/fault_host.png`.")
        out += fault_runs(fault)
    out += section("Simulator",
                   "Deadlock rates of NCCL-like execution models, and their validation against the harness trial by "
                   "trial: `docs/simulator.md`, `results/sim/tables.md`, `results/sim/validation.md` (both generated "
                   "by their scripts).")
    out += section("Checks without an HDF5 file", "From the logs of runs 80–82 in `docs/lab/logs/`:")
    out += para("GPU test suite (`cuda_collectives_test`, one process driving both GPUs): every collective × 10 "
                "types × 5 operators × counts 0, 1, 17, 1009, 64 Mi × in/out of place, exact "
                "(`docs/lab/logs/cuda_collectives.log`); `cuda_engine_test` passed, including each implicit "
                "synchronization returning while a collective waits for an absent peer "
                "(`docs/lab/logs/cuda_engine_test.log`).", bullet=True)
    out += para("Compute beside an idle engine (`scripts/probes/gemm_beside_engine.cu`): a float32 GEMM on every SM of "
                "GPU 0 loses nothing beside an engine that ran collectives and went idle (the daemon leaves after "
                "`DFCCL_IDLE_NS`), and about 16 % beside a daemon held resident "
                "(`docs/lab/logs/gemm_beside_engine.log`).", bullet=True)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/results.md"), help="where to write docs/results.md")
    ap.add_argument("--headline", action="store_true", help="print the README's headline table instead")
    a = ap.parse_args()
    if a.headline:
        sys.stdout.write("\n".join(headline()) + "\n")
        return
    with open(a.out, "w") as f:
        f.write(document())


if __name__ == "__main__":
    main()
