"""workloads/pytorch/elastic_ddp.py: 4 ranks of DDP, one of which kills itself (SIGKILL) at a step and place drawn
from the seed (before its forward pass, inside its backward pass, or before the step's loss all_reduce); the
survivors see the failure, agree on the dead rank and make the group of three (dfccl_torch.shrink_group:
dfcclCommShrink, then torch's dist.shrink_group), go back to the first step not all of them finished and train on.
Every step's loss, before and after the kill, equals one process training on the same global batches (1e-4), the
group has 4 ranks before the failed step and 3 from it on, and the survivors excluded exactly the victim."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "workloads", "pytorch", "elastic_ddp.py")


def run(tmp_path, *args, timeout=120):
    out = tmp_path / "elastic.json"
    device = os.environ.get("TORCH_DFCCL_TEST_DEVICE", "cpu")
    cmd = [sys.executable, SCRIPT, "--device", device, "--out", str(out), "--check", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode == 0, f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
    with open(out) as f:
        return json.load(f), p.stdout


def test_survivors_shrink_and_the_loss_curve_goes_on(tmp_path):
    """Rank 1 dies inside its backward pass of step 4, after part of its gradient buckets went out."""
    rec, log = run(tmp_path, "--steps", "8", "--seed", "3", "--victim", "1", "--kill-step", "4", "--kill-at", "backward")
    fl = rec["failure"]
    assert rec["kill_at"] == "backward" and fl["killed_at"] == "backward", rec
    assert fl["excluded"] == [rec["victim"]], fl
    assert fl["failed_steps"] == [4, 4, 4] and fl["resumed_step"] == 4, fl
    assert rec["group_size"] == [4] * 4 + [3] * 4, rec["group_size"]
    assert rec["max_rel_diff"] <= 1e-4, (rec["losses"], rec["reference"])
    assert rec["losses"][-1] < rec["losses"][0], rec["losses"]  # it trains
    assert 0 < fl["detect_s"] <= fl["kill_to_first_collective_s"] < 10, fl
    assert "largest relative difference from one process" in log, log


def test_a_seeded_victim_step_and_place(tmp_path):
    """Seed 2 draws rank 0, before its forward pass of step 1: the survivors' group has old rank 1 as its rank 0."""
    rec, _ = run(tmp_path, "--steps", "8", "--seed", "2")
    fl = rec["failure"]
    assert (rec["victim"], rec["kill_step"], rec["kill_at"]) == (0, 1, "forward") and fl["killed_at"] == "forward", rec
    assert fl["excluded"] == [rec["victim"]] and fl["resumed_step"] == rec["kill_step"], fl
    assert rec["group_size"][rec["kill_step"]:] == [3] * (8 - rec["kill_step"]), rec["group_size"]
    assert rec["max_rel_diff"] <= 1e-4, (rec["losses"], rec["reference"])
