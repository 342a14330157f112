"""Point-to-point and all-to-all: send/recv of every dtype, isend/irecv exchanges, batch_isend_irecv, all_to_all
with equal and unequal splits; exact, on 2 and 4 ranks (pytest --device cuda: on CUDA tensors)."""
import pytest
import torch
import torch.distributed as dist
from devices import device
from test_ops import DTYPES, data

P2P_DTYPES = DTYPES + [torch.int16, torch.complex64]


def payload(rank, dtype, n=37, salt=0):
    """Rank r's data in any dtype (complex: built from two real parts)."""
    if dtype == torch.complex64:
        return torch.complex(data(rank, torch.float32, n, salt), data(rank, torch.float32, n, salt + 1))
    if dtype == torch.int16:
        return data(rank, torch.int32, n, salt).to(torch.int16)
    return data(rank, dtype, n, salt)


def same(got, want):
    return got.dtype == want.dtype and torch.equal(got.cpu(), want.cpu())


def ring(rank, world):
    """Every dtype around the ring, twice: isend/irecv with the waits last, then blocking send/recv ordered so that
    no rank waits in a cycle (even ranks send first)."""
    fails = []
    dev, right, left = device(), (rank + 1) % world, (rank - 1) % world
    for i, dtype in enumerate(P2P_DTYPES):
        got = torch.empty(37 + i, dtype=dtype, device=dev)
        works = [dist.isend(payload(rank, dtype, 37 + i).to(dev), right), dist.irecv(got, left)]
        for w in works:
            w.wait()
        if not same(got, payload(left, dtype, 37 + i)):
            fails.append(f"isend/irecv {dtype}: {got.tolist()[:6]}")
        got2 = torch.empty(5, 3, dtype=dtype, device=dev)
        mine = payload(rank, dtype, 15, salt=1).reshape(5, 3).to(dev)
        if rank % 2 == 0:
            dist.send(mine, right)
            dist.recv(got2, left)
        else:
            dist.recv(got2, left)
            dist.send(mine, right)
        if not same(got2, payload(left, dtype, 15, salt=1).reshape(5, 3)):
            fails.append(f"send/recv {dtype}: {got2.tolist()[:2]}")
    return fails


@pytest.mark.parametrize("world", [2, 4])
def test_ring_every_dtype(run_ranks, world):
    for rank, fails in enumerate(run_ranks(ring, world)):
        assert not fails, f"rank {rank}: {fails}"


def exchange(rank, world, trials):
    """Both ranks isend to the other, then irecv from it, then wait: every trial completes, exact."""
    dev, other = device(), 1 - rank
    for trial in range(trials):
        out = torch.full((1000,), float(rank * 1000 + trial), device=dev)
        got = torch.empty(1000, device=dev)
        works = [dist.isend(out, other), dist.irecv(got, other)]
        for w in works:
            w.wait()
        assert torch.equal(got.cpu(), torch.full((1000,), float(other * 1000 + trial))), (trial, got[:3])
    return trials


def test_isend_irecv_exchange_100(run_ranks):
    assert run_ranks(exchange, 2, 100, timeout=120) == [100, 100]


def batched(rank, world):
    """batch_isend_irecv (as pipelining issues it): a send right and a receive from the left, in both list orders."""
    dev, right, left = device(), (rank + 1) % world, (rank - 1) % world
    for step in range(4):
        got = torch.empty(64, dtype=torch.float64, device=dev)
        mine = torch.arange(64, dtype=torch.float64, device=dev) + 100 * rank + step
        ops = [dist.P2POp(dist.isend, mine, right), dist.P2POp(dist.irecv, got, left)]
        if (rank + step) % 2:
            ops.reverse()
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        assert torch.equal(got.cpu(), torch.arange(64, dtype=torch.float64) + 100 * left + step), (step, got[:3])
    return True


@pytest.mark.parametrize("world", [2, 4])
def test_batch_isend_irecv(run_ranks, world):
    assert all(run_ranks(batched, world))


def p2p_beside_collectives(rank, world):
    """Point-to-point order is independent of the collectives: rank 0 sends, then all-reduces; rank 1 all-reduces,
    then receives, each op async with the waits last."""
    dev = device()
    t = torch.full((8,), float(rank + 1), device=dev)
    buf = torch.full((16,), 7.0, device=dev) if rank == 0 else torch.empty(16, device=dev)
    if rank == 0:
        works = [dist.isend(buf, 1), dist.all_reduce(t, async_op=True)]
    else:
        works = [dist.all_reduce(t, async_op=True), dist.irecv(buf, 0)]
    for w in works:
        w.wait()
    return torch.equal(t.cpu(), torch.full((8,), 3.0)) and torch.equal(buf.cpu(), torch.full((16,), 7.0))


def test_p2p_beside_collectives(run_ranks):
    assert run_ranks(p2p_beside_collectives, 2) == [True, True]


