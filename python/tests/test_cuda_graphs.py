"""CUDA graphs over "dfccl" (pytest --device cuda; skipped on CPU). The ranks make their groups with DFCCL_GRAPHS=1
(dfccl.h, "CUDA graphs"): each op called while a stream captures records its collectives into the graph, and every
replay runs them anew. A training step of a small model (forward, backward, gradient all-reduce, SGD step) captured
with torch.cuda.graph and replayed 50 times gives the eager run's losses; two process groups whose all-reduces,
all_gather_into_tensor, reduce_scatter_tensor and send/recv are captured in opposite orders on the two ranks replay
exact; a torch.compile(mode="reduce-overhead") function with an all-reduce runs as a CUDA graph, exact; an op
waited for on its stream and dropped frees its tensors at once."""
import pytest
import torch
import torch.distributed as dist

from devices import device, on_cuda

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and on_cuda()), reason="needs --device cuda (a GPU)")


@pytest.fixture
def graphs(monkeypatch):
    monkeypatch.setenv("DFCCL_GRAPHS", "1")  # inherited by the ranks, before their groups exist


def model_and_batches(rank, steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device())
    gen = torch.Generator().manual_seed(100 + rank)
    data = [(torch.randn(16, 32, generator=gen), torch.randn(16, 1, generator=gen)) for _ in range(steps)]
    return model, [(x.to(device()), y.to(device())) for x, y in data]


def train_step(model, opt, x, y, world):
    """One step: forward, backward, the gradients all-reduced (averaged), SGD. Returns the loss tensor."""
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad.div_(world)
    opt.step()
    return loss


def training_step_graph(rank, world, warmup, replays):
    steps = warmup + replays
    # The eager run.
    model, data = model_and_batches(rank, steps)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    eager = []
    for x, y in data:
        opt.zero_grad(set_to_none=True)
        eager.append(train_step(model, opt, x, y, world).item())
    # The same steps: `warmup` eagerly on a side stream (torch.cuda.graph's recipe), then one captured and replayed.
    model, data = model_and_batches(rank, steps)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    static_x, static_y = data[0][0].clone(), data[0][1].clone()
    graphed = []
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for x, y in data[:warmup]:
            opt.zero_grad(set_to_none=True)
            graphed.append(train_step(model, opt, x, y, world).item())
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = train_step(model, opt, static_x, static_y, world)
    for x, y in data[warmup:]:
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        graphed.append(static_loss.item())
    return eager, graphed


def test_training_step_replays_match_eager(run_ranks, graphs):
    for eager, graphed in run_ranks(training_step_graph, 2, 3, 50):
        assert len(graphed) == len(eager) == 53
        torch.testing.assert_close(torch.tensor(graphed), torch.tensor(eager), rtol=1e-5, atol=1e-6)


def opposite_groups(rank, world, replays):
    """Rank 0 captures group A's ops before group B's, rank 1 B's before A's; each group's waits after both."""
    n = 4096
    peer = 1 - rank
    pg_a = dist.new_group([0, 1], backend="dfccl")
    pg_b = dist.new_group([0, 1], backend="dfccl")
    dev = device()
    ar_a, ar_b = torch.zeros(n, device=dev), torch.zeros(n, device=dev)
    ag_in, ag_out = torch.zeros(n, device=dev), torch.zeros(world * n, device=dev)
    rs_in, rs_out = torch.zeros(world * n, device=dev), torch.zeros(n, device=dev)
    send, recv = torch.zeros(n, device=dev), torch.zeros(n, device=dev)
    torch.cuda.synchronize()

    def ops_a():
        return [dist.all_reduce(ar_a, group=pg_a, async_op=True),
                dist.reduce_scatter_tensor(rs_out, rs_in, group=pg_a, async_op=True),
                dist.isend(send, peer, group=pg_a), dist.irecv(recv, peer, group=pg_a)]

    def ops_b():
        return [dist.all_reduce(ar_b, group=pg_b, async_op=True),
                dist.all_gather_into_tensor(ag_out, ag_in, group=pg_b, async_op=True)]

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        works = ops_a() + ops_b() if rank == 0 else ops_b() + ops_a()
        for w in works:
            w.wait()
    base = torch.arange(n, device=dev, dtype=torch.float32)
    wrong = []
    for k in range(replays):
        def value(r, which):  # rank r's input of replay k for op `which`: small integers, exact in float32
            return base % 97 + 1000 * r + 10 * k + which
        ar_a.copy_(value(rank, 0))
        ar_b.copy_(value(rank, 1))
        ag_in.copy_(value(rank, 2))
        rs_in.copy_(torch.cat([value(rank, 3) + q for q in range(world)]))
        send.copy_(value(rank, 4))
        g.replay()
        torch.cuda.synchronize()
        checks = {
            "all_reduce A": (ar_a, value(0, 0) + value(1, 0)),
            "all_reduce B": (ar_b, value(0, 1) + value(1, 1)),
            "all_gather_into_tensor": (ag_out, torch.cat([value(0, 2), value(1, 2)])),
            "reduce_scatter_tensor": (rs_out, value(0, 3) + value(1, 3) + 2 * rank),
            "recv": (recv, value(peer, 4)),
        }
        wrong += [f"replay {k}: {name}" for name, (got, want) in checks.items() if not torch.equal(got, want)]
    return wrong


