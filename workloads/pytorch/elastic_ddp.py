"""Elastic DDP: a rank dies, the survivors shrink the process group and train on to the last step.

    python workloads/pytorch/elastic_ddp.py --nproc 4 --steps 12 --seed 1 --check --out elastic.json
    python workloads/pytorch/elastic_ddp.py --device cuda --check      # CUDA tensors (rank r on GPU r % GPUs)

--nproc ranks train a small MLP with DDP on the dfccl backend. One rank (--victim, else drawn from --seed) kills
itself with SIGKILL at step --kill-step (else drawn), before its forward pass, inside its backward pass (after part of
its gradient buckets went out) or before the step's loss all_reduce (--kill-at). The survivors see the failure as a
DistBackendError of a collective, agree on who is gone and make the group of the rest (dfccl_torch.shrink_group:
dfcclCommShrink's agreement, then torch's dist.shrink_group), agree on the first step that not every one of them
finished, restore the model and optimizer they kept from before it, and train on from there on the smaller group.

Every step trains on one global batch (--batch samples, drawn from --seed and the step) that the ranks of the step's
group share equally, and DDP averages their gradients: a step's gradient and its loss (the global batch's mean,
all_reduced) are those of one process training on the whole batch, whatever the group's size. So the loss curve goes
on across the failure as if nothing had happened, and --check compares it with that one process (--rtol).

The program starts its ranks itself, as processes forked from a forkserver with torch imported, meeting through a
FileStore in a temporary folder: torchrun would end the survivors when one rank dies. The JSON file (--out) has each
step's loss and group size, the victim, the failure's times (kill to detection, to the new group, to its first
completed collective) and with --check the reference losses and the largest relative difference.
"""
import argparse
import copy
import datetime
import json
import multiprocessing as mp
import os
import random
import signal
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

KILL_AT = ("forward", "backward", "loss")


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=4, help="ranks (at least 2)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1, help="model, data, and the victim, step and place drawn")
    ap.add_argument("--victim", type=int, default=-1, help="the rank that dies (-1: drawn from --seed)")
    ap.add_argument("--kill-step", type=int, default=-1, help="its step (-1: drawn from 1..steps-2)")
    ap.add_argument("--kill-at", choices=KILL_AT + ("random",), default="random", help="where in the step it dies")
    ap.add_argument("--no-kill", action="store_true", help="nobody dies (the baseline)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--batch", type=int, default=24, help="global batch; divisible by --nproc and --nproc - 1")
    ap.add_argument("--width", type=int, default=32, help="hidden width of the MLP")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--timeout", type=float, default=60, help="the process group's timeout (s)")
    ap.add_argument("--check", action="store_true", help="compare each step's loss with one process's (--rtol)")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--out", default="", help="the JSON file (default elastic_ddp-<UTC time>.json)")
    args = ap.parse_args(argv)
    if args.nproc < 2:
        ap.error("--nproc must be at least 2")
    for world in (args.nproc, args.nproc - 1):
        if args.batch % world:
            ap.error(f"--batch {args.batch} is not divisible by a group size of {world}")
    if args.steps < 3:
        ap.error("--steps must be at least 3")
    rng = random.Random(args.seed)
    victim, kill_step, kill_at = rng.randrange(args.nproc), rng.randrange(1, args.steps - 1), rng.choice(KILL_AT)
    if args.victim < 0:
        args.victim = victim
    if args.kill_step < 0:
        args.kill_step = kill_step
    if args.kill_at == "random":
        args.kill_at = kill_at
    if not 0 <= args.victim < args.nproc:
        ap.error(f"--victim {args.victim} is outside 0..{args.nproc - 1}")
    if not 0 <= args.kill_step < args.steps:
        ap.error(f"--kill-step {args.kill_step} is outside 0..{args.steps - 1}")
    if args.no_kill:
        args.victim = -1
    if not args.out:
        args.out = f"elastic_ddp-{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%SZ}.json"
    return args


def make_model(args, device):
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, args.width), torch.nn.Tanh(), torch.nn.Linear(args.width, args.width),
                                torch.nn.Tanh(), torch.nn.Linear(args.width, 4)).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)


