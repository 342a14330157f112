"""workloads/pytorch/gpt_3d.py on the tests' device, its ranks started as torchrun starts them (conftest.run_script):
on 8 ranks (dp x pp x tp = 2 x 2 x 2) its losses equal the one-process reference's (--check) and a
torch.distributed.checkpoint save and load round-trips; on the 4 ranks of dp x pp = 2 x 2 (tp 1) the rank-dependent
order of --disorder completes with the same losses, and in DFCCL_MODE=blocking (under torchrun itself) the same
program hangs until the watchdog reports the stuck groups, ops and missing ranks."""
import os
import re
import subprocess
import sys

import h5py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "workloads", "pytorch", "gpt_3d.py")
SMALL = ["--seq", "16", "--batch", "8", "--microbatches", "2"]  # the smallest batch the schedules take


def torchrun(out, *args, ranks=8, env=None, timeout=240):
    """The blocking test runs under torchrun itself: its outcome is how torchrun ends a job whose ranks fail."""
    device = os.environ.get("TORCH_DFCCL_TEST_DEVICE", "cpu")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks), SCRIPT,
           "--device", device, "--out", str(out), *SMALL, *args]
    full = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full)
    return p, " ".join(cmd)


def gpt_3d(run_script, out, *args, ranks=8, env=None, timeout=240):
    device = os.environ.get("TORCH_DFCCL_TEST_DEVICE", "cpu")
    p = run_script(SCRIPT, ranks, "--device", device, "--out", out, *SMALL, *args, env=env, timeout=timeout)
    return p, p.cmd


def read(path):
    with h5py.File(path, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        summary = {k: f["summary"][k][0] for k in f["summary"]}
        steps = {k: f["backends/dfccl/steps"][k][()] for k in f["backends/dfccl/steps"]}
        ops = {k: [x.decode() if isinstance(x, bytes) else x for x in f["backends/dfccl/group_ops"][k][()]]
               for k in f["backends/dfccl/group_ops"]}
    return attrs, summary, steps, ops


def test_gpt_3d_exact_with_checkpoint(run_script, tmp_path):
    out = tmp_path / "gpt_3d.h5"
    p, cmd = gpt_3d(run_script, out, "--steps", "2", "--warmup", "0", "--check", "--checkpoint",
                    str(tmp_path / "ckpt"))
    assert p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"
    assert "every rank's tensors equal after the load" in p.stdout, p.stdout
    attrs, summary, steps, ops = read(out)
    assert attrs["nranks"] == 8 and attrs["layout"] == "dp=2 pp=2 tp=2" and attrs["status"] == "complete", attrs
    assert summary["reference_max_rel_diff"] <= 1e-4, summary
    assert summary["checkpoint_tensors"] > 0 and summary["throughput"] > 0, summary
    assert len(steps["time_s"]) == 2 and list(steps["warmup"]) == [0, 0], steps
    # Every group dimension carries collectives every step: FSDP (dp), send/recv (pp), TP all-reduces (tp).
    for dim in ("dp", "pp", "tp"):
        assert all(n > 0 for n in steps[f"ops_{dim}"]), (dim, steps[f"ops_{dim}"])
    rows = set(zip(ops["group"], ops["op"]))
    for want in (("dp", "_allgather_base"), ("dp", "_reduce_scatter_base"), ("pp", "send"), ("pp", "recv"),
                 ("tp", "allreduce")):
        assert want in rows, (want, rows)


def test_gpt_3d_disorder_completes(run_script, tmp_path):
    """The ranks of the cycle (two replicas x two stages; tp 1 keeps it short) in rank-dependent orders."""
    out = tmp_path / "gpt_3d.h5"
    p, cmd = gpt_3d(run_script, out, "--tp", "1", "--steps", "2", "--warmup", "0", "--check", "--schedule",
                    "interleaved", "--disorder", ranks=4)
    assert p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"
    _, summary, _, _ = read(out)
    assert summary["disorder"] == 1 and summary["reference_max_rel_diff"] <= 1e-4, summary
    # The order really differs by rank: the reduction before the last transfer on one replica, after it on the other.
    assert "3REDUCE_GRAD 1SEND_B1" in p.stdout and "1SEND_B1 3REDUCE_GRAD" in p.stdout, p.stdout
    assert "2REDUCE_GRAD 0RECV_B1" in p.stdout and "0RECV_B1 2REDUCE_GRAD" in p.stdout, p.stdout


def test_gpt_3d_disorder_hangs_in_blocking_mode(tmp_path):
    """No preemption (each process runs its collectives and transfers one at a time, in submission order) and a
    connection buffering smaller than a pipeline message (so that a send waits for its receiver, as a real model's
    activations do): the four ranks of two replicas x two stages (tp 1) wait for each other in a cycle at their moved
    reductions. The watchdog names the stuck ops and the ranks that never arrived after the groups' timeout and
    aborts the groups (TORCH_DFCCL_WATCHDOG=abort, which also releases CUDA streams): the job fails. The groups'
    timeout (10 s on CPU, 20 s on CUDA, whose start-up takes longer) must exceed every wait before the cycle, the
    ranks' skew at start-up included, so that what the watchdog finds is the cycle."""
    out = tmp_path / "gpt_3d.h5"
    env = {"DFCCL_MODE": "blocking", "TORCH_DFCCL_WATCHDOG": "abort", "DFCCL_SLOT_BYTES": "1024", "DFCCL_SLOTS": "2"}
    timeout = "20" if os.environ.get("TORCH_DFCCL_TEST_DEVICE", "cpu") == "cuda" else "10"
    p, cmd = torchrun(out, "--tp", "1", "--steps", "1", "--warmup", "0", "--schedule", "interleaved",
                         "--disorder", "--timeout", timeout, ranks=4, env=env, timeout=240)
    text = p.stdout + p.stderr
    assert p.returncode != 0, f"{cmd}: completed in blocking mode\n{p.stdout[-3000:]}"
    assert "dfccl watchdog: dfccl: group '" in text, text[-6000:]
    assert "ranks that never arrived" in text, text[-6000:]
    # The cycle's ops: the dp reduce-scatter and the pp transfer, each stuck on some rank ...
    assert "op _reduce_scatter_base" in text and ("op recv" in text or "op send" in text), text[-6000:]
    # ... where --disorder put them: every rank's pipeline stops at its moved REDUCE_GRAD (CPU tensors: the waits
    # there raise; on CUDA the aborted streams go on and a later op raises).
    if os.environ.get("TORCH_DFCCL_TEST_DEVICE", "cpu") == "cpu":
        stops = re.findall(r"caught exception at step \d+ when running action (\w+)", text)
        assert len(stops) == 4 and all(s.endswith("REDUCE_GRAD") for s in stops), stops
    assert not out.exists()