def test_two_groups_opposite_orders_in_graphs(run_ranks, graphs):
    assert run_ranks(opposite_groups, 2, 50) == [[], []]


def compiled_all_reduce(rank, world, calls):
    import torch._dynamo.utils as dynamo_utils
    import torch.distributed._functional_collectives as funcol

    @torch.compile(mode="reduce-overhead")
    def step(x):
        return funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1

    wrong = []
    for k in range(calls):
        x = torch.full((1024,), float(rank + k), device=device())
        got = step(x).clone()
        want = torch.full((1024,), float(sum(2 * (r + k) for r in range(world)) + 1), device=device())
        if not torch.equal(got, want):
            wrong.append(f"call {k}")
    skips = dict(dynamo_utils.counters["inductor"]).get("cudagraph_skips", 0)
    return wrong, skips


def test_compile_reduce_overhead_all_reduce(run_ranks, graphs):
    for wrong, skips in run_ranks(compiled_all_reduce, 2, 8):
        assert wrong == []
        assert skips == 0, "torch.compile did not run the function as a CUDA graph"


def waited_then_dropped(rank, world):
    """An all-reduce waited for on the stream (work.wait()) and dropped: its tensor's memory is free at once, not when
    the backend later sees the op complete (torch.compile's CUDA-graph trees check this after their warm-up run).
    Rank 0 drops its op before the op can complete (its peer is still away); rank 1's op completes while it drops it.
    A work waited for on the stream and kept still reports its completion, also to a later wait with a timeout."""
    import datetime
    import time

    dist.all_reduce(torch.ones(1, device=device()))  # whatever the first op allocates for good
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    if rank == 1:
        time.sleep(1.0)  # rank 0 waits and drops its op before the op can complete
    t = torch.full((1 << 20,), float(rank + 1), device=device())
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    held = torch.cuda.memory_allocated() - before
    del work, t
    left = torch.cuda.memory_allocated() - before
    kept = dist.all_reduce(torch.ones(8, device=device()), async_op=True)
    kept.wait()
    torch.cuda.synchronize()
    deadline = time.monotonic() + 10.0
    while not kept.is_completed() and time.monotonic() < deadline:
        time.sleep(0.001)
    # A second wait with a timeout waits on the host, for an op the backend no longer holds the work of.
    waited_again = kept.wait(timeout=datetime.timedelta(seconds=10))
    return rank, held, left, kept.is_completed() and waited_again


def test_a_waited_work_frees_its_tensors_when_dropped(run_ranks):
    for rank, held, left, kept_completed in run_ranks(waited_then_dropped, 2):
        assert held >= 4 << 20
        assert left == 0, f"rank {rank}: {left} bytes of the dropped op still allocated"
        assert kept_completed, f"rank {rank}: a work waited for on the stream did not report its completion"
