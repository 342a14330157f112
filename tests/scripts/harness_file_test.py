#!/usr/bin/env python3
"""The reader and plot_harness.py on a file the harness has just written (ctest: harness_mpi_sweep_host's
sweep_host.h5, 4 ranks on the host executor, sweep.toml up to 16K).
Usage: scripts/python.sh tests/scripts/harness_file_test.py FILE.h5"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import dfccl_results as dr  # noqa: E402

COLLS = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"}


def check(cond, what):
    if not cond:
        print(f"harness_file_test: FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def main(path):
    df, trials, attrs = dr.cases(path), dr.trials(path), dr.run_attributes(path)
    check(len(df) >= 40, f"{len(df)} case rows, expected at least 40")
    check(set(df["backend"]) == {"host"} and set(df["executor"]) == {"host"}, f"backends {set(df['backend'])}")
    check(set(df["coll"]) == COLLS, f"collectives {set(df['coll'])}")
    check((df["bytes"].min(), df["bytes"].max()) == (8, 16 << 10), "sizes from 8 B to 16 KiB")
    check(not df.duplicated(["coll", "bytes", "in_place"]).any(), "one row per collective, size and measurement")
    check(len(dr.variant(df)) == len(dr.variant(df, True)), "an in-place row for every out-of-place one")
    sizes = sorted(dr.variant(df)[dr.variant(df)["coll"] == "all_reduce"]["bytes"])
    check(sizes == [1 << k for k in range(3, 15)], f"all_reduce sizes {sizes}, expected 8 B, 16 B, ..., 16 KiB")
    check((df["wrong"] == 0).all() and (df["samples"] > 0).all(), "every row checked and timed")
    check(sorted(trials["case"]) == sorted(df["case"]) and set(trials["status"]) == {"completed"},
          "one completed trial per case")
    check((df["world_nranks"] == 4).all() and (df["gpu"] == "no GPU").all(), "4 ranks, no GPU")
    check((df["git_revision"] == attrs["git_revision"]).all() and attrs["git_revision"] != "", "git revision")
    with tempfile.TemporaryDirectory() as out:
        made = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/plot_harness.py"), path, "--out", out],
                              capture_output=True, text=True, check=True).stdout.split()
        png = os.path.join(out, "bandwidth_all_reduce.png")
        check(png in made and os.path.getsize(png) > 10000, f"plot_harness.py wrote {made}")
        with open(png, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "a PNG file")
    print(f"harness_file_test: {path}: {len(df)} rows, {len(made)} plots: OK")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: harness_file_test.py FILE.h5")
    main(sys.argv[1])
