"""DDP of a small MLP over "dfccl" follows Gloo's loss curve."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(rank, world, steps):
    torch.manual_seed(0)  # same initial model everywhere; DDP broadcasts rank 0's anyway
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    if rank == 1:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)  # DDP's initial broadcast must undo this
    ddp = DDP(model, bucket_cap_mb=0.001)  # several buckets, so several all-reduces in flight
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 16, generator=gen)
        y = torch.randn(8, 4, generator=gen)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    checksum = sum(p.double().sum().item() for p in model.parameters())
    return losses, checksum


def test_ddp_matches_gloo(run_ranks):
    steps = 30
    ref = run_ranks(train, 2, steps, backend="gloo")
    got = run_ranks(train, 2, steps, backend="dfccl")
    for rank in range(2):
        torch.testing.assert_close(torch.tensor(got[rank][0]), torch.tensor(ref[rank][0]), rtol=1e-5, atol=0)
    assert got[0][1] == got[1][1], "parameters differ across ranks"
    assert abs(got[0][1] - ref[0][1]) <= 1e-5 * abs(ref[0][1])
