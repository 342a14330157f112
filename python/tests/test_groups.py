"""Subgroups (new_group) and two or three groups driven in rank-divergent orders with async ops."""
import random

import torch
import torch.distributed as dist


def subgroups(rank, world):
    fails = []
    evens, odds = dist.new_group([0, 2]), dist.new_group([1, 3])
    tail = dist.new_group([3, 2, 1])  # c10d sorts the ranks
    alone = dist.new_group([0])
    mine = evens if rank % 2 == 0 else odds
    members = [0, 2] if rank % 2 == 0 else [1, 3]
    t = torch.full((9,), float(rank + 1))
    dist.all_reduce(t, group=mine)
    if not torch.equal(t, torch.full((9,), float(sum(r + 1 for r in members)))):
        fails.append(f"all_reduce in {members}: {t.tolist()}")
    b = torch.full((3,), rank, dtype=torch.int64)
    dist.broadcast(b, src=members[1], group=mine)  # src is a global rank
    if not torch.equal(b, torch.full((3,), members[1], dtype=torch.int64)):
        fails.append(f"broadcast in {members}: {b.tolist()}")
    if rank in (1, 2, 3):
        outs = [torch.empty(2, dtype=torch.int32) for _ in range(3)]
        dist.all_gather(outs, torch.full((2,), rank, dtype=torch.int32), group=tail)
        if [o[0].item() for o in outs] != [1, 2, 3]:
            fails.append(f"all_gather in [1,2,3]: {[o.tolist() for o in outs]}")
        if dist.get_group_rank(tail, rank) != rank - 1:
            fails.append("group rank of tail")
    if rank == 0:
        one = torch.full((4,), 5.0)
        dist.all_reduce(one, group=alone)
        if not torch.equal(one, torch.full((4,), 5.0)):
            fails.append(f"all_reduce in [0]: {one.tolist()}")
    dist.barrier()
    return fails


def test_subgroups(run_ranks):
    for rank, fails in enumerate(run_ranks(subgroups, 4)):
        assert not fails, f"rank {rank}: {fails}"


def opposite_orders(rank, world, trials):
    """Rank 0 submits on A then B, rank 1 on B then A, every op async; waits come after both submissions."""
    a, b = dist.new_group([0, 1]), dist.new_group([0, 1])
    done = 0
    for trial in range(trials):
        ta = torch.full((1000,), float(rank + trial))
        tb = torch.full((1000,), float(10 * rank + trial), dtype=torch.float64)
        order = [(a, ta), (b, tb)] if rank == 0 else [(b, tb), (a, ta)]
        works = [dist.all_reduce(t, group=g, async_op=True) for g, t in order]
        for w in works:
            w.wait()
        assert torch.equal(ta, torch.full((1000,), float(1 + 2 * trial))), (trial, ta[:3])
        assert torch.equal(tb, torch.full((1000,), float(10 + 2 * trial), dtype=torch.float64)), (trial, tb[:3])
        done += 1
    return done


def test_two_groups_opposite_orders(run_ranks):
    trials = 100
    assert run_ranks(opposite_orders, 2, trials, timeout=120) == [trials, trials]


def random_orders(rank, world, trials):
    """Three groups over all ranks; every rank submits one all_reduce per group per trial in its own random order."""
    groups = [dist.new_group(list(range(world))) for _ in range(3)]
    rng = random.Random(1000 + rank)
    for trial in range(trials):
        ts = [torch.full((257,), float(rank * (g + 1) + trial)) for g in range(3)]
        order = list(range(3))
        rng.shuffle(order)
        works = [dist.all_reduce(ts[g], group=groups[g], async_op=True) for g in order]
        for w in works:
            w.wait()
        for g in range(3):
            want = float(sum(r * (g + 1) + trial for r in range(world)))
            assert torch.equal(ts[g], torch.full((257,), want)), (trial, g, ts[g][:3])
    return trials


def test_three_groups_random_orders(run_ranks):
    assert run_ranks(random_orders, 4, 30, timeout=180) == [30] * 4


def local_groups(rank, world):
    """new_group(use_local_synchronization=True): only the members call it, the other ranks never do (here: they
    are busy in a collective of their own group). A communicator split would need every parent rank; fresh
    communicators need only the members."""
    if rank < 2:
        g = dist.new_group([0, 1], use_local_synchronization=True)
    else:
        g = dist.new_group([2, 3], use_local_synchronization=True)
    t = torch.full((5,), float(rank))
    dist.all_reduce(t, group=g)
    want = 1.0 if rank < 2 else 5.0
    mem = g._get_backend(torch.device("cpu")).memory()
    dist.barrier()
    return torch.equal(t, torch.full((5,), want)), mem


def test_local_synchronization_groups(run_ranks):
    for ok, mem in run_ranks(local_groups, 4):
        assert ok
        connection, p2p = mem["cpu"]
        assert connection > 0 and p2p >= 0, mem