def unequal_splits(world):
    """splits[src][dst]: rows rank src sends to rank dst (some zero)."""
    return [[(src * 3 + dst * 2) % 4 for dst in range(world)] for src in range(world)]


def rows_from(src, dst, dtype, world):
    """The rows rank src sends to rank dst: 3 columns, values naming both."""
    n = unequal_splits(world)[src][dst]
    return payload(src, dtype, n * 3, salt=dst).reshape(n, 3)


def all_to_all(rank, world):
    fails = []
    dev = device()
    for dtype in P2P_DTYPES:
        # Equal splits: 2 rows of 3 per peer (dfcclAllToAll).
        inp = torch.cat([payload(rank, dtype, 6, salt=p).reshape(2, 3) for p in range(world)]).to(dev)
        out = torch.empty(2 * world, 3, dtype=dtype, device=dev)
        dist.all_to_all_single(out, inp)
        want = torch.cat([payload(p, dtype, 6, salt=rank).reshape(2, 3) for p in range(world)])
        if not same(out, want):
            fails.append(f"all_to_all_single equal {dtype}")
        # Unequal splits (dfcclAllToAllv), async.
        ins = [rows_from(rank, p, dtype, world) for p in range(world)]
        wants = [rows_from(p, rank, dtype, world) for p in range(world)]
        out = torch.empty(sum(w.shape[0] for w in wants), 3, dtype=dtype, device=dev)
        work = dist.all_to_all_single(out, torch.cat(ins).to(dev), [w.shape[0] for w in wants],
                                      [i.shape[0] for i in ins], async_op=True)
        work.wait()
        if not same(out, torch.cat(wants)):
            fails.append(f"all_to_all_single unequal {dtype}")
        # The list form, unequal sizes.
        outs = [torch.empty_like(w, device=dev) for w in wants]
        dist.all_to_all(outs, [i.to(dev) for i in ins])
        for p in range(world):
            if not same(outs[p], wants[p]):
                fails.append(f"all_to_all list {dtype} from {p}")
    # Everything goes to the last rank: the others receive nothing (empty outputs).
    last = world - 1
    inp = torch.full((3 * world, 2), float(rank), device=dev)
    out = torch.empty((3 * world * world if rank == last else 0, 2), device=dev)
    dist.all_to_all_single(out, inp, [3 * world if rank == last else 0] * world,
                           [3 * world if p == last else 0 for p in range(world)])
    want = torch.cat([torch.full((3 * world, 2), float(p)) for p in range(world)]) if rank == last else out.cpu()
    if not torch.equal(out.cpu(), want):
        fails.append("all_to_all_single to the last rank only")
    return fails


@pytest.mark.parametrize("world", [2, 4])
def test_all_to_all(run_ranks, world):
    for rank, fails in enumerate(run_ranks(all_to_all, world)):
        assert not fails, f"rank {rank}: {fails}"


def refused(rank, world):
    """What raises: a receive from any source; a peer outside the group; splits that do not add up."""
    msgs = []
    dev = device()
    for fn in (lambda: dist.recv(torch.empty(4, device=dev)),
               lambda: dist.distributed_c10d._get_default_group().send([torch.ones(4, device=dev)], world, 0),
               lambda: dist.all_to_all_single(torch.empty(4, device=dev), torch.ones(4, device=dev), [1] * world,
                                              [3] * world)):
        try:
            fn()
            msgs.append("no error")
        except (dist.DistBackendError, RuntimeError, ValueError) as e:
            msgs.append(f"{type(e).__name__}: {e}")
    dist.barrier()
    return msgs


def test_refused(run_ranks):
    for msgs in run_ranks(refused, 2):
        assert msgs[0].startswith("DistBackendError") and "recvAnysource" in msgs[0], msgs[0]
        assert "peer rank 2 is not in the group" in msgs[1], msgs[1]
        assert "split sizes add up" in msgs[2], msgs[2]


def stuck_recv(rank, world, log_dir):
    """A receive whose sender comes after the group's 1.5 s timeout: the watchdog names the receive and its peer."""
    import datetime
    import os
    import time

    from test_errors import stderr_to
    g = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=1.5))
    buf = torch.full((10,), float(rank), device=device())
    if rank == 1:
        time.sleep(3)
        dist.send(buf, 0, group=g)
        return True
    log = os.path.join(log_dir, "rank0.stderr")
    with stderr_to(log):
        work = dist.irecv(buf, 1, group=g)
        time.sleep(2.2)
        work.wait(timeout=datetime.timedelta(seconds=30))
    assert torch.equal(buf.cpu(), torch.full((10,), 1.0)), buf
    with open(log) as f:
        return f.read()


def test_watchdog_names_recv_peer(run_ranks, tmp_path):
    log, _ = run_ranks(stuck_recv, 2, str(tmp_path))
    lines = [line for line in log.splitlines() if line.startswith("dfccl watchdog:")]
    assert lines and "op recv" in lines[0] and "recv #0 from rank 1 (global 1): ranks that never arrived: 1 (global 1)" \
        in lines[0], log
