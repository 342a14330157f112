"""A 1F1B pipeline over 2 stages with torch.distributed.pipelining (Schedule1F1B over send/recv), checked against the
same model trained without a pipeline (a workload: step time, loss, throughput and step-time CV to HDF5).

    torchrun --nproc-per-node 2 workloads/pytorch/pipeline_1f1b.py --device cpu --steps 20 --check
    torchrun --nproc-per-node 2 workloads/pytorch/pipeline_1f1b.py --device cuda --microbatches 8

Rank 0 runs the first half of an MLP, rank 1 the second half and the loss; activations go forward and gradients
backward by send/recv (batch_isend_irecv). Every rank builds the whole model from --seed and keeps its half; the
last rank also trains a copy of the whole model on the same microbatches in one process (the reference), and
--check exits with 1 when a step's pipelined loss differs from the reference's by more than --rtol.
"""
import copy
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

import torch_results as tr


def options(ap):
    ap.add_argument("--batch", type=int, default=64, help="samples per step (split into microbatches)")
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--check", action="store_true", help="exit 1 if the loss differs from the unpipelined run")
    ap.add_argument("--rtol", type=float, default=1e-5)


def whole_model(args):
    w = args.width
    return torch.nn.Sequential(torch.nn.Linear(32, w), torch.nn.Tanh(), torch.nn.Linear(w, w), torch.nn.Tanh(),
                               torch.nn.Linear(w, w), torch.nn.Tanh(), torch.nn.Linear(w, 8))


def halves(model):
    return model[:4], model[4:]


def reference_step(model, opt, x, y, n):
    """One step without a pipeline: each microbatch's loss backward, scaled by 1/n as Schedule1F1B scales grads."""
    opt.zero_grad()
    losses = []
    for xm, ym in zip(x.chunk(n), y.chunk(n)):
        loss = F.mse_loss(model(xm), ym)
        (loss / n).backward()
        losses.append(loss.detach())
    opt.step()
    return torch.stack(losses).mean().item()


def main():
    args = tr.parse(__doc__.splitlines()[0], options)
    device = tr.init(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 2:
        sys.exit(f"pipeline_1f1b.py: runs on 2 ranks (one stage each), not {world}")
    if args.batch % args.microbatches:
        sys.exit("pipeline_1f1b.py: --batch must be a multiple of --microbatches")
    torch.manual_seed(args.seed)
    whole = whole_model(args).to(device)
    part = copy.deepcopy(halves(whole)[rank])
    mb = args.batch // args.microbatches
    meta_in = torch.empty(mb, 32 if rank == 0 else args.width, device="meta")
    meta_out = torch.empty(mb, args.width if rank == 0 else 8, device="meta")
    stage = PipelineStage(part, rank, 2, device, input_args=meta_in, output_args=meta_out)
    sched = Schedule1F1B(stage, n_microbatches=args.microbatches, loss_fn=F.mse_loss)
    opt = torch.optim.SGD(part.parameters(), lr=args.lr)
    ref_opt = torch.optim.SGD(whole.parameters(), lr=args.lr)
    run = tr.Run(args, "pipeline_1f1b", "1F1B pipeline of an MLP over 2 stages (torch.distributed.pipelining)",
                 device, samples_per_step=args.batch, layout="pp=2")
    run.printer = 1
    gen = torch.Generator(device=device).manual_seed(args.seed + 1)
    worst = 0.0
    for _ in run.steps():
        x = torch.randn(args.batch, 32, generator=gen, device=device)
        y = torch.randn(args.batch, 8, generator=gen, device=device)
        with run.step() as s:
            opt.zero_grad()
            losses = []
            if rank == 0:
                sched.step(x)
            else:
                sched.step(target=y, losses=losses)
            opt.step()
            if rank == 1:
                s.loss = torch.stack(losses).mean().item()
        if rank == 1:
            ref = reference_step(whole, ref_opt, x, y, args.microbatches)
            worst = max(worst, abs(s.loss - ref) / abs(ref))
            run.losses[-1] = s.loss
    # The loss lives on the last stage: rank 0 (which writes the file) gets it and the worst relative difference.
    t = torch.tensor(run.losses + [worst], dtype=torch.float64, device=device)
    dist.broadcast(t, src=1)
    run.losses, worst = t[:-1].tolist(), t[-1].item()
    run.extra = {"reference_max_rel_diff": worst, "microbatches": args.microbatches}
    if rank == 0:
        print(f"pipeline_1f1b: largest relative difference from the unpipelined run: {worst:.3g}", flush=True)
    run.finish()
    if args.check and worst > args.rtol:
        sys.exit(f"pipeline_1f1b.py: the pipelined loss differs from the unpipelined run by {worst:.3g} > {args.rtol}")


if __name__ == "__main__":
    main()