def global_batch(args, step, device):
    a = torch.randn(16, 4, generator=torch.Generator().manual_seed(args.seed)) / 4  # the map to learn
    g = torch.Generator().manual_seed(args.seed * 100003 + step)
    x = torch.randn(args.batch, 16, generator=g)
    y = x @ a + 0.05 * torch.randn(args.batch, 4, generator=g)
    return x.to(device), y.to(device)


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)  # one clock for every process of the host


def die(outdir, step, where):
    with open(os.path.join(outdir, "kill.json"), "w") as f:
        json.dump({"time": now(), "step": step, "at": where}, f)
    os.kill(os.getpid(), signal.SIGKILL)


def snapshot(model, opt):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, copy.deepcopy(opt.state_dict())


def restore(args, device, snap):
    model, opt = make_model(args, device)
    model.load_state_dict(snap[0])
    opt.load_state_dict(snap[1])
    return model, opt


def train_step(args, net, opt, group, step, device, rank, outdir):
    """One step on `group`: this rank's share of the global batch; returns the global batch's mean loss."""
    x, y = global_batch(args, step, device)
    n = args.batch // group.size()
    lo = group.rank() * n
    dies = rank == args.victim and step == args.kill_step
    if dies and args.kill_at == "forward":
        die(outdir, step, "forward")
    opt.zero_grad()
    loss = F.mse_loss(net(x[lo:lo + n]), y[lo:lo + n])
    if dies and args.kill_at == "backward":  # the first layer's gradient comes last: later buckets already went out
        net.module[0].weight.register_hook(lambda g: die(outdir, step, "backward"))
    loss.backward()
    if dies and args.kill_at == "loss":
        die(outdir, step, "loss")
    total = (loss.detach() * n).reshape(1)
    dist.all_reduce(total, group=group)
    opt.step()
    return total.item() / args.batch


def rank_main(rank, args, store, outdir):
    import dfccl_torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    device = torch.device("cpu")
    if args.device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("dfccl", init_method=f"file://{store}", rank=rank, world_size=args.nproc,
                            timeout=datetime.timedelta(seconds=args.timeout))
    group = dist.group.WORLD
    model, opt = make_model(args, device)
    net = DDP(model, process_group=group)
    losses, sizes, failures, snaps = {}, {}, [], {}
    step = 0
    while step < args.steps:
        snaps[step] = snapshot(model, opt)
        snaps.pop(step - 2, None)  # a survivor is at most one step ahead of another
        try:
            losses[step] = train_step(args, net, opt, group, step, device, rank, outdir)
            sizes[step] = group.size()
            step += 1
            continue
        except RuntimeError as e:  # DistBackendError: a collective of the step failed
            detected, error = now(), str(e)
        del net  # its reducer's hooks go with it; the model is made anew below
        group, excluded = dfccl_torch.shrink_group(group)
        shrunk = now()
        first = torch.tensor([step], dtype=torch.int64, device=device)
        dist.all_reduce(first, op=dist.ReduceOp.MIN, group=group)  # the first step not every survivor finished
        resumed = int(first.item())
        done = now()
        model, opt = restore(args, device, snaps[resumed])
        net = DDP(model, process_group=group)
        for s in [s for s in losses if s >= resumed]:
            del losses[s], sizes[s]
        failures.append({"failed_step": step, "resumed_step": resumed, "excluded": excluded, "detected": detected,
                         "shrunk": shrunk, "first_collective": done, "error": error[:300], "new_rank": group.rank(),
                         "new_size": group.size()})
        step = resumed
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "losses": [losses[s] for s in range(args.steps)],
                   "sizes": [sizes[s] for s in range(args.steps)], "failures": failures}, f)
    dist.destroy_process_group()


