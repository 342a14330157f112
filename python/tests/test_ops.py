"""Every op x dtype x reduction on CPU tensors, exact against a torch reference, on 2 and 4 ranks."""
import datetime

import pytest
import torch
import torch.distributed as dist

DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
          torch.float64, torch.bool]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}
N = 37  # odd: no chunk divides it


def data(rank, dtype, n=N, salt=0):
    """Rank r's input: small integers, so that every reduction is exact in every dtype."""
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return ((i + rank + salt) % 2 == 0)
    return ((i * 7 + rank * 5 + salt) % 3 + 1).to(dtype)


def reference(world, dtype, name, n=N, salt=0):
    """What the reduction of data(0..world-1) is, computed in int64/float64 (not for bool: bool_reference)."""
    xs = torch.stack([data(r, dtype, n, salt) for r in range(world)])
    wide = xs.to(torch.float64 if dtype.is_floating_point else torch.int64)
    if name == "SUM":
        out = wide.sum(0)
    elif name == "PRODUCT":
        out = wide.prod(0)
    elif name == "MIN":
        out = wide.min(0).values
    elif name == "MAX":
        out = wide.max(0).values
    elif name == "AVG":
        out = wide.sum(0) / world if dtype.is_floating_point else torch.div(wide.sum(0), world, rounding_mode="trunc")
    return out.to(dtype)


def bool_reference(world, name, n=N):
    xs = torch.stack([data(r, torch.bool, n) for r in range(world)])
    return xs.any(0) if name in ("SUM", "MAX") else xs.all(0)


def expect(fails, what, got, want):
    if got.dtype != want.dtype or not torch.equal(got, want):
        fails.append(f"{what}: got {got.tolist()[:8]}..., want {want.tolist()[:8]}...")


def expect_raises(fails, what, fn, words):
    try:
        fn()
    except dist.DistBackendError as e:
        missing = [w for w in words if w not in str(e)]
        if missing:
            fails.append(f"{what}: DistBackendError without {missing}: {e}")
        return
    except Exception as e:  # noqa: BLE001
        fails.append(f"{what}: raised {type(e).__name__} instead of DistBackendError: {e}")
        return
    fails.append(f"{what}: did not raise")


def want_of(world, dtype, name):
    return bool_reference(world, name) if dtype == torch.bool else reference(world, dtype, name)


def check_allreduce(rank, world, fails):
    for dtype in DTYPES:
        for name, op in OPS.items():
            what = f"all_reduce {dtype} {name}"
            t = data(rank, dtype)
            if dtype == torch.bool and name == "AVG":
                expect_raises(fails, what, lambda: dist.all_reduce(t, op=op), ["AVG", "bool", "allreduce"])
                continue
            work = dist.all_reduce(t, op=op, async_op=(name == "SUM"))
            if work is not None:
                work.wait()
            expect(fails, what, t, want_of(world, dtype, name))
        if dtype.is_floating_point:
            t = data(rank, dtype)
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
            expect(fails, f"all_reduce {dtype} PREMUL_SUM", t, (reference(world, dtype, "SUM").double() * 0.5).to(dtype))


def check_reduce(rank, world, fails):
    root = world - 1
    for dtype in DTYPES:
        for name, op in OPS.items():
            if dtype == torch.bool and name == "AVG":
                continue
            t = data(rank, dtype)
            dist.reduce(t, dst=root, op=op)
            if rank == root:
                expect(fails, f"reduce {dtype} {name}", t, want_of(world, dtype, name))


