"""Real models on CUDA tensors (pytest --device cuda; skipped on CPU): DDP of torchvision's resnet18 on random data
over "dfccl" follows Gloo's loss curve to 1e-4 over 20 steps, and FSDP2 (fully_shard) of a small transformer over
"dfccl" follows a one-process run of the same model on the ranks' batches together."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from devices import device, on_cuda

pytestmark = pytest.mark.skipif(not (on_cuda() and torch.cuda.is_available()), reason="needs --device cuda (a GPU)")


def deterministic():
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)


def resnet_train(rank, world, steps):
    import torchvision

    deterministic()
    torch.manual_seed(0)
    dev = device()
    model = torchvision.models.resnet18(num_classes=10).to(dev)
    ddp = DDP(model, device_ids=[dev.index])  # buffers broadcast every step, gradients in buckets
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 3, 64, 64, generator=gen).to(dev)
        y = torch.randint(0, 10, (8,), generator=gen).to(dev)
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_ddp_resnet18_matches_gloo(run_ranks):
    pytest.importorskip("torchvision")
    steps = 20
    ref = run_ranks(resnet_train, 2, steps, backend="gloo", timeout=600)
    got = run_ranks(resnet_train, 2, steps, backend="dfccl", timeout=600)
    for rank in range(2):
        torch.testing.assert_close(torch.tensor(got[rank]), torch.tensor(ref[rank]), rtol=1e-4, atol=1e-5)


def small_transformer():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
    return torch.nn.Sequential(torch.nn.TransformerEncoder(layer, num_layers=2), torch.nn.Linear(64, 8))


def batches(rank, steps):
    gen = torch.Generator().manual_seed(200 + rank)
    return [(torch.randn(4, 16, 64, generator=gen), torch.randn(4, 16, 8, generator=gen)) for _ in range(steps)]


def fsdp_train(rank, world, steps):
    from torch.distributed.fsdp import fully_shard

    deterministic()
    dev = device()
    model = small_transformer().to(dev)
    for block in model[0].layers:
        fully_shard(block)
    fully_shard(model)  # parameters sharded over the ranks: all-gathers forward, reduce-scatters backward
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for x, y in batches(rank, steps):
        opt.zero_grad()
        loss = F.mse_loss(model(x.to(dev)), y.to(dev))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_fsdp2_matches_one_process(run_ranks):
    steps, world = 10, 2
    got = run_ranks(fsdp_train, world, steps, timeout=600)
    # One process, the ranks' batches together: the mean loss over equal batches has the ranks' mean gradient.
    deterministic()
    dev = device()
    model = small_transformer().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    per_rank = [batches(r, steps) for r in range(world)]
    for step in range(steps):
        opt.zero_grad()
        losses = [F.mse_loss(model(per_rank[r][step][0].to(dev)), per_rank[r][step][1].to(dev)) for r in range(world)]
        total = sum(losses) / world
        total.backward()
        opt.step()
        for r in range(world):
            assert abs(got[r][step] - losses[r].item()) <= 1e-4 * abs(losses[r].item()) + 1e-6, (
                f"step {step} rank {r}: FSDP2 over dfccl {got[r][step]} vs one process {losses[r].item()}")