def reference(args):
    """One process training on each step's whole global batch: the losses the ranks must match."""
    model, opt = make_model(args, torch.device("cpu"))
    out = []
    for step in range(args.steps):
        x, y = global_batch(args, step, torch.device("cpu"))
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def launch(args, outdir):
    """Runs the ranks; returns their exit codes (the victim's is -SIGKILL)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed"])
    store = os.path.join(outdir, "store")
    procs = [ctx.Process(target=rank_main, args=(r, args, store, outdir)) for r in range(args.nproc)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 4 * args.timeout
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    return [p.exitcode for p in procs]


def summarize(args, outdir, codes):
    """The run's record from the ranks' files; raises SystemExit naming what went wrong."""
    survivors = [r for r in range(args.nproc) if r != args.victim]
    problems = [f"rank {r} exited with {codes[r]}" for r in survivors if codes[r] != 0]
    if args.victim >= 0 and codes[args.victim] != -signal.SIGKILL:
        problems.append(f"the victim, rank {args.victim}, exited with {codes[args.victim]} (not SIGKILL)")
    reports = {}
    for r in survivors:
        path = os.path.join(outdir, f"rank{r}.json")
        if os.path.exists(path):
            with open(path) as f:
                reports[r] = json.load(f)
        elif codes[r] == 0:
            problems.append(f"rank {r} wrote no report")
    if problems:
        raise SystemExit("elastic_ddp: " + "; ".join(problems))
    first = reports[survivors[0]]
    for r in survivors[1:]:
        if reports[r]["losses"] != first["losses"]:
            raise SystemExit(f"elastic_ddp: ranks {survivors[0]} and {r} recorded different losses")
    rec = {"workload": "elastic_ddp", "device": args.device, "nproc": args.nproc, "steps": args.steps,
           "seed": args.seed, "batch": args.batch, "victim": args.victim, "kill_step": args.kill_step,
           "kill_at": args.kill_at, "losses": first["losses"], "group_size": first["sizes"], "failure": None}
    if args.victim >= 0:
        with open(os.path.join(outdir, "kill.json")) as f:
            kill = json.load(f)
        fails = [reports[r]["failures"] for r in survivors]
        if any(len(fl) != 1 for fl in fails):
            raise SystemExit(f"elastic_ddp: the survivors shrank {[len(fl) for fl in fails]} times, not once each")
        fails = [fl[0] for fl in fails]
        rec["failure"] = {
            "excluded": fails[0]["excluded"], "failed_steps": [f["failed_step"] for f in fails],
            "resumed_step": fails[0]["resumed_step"], "killed_at": kill["at"],
            "detect_s": max(f["detected"] for f in fails) - kill["time"],
            "shrink_s": max(f["shrunk"] for f in fails) - kill["time"],
            "kill_to_first_collective_s": max(f["first_collective"] for f in fails) - kill["time"],
            "error": fails[0]["error"]}
        if any(f["excluded"] != [args.victim] for f in fails):
            raise SystemExit(f"elastic_ddp: the survivors excluded {[f['excluded'] for f in fails]}, not "
                             f"[{args.victim}]")
    return rec


def main(argv=None):
    args = parse(argv)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="elastic_ddp-") as outdir:
        codes = launch(args, outdir)
        rec = summarize(args, outdir, codes)
    rec["wall_s"] = time.monotonic() - t0
    status = 0
    if args.check:
        ref = reference(args)
        rec["reference"] = ref
        rec["max_rel_diff"] = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(rec["losses"], ref))
        status = 0 if rec["max_rel_diff"] <= args.rtol else 1
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(rec, f, indent=1)
    for s, (loss, size) in enumerate(zip(rec["losses"], rec["group_size"])):
        print(f"step {s:3d}  ranks {size}  loss {loss:.6f}" + (f"  one process {rec['reference'][s]:.6f}"
                                                               if args.check else ""))
    if rec["failure"]:
        fl = rec["failure"]
        print(f"rank {args.victim} killed at step {args.kill_step} ({fl['killed_at']}); survivors resumed at step "
              f"{fl['resumed_step']} on {args.nproc - 1} ranks: detected {fl['detect_s'] * 1e3:.0f} ms, shrunk "
              f"{fl['shrink_s'] * 1e3:.0f} ms, first collective {fl['kill_to_first_collective_s'] * 1e3:.0f} ms "
              "after the kill")
    if args.check:
        print(f"largest relative difference from one process: {rec['max_rel_diff']:.2e} (rtol {args.rtol})")
    print(f"elastic_ddp: {args.steps} steps in {rec['wall_s']:.1f} s; {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
