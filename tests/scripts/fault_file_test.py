#!/usr/bin/env python3
"""The reader and plot_fault.py on the fault workload's file the harness has just written (ctest:
harness_mpi_fault_host's fault_host.h5, 4 ranks on the host executor, 5 trials of workloads/fault.toml).
Usage: scripts/python.sh tests/scripts/fault_file_test.py FILE.h5 TRIALS"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import dfccl_results as dr  # noqa: E402


def check(cond, what):
    if not cond:
        print(f"fault_file_test: FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def main(path, trials):
    df, tr, attrs = dr.faults(path), dr.trials(path), dr.run_attributes(path)
    check(attrs["workload_kind"] == "fault" and attrs["status"] == "complete", f"kind and status {attrs}")
    check(len(df) == trials and list(df["trial"]) == list(range(trials)), f"{len(df)} fault rows, expected {trials}")
    check(list(tr["status"]) == list(df["status"]) and set(df["status"]) == {"completed"}, "every trial completed")
    check(((df["victim"] >= 0) & (df["victim"] < 4)).all(), f"victims {list(df['victim'])}")
    check((df["survivors"] == 3).all() and (df["wrong"] == 0).all(), "3 exact survivors in every trial")
    check(((df["kill_ms"] >= 0) & (df["kill_ms"] <= 200)).all(), "kills within fault.kill_max_ms")
    check(((df["detect_s"] > 0) & (df["detect_s"] <= df["recover_s"]) & (df["shrink_s"] > 0)).all(),
          "0 < detect <= recover and shrink > 0")
    check((df["recover_s"] < 10).all(), f"recover times {list(df['recover_s'])} under run.timeout")
    check((df["lost"] >= 1).all() and (df["resumed_at"] >= 0).all(), "a lost collective and a resume point each")
    with tempfile.TemporaryDirectory() as out:
        made = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/plot_fault.py"), path, "--out", out],
                              capture_output=True, text=True, check=True).stdout.split()
        check(made == [os.path.join(out, "fault_host.png")] and os.path.getsize(made[0]) > 10000, f"plots {made}")
    print(f"fault_file_test: {path}: {trials} trials, recover median {df['recover_s'].median() * 1e3:.0f} ms")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
