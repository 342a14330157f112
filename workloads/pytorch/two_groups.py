"""Two groups driven in opposite orders (a workload and a demo of what DFCCL removes).

    torchrun --nproc-per-node 2 workloads/pytorch/two_groups.py --device cpu --steps 100
    torchrun --nproc-per-node 2 workloads/pytorch/two_groups.py --device cuda --sync-between --empty-cache

Every step, rank 0 submits an all_reduce on group A, then one on group B; the other ranks submit on B, then on A.
Both are async (async_op=True) and waited for after both submissions, where DFCCL preempts whichever collective's
peers are absent. --sync-between puts a torch.cuda.synchronize() (--empty-cache: torch.cuda.empty_cache()) between
the two submissions: with NCCL the synchronize waits for a kernel that waits for the other rank, which is inside its
own synchronize, and the program hangs. --blocking makes the first call synchronous (async_op=False): that is a
cycle in the program's own order, which no library can break (the process group's timeout ends it).
The "loss" of a step is the number of wrong elements (0 when every result is exact).
"""
import torch
import torch.distributed as dist

import torch_results as tr


def options(ap):
    ap.add_argument("--count", type=int, default=1 << 16, help="elements per all_reduce")
    ap.add_argument("--sync-between", action="store_true", help="torch.cuda.synchronize() between the submissions")
    ap.add_argument("--empty-cache", action="store_true", help="torch.cuda.empty_cache() between the submissions")
    ap.add_argument("--blocking", action="store_true", help="the first call waits at once (a cycle: hangs)")


def between(args, device):
    if device.type == "cuda" and args.sync_between:
        torch.cuda.synchronize(device)
    if device.type == "cuda" and args.empty_cache:
        torch.cuda.empty_cache()


def step(args, device, groups, rank, world, trial):
    ta = torch.full((args.count,), float(rank + trial), device=device)
    tb = torch.full((args.count,), float(2 * rank + trial), device=device, dtype=torch.float64)
    order = [(groups[0], ta), (groups[1], tb)]
    if rank != 0:
        order.reverse()
    works = [dist.all_reduce(order[0][1], group=order[0][0], async_op=not args.blocking)]
    between(args, device)
    works.append(dist.all_reduce(order[1][1], group=order[1][0], async_op=True))
    for w in works:
        if w is not None:
            w.wait()
    ranks = sum(range(world))
    wrong = (ta != float(ranks + world * trial)).sum() + (tb != float(2 * ranks + world * trial)).sum()
    return int(wrong.item())


def main():
    args = tr.parse(__doc__.splitlines()[0], options)
    device = tr.init(args)
    world, rank = dist.get_world_size(), dist.get_rank()
    groups = [dist.new_group(list(range(world))), dist.new_group(list(range(world)))]
    run = tr.Run(args, "two_groups", "two groups' all_reduces submitted in opposite orders by the ranks", device,
                 samples_per_step=1, sample_unit="steps")
    run.extra = {"sync_between": int(args.sync_between), "empty_cache": int(args.empty_cache),
                 "blocking": int(args.blocking)}
    for trial in run.steps():
        with run.step() as s:
            s.wrong = step(args, device, groups, rank, world, trial)
            s.loss = float(s.wrong)
    run.finish()


if __name__ == "__main__":
    main()
