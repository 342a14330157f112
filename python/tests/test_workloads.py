"""The examples under workloads/pytorch run briefly on 2 ranks, on the tests' device (ddp.py under torchrun itself,
the others started as torchrun starts them, conftest.run_script), and write their HDF5 file: its root attributes,
/summary and /backends/dfccl/steps, also as scripts/dfccl_results.py reads them."""
import csv as csvlib
import io
import math
import os
import shutil
import subprocess
import sys

import h5py
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOADS = os.path.join(ROOT, "workloads", "pytorch")


def torchrun(script, out, *args, timeout=180):
    device = os.environ.get("TORCH_DFCCL_TEST_DEVICE", "cpu")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           os.path.join(WORKLOADS, script), "--device", device, "--out", str(out), *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert p.returncode == 0, f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
    return p.stdout


def launch(run_script, script, out, *args):
    device = os.environ.get("TORCH_DFCCL_TEST_DEVICE", "cpu")
    p = run_script(os.path.join(WORKLOADS, script), 2, "--device", device, "--out", out, *args, timeout=180)
    assert p.returncode == 0, f"{p.cmd}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
    return p.stdout


def read(path):
    with h5py.File(path, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        summary = {k: f["summary"][k][0] for k in f["summary"]}
        steps = {k: f["backends/dfccl/steps"][k][()] for k in f["backends/dfccl/steps"]}
    return attrs, summary, steps


def check_file(path, workload, steps, warmup):
    attrs, summary, table = read(path)
    assert attrs["tool"] == "dfccl-torch" and attrs["workload"] == workload and attrs["status"] == "complete", attrs
    assert attrs["nranks"] == 2 and attrs["backends"] == "dfccl", attrs
    assert summary["steps"] == steps and summary["wrong"] == 0, summary
    assert summary["throughput"] > 0 and math.isfinite(summary["step_time_cv"]), summary
    assert len(table["time_s"]) == steps + warmup and all(t > 0 for t in table["time_s"]), table
    assert list(table["warmup"]) == [1] * warmup + [0] * steps, table
    assert all(math.isfinite(x) for x in table["loss"]), table["loss"]
    return attrs, summary, table


def reader_summary(path):
    """scripts/dfccl_results.py's summary of the file, where an interpreter with pandas is found (else None)."""
    if not shutil.which("bash"):
        return None
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "python.sh"), os.path.join(ROOT, "scripts",
                                                                                           "dfccl_results.py"),
                        str(path), "--table", "summary", "--csv"], capture_output=True, text=True, timeout=120)
    if "no python3 with" in p.stderr:
        return None
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_ddp(tmp_path):
    out = tmp_path / "ddp.h5"
    log = torchrun("ddp.py", out, "--steps", "6", "--warmup", "2", "--width", "64", "--layers", "2")
    assert "ddp: 6 steps, step time median" in log, log
    _, _, table = check_file(out, "ddp", 6, 2)
    assert table["loss"][-1] < table["loss"][0] + 0.5, table["loss"]  # trains, does not diverge
    csv = reader_summary(out)
    if csv is not None:
        cols = next(iter(csvlib.DictReader(io.StringIO(csv))))
        assert cols["workload"] == "ddp" and cols["backend"] == "dfccl" and cols["steps"] == "6", cols


def test_two_groups(run_script, tmp_path):
    out = tmp_path / "two_groups.h5"
    args = ["--steps", "30", "--warmup", "1", "--count", "4096"]
    if os.environ.get("TORCH_DFCCL_TEST_DEVICE") == "cuda":
        args += ["--sync-between", "--empty-cache"]
    launch(run_script, "two_groups.py", out, *args)
    _, summary, table = check_file(out, "two_groups", 30, 1)
    assert all(w == 0 for w in table["wrong"]), table["wrong"]


def test_pipeline_1f1b(run_script, tmp_path):
    out = tmp_path / "pipeline.h5"
    log = launch(run_script, "pipeline_1f1b.py", out, "--steps", "5", "--warmup", "1", "--check")
    assert "largest relative difference from the unpipelined run" in log, log
    attrs, summary, _ = check_file(out, "pipeline_1f1b", 5, 1)
    assert attrs["layout"] == "pp=2" and summary["reference_max_rel_diff"] <= 1e-5, summary