def check_broadcast_allgather(rank, world, fails):
    for dtype in DTYPES + [torch.int16, torch.complex64]:
        t = data(rank, dtype if dtype != torch.complex64 else torch.float32).to(dtype)
        dist.broadcast(t, src=1)
        expect(fails, f"broadcast {dtype}", t, data(1, dtype if dtype != torch.complex64 else torch.float32).to(dtype))
        outs = [torch.empty(N, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, data(rank, dtype if dtype != torch.complex64 else torch.float32).to(dtype))
        for r in range(world):
            expect(fails, f"all_gather {dtype} part {r}", outs[r],
                   data(r, dtype if dtype != torch.complex64 else torch.float32).to(dtype))
        if dtype == torch.complex64:
            continue
        flat = torch.empty(N * world, dtype=dtype)
        dist.all_gather_into_tensor(flat, data(rank, dtype))
        expect(fails, f"all_gather_into_tensor {dtype}", flat, torch.cat([data(r, dtype) for r in range(world)]))


def check_coalesced(rank, world, fails):
    pg = dist.distributed_c10d._get_default_group()
    ins = [data(rank, torch.float32, 5), data(rank, torch.int64, 11)]
    outs = [torch.empty(5 * world), torch.empty(11 * world, dtype=torch.int64)]
    pg.allgather_into_tensor_coalesced(outs, ins).wait()
    for i, n in enumerate((5, 11)):
        expect(fails, f"allgather_into_tensor_coalesced {i}", outs[i],
               torch.cat([data(r, ins[i].dtype, n) for r in range(world)]))
    ins = [data(rank, torch.float32, 5 * world), data(rank, torch.int32, 3 * world)]
    outs = [torch.empty(5), torch.empty(3, dtype=torch.int32)]
    pg.reduce_scatter_tensor_coalesced(outs, ins).wait()
    for i, n in enumerate((5, 3)):
        want = reference(world, ins[i].dtype, "SUM", n * world)[rank * n:(rank + 1) * n]
        expect(fails, f"reduce_scatter_tensor_coalesced {i}", outs[i], want)


def check_reduce_scatter(rank, world, fails):
    for dtype in DTYPES:
        for name, op in OPS.items():
            if dtype == torch.bool and name == "AVG":
                continue
            n = 5
            inp = data(rank, dtype, n * world)
            xs = torch.stack([data(r, dtype, n * world) for r in range(world)])
            if dtype == torch.bool:
                want_all = xs.any(0) if name in ("SUM", "MAX") else xs.all(0)
            else:
                want_all = reference(world, dtype, name, n * world)
            want = want_all[rank * n:(rank + 1) * n]
            out = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(out, inp, op=op)
            expect(fails, f"reduce_scatter_tensor {dtype} {name}", out, want)
            out2 = torch.empty(n, dtype=dtype)
            dist.reduce_scatter(out2, list(inp.chunk(world)), op=op)
            expect(fails, f"reduce_scatter {dtype} {name}", out2, want)


def check_gather_scatter(rank, world, fails):
    for dtype in (torch.float32, torch.int64, torch.bool, torch.bfloat16):
        for root in (0, world - 1):
            outs = [torch.empty(N, dtype=dtype) for _ in range(world)] if rank == root else None
            dist.gather(data(rank, dtype), outs, dst=root)
            if rank == root:
                for r in range(world):
                    expect(fails, f"gather {dtype} root {root} part {r}", outs[r], data(r, dtype))
            out = torch.empty(N, dtype=dtype)
            ins = [data(r, dtype, salt=root) for r in range(world)] if rank == root else None
            work = dist.scatter(out, ins, src=root, async_op=True)
            work.wait()
            expect(fails, f"scatter {dtype} root {root}", out, data(rank, dtype, salt=root))
    objs = [None] * world if rank == 0 else None
    dist.gather_object({"rank": rank}, objs, dst=0)
    if rank == 0 and objs != [{"rank": r} for r in range(world)]:
        fails.append(f"gather_object: {objs}")
    got = [None]
    dist.scatter_object_list(got, [f"to {r}" for r in range(world)] if rank == 1 else None, src=1)
    if got != [f"to {rank}"]:
        fails.append(f"scatter_object_list: {got}")


def check_other_backend_ops(rank, world, fails):
    pg = dist.distributed_c10d._get_default_group()
    be = pg._get_backend(torch.device("cpu"))
    # allgather_coalesced (the list form)
    ins = [data(rank, torch.float32, 5), data(rank, torch.int32, 3)]
    outs = [[torch.empty(5) for _ in range(world)], [torch.empty(3, dtype=torch.int32) for _ in range(world)]]
    pg.allgather_coalesced(outs, ins).wait()
    for i, n in enumerate((5, 3)):
        for r in range(world):
            expect(fails, f"allgather_coalesced {i} part {r}", outs[i][r], data(r, ins[i].dtype, n))
    # sparse all-reduce (densified)
    idx = torch.tensor([[rank % 3, 4]])
    sp = torch.sparse_coo_tensor(idx, torch.tensor([1.0 + rank, 2.0]), (6,), check_invariants=True)
    dist.all_reduce(sp)
    want = torch.zeros(6)
    for r in range(world):
        want[r % 3] += 1.0 + r
    want[4] += 2.0 * world
    if not sp.is_sparse or not torch.equal(sp.to_dense(), want):
        fails.append(f"all_reduce sparse: {sp}")
    # a coalesced block (torch's _coalescing_manager with a device): one work for every op of the block
    a, b = data(rank, torch.float32), data(rank, torch.int64, 9)
    with dist.distributed_c10d._coalescing_manager(pg, torch.device("cpu"), async_ops=True) as cm:
        dist.broadcast(a, src=0)
        dist.broadcast(b, src=1)
    cm.wait()
    expect(fails, "coalesced broadcast 0", a, data(0, torch.float32))
    expect(fails, "coalesced broadcast 1", b, data(1, torch.int64, 9))
    # monitored barrier (the backend's: torch 2.11's dist.monitored_barrier accepts Gloo only)
    be.monitored_barrier(datetime.timedelta(seconds=30))
    # what the backend tells about itself
    if be._get_sequence_number_for_group() <= 0:
        fails.append("sequence number: 0 after the ops above")
    counts = be.op_counts()
    for op in ("gather", "scatter", "allgather_coalesced", "allreduce", "broadcast", "barrier"):
        if counts.get(op, 0) < 1:
            fails.append(f"op_counts has no {op}: {counts}")


def check_errors(rank, world, fails):
    if rank != 0:  # raised before anything is submitted: the root does not take part
        pg = dist.distributed_c10d._get_default_group()
        expect_raises(fails, "gather list on a non-root",
                      lambda: pg.gather([[torch.empty(4) for _ in range(world)]], [torch.ones(4)]),
                      ["gather", "not the root"])
    expect_raises(fails, "all_reduce int16", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)),
                  ["allreduce", "Short", "group '0'"])
    expect_raises(fails, "all_reduce BAND", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                                                     op=dist.ReduceOp.BAND), ["BAND"])
    expect_raises(fails, "non-contiguous", lambda: dist.all_reduce(torch.ones(4, 4).t()), ["contiguous"])


def all_ops(rank, world):
    fails = []
    for check in (check_allreduce, check_reduce, check_broadcast_allgather, check_coalesced, check_reduce_scatter,
                  check_gather_scatter, check_other_backend_ops, check_errors):
        check(rank, world, fails)
    dist.barrier()
    return fails


@pytest.mark.parametrize("world", [2, 4])
def test_all_ops_exact(run_ranks, world):
    for rank, fails in enumerate(run_ranks(all_ops, world)):
        assert not fails, f"rank {rank}:\n" + "\n".join(fails)
