"""Small all_reduces back to back (a workload: the latency a training step's many small collectives pay).

    torchrun --nproc-per-node 8 workloads/pytorch/small_allreduce.py --device cpu --steps 20
    torchrun --nproc-per-node 8 workloads/pytorch/small_allreduce.py --device cpu --steps 20 --backend gloo

Each step runs --per-step all_reduces of --count float32 elements over the world group, each waited for before the
next (the pattern of tensor-parallel layers), and checks every result; the step time divided by --per-step is the
latency of one. More ranks than cores is the case this measures on CPU: each rank's waits must leave the cores to
the ranks that have work. The "loss" of a step is the number of wrong elements (0 when every result is exact).
"""
import torch
import torch.distributed as dist

import torch_results as tr


def options(ap):
    ap.add_argument("--count", type=int, default=256, help="float32 elements per all_reduce")
    ap.add_argument("--per-step", type=int, default=50, help="all_reduces per step, each waited for")


def main():
    args = tr.parse(__doc__.splitlines()[0], options)
    device = tr.init(args)
    world, rank = dist.get_world_size(), dist.get_rank()
    run = tr.Run(args, "small_allreduce", f"{args.per_step} all_reduces of {args.count} float32 elements per step",
                 device, samples_per_step=args.per_step, sample_unit="all_reduces")
    run.extra = {"count": args.count, "per_step": args.per_step}
    want = float(sum(range(world)))
    t = torch.empty(args.count, device=device)
    for _ in run.steps():
        with run.step() as s:
            wrong = torch.zeros((), dtype=torch.int64, device=device)
            for _ in range(args.per_step):
                t.fill_(float(rank))
                dist.all_reduce(t)
                wrong += (t != want).sum()
            s.wrong = int(wrong.item())
            s.loss = float(s.wrong)
    summ = run.finish()
    if rank == 0:
        print(f"small_allreduce: {summ['step_time_median_s'] / args.per_step * 1e6:.1f} us per all_reduce "
              f"(median step / {args.per_step}), {world} ranks, {args.backend}", flush=True)


if __name__ == "__main__":
    main()
