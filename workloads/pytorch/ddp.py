"""DDP training of a small MLP on synthetic data (a workload: step time, loss, throughput and step-time CV to HDF5).

    torchrun --nproc-per-node 2 workloads/pytorch/ddp.py --device cpu --steps 20
    torchrun --nproc-per-node 2 workloads/pytorch/ddp.py --device cuda --backend dfccl --out results/torch/ddp.h5

Every rank draws its own batches from a generator seeded with its rank; the model starts from --seed on every rank
(DDP broadcasts rank 0's anyway). Gradients are all-reduced in buckets (--bucket-mb) while backward runs.
"""
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_results as tr


def options(ap):
    ap.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    ap.add_argument("--width", type=int, default=256, help="hidden width")
    ap.add_argument("--layers", type=int, default=4, help="hidden layers")
    ap.add_argument("--bucket-mb", type=float, default=0.25, help="DDP bucket size, MB (small: several buckets)")
    ap.add_argument("--lr", type=float, default=0.01)


def model(args):
    layers, width = [], 64
    for _ in range(args.layers):
        layers += [torch.nn.Linear(width, args.width), torch.nn.ReLU()]
        width = args.width
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def main():
    args = tr.parse(__doc__.splitlines()[0], options)
    device = tr.init(args)
    torch.manual_seed(args.seed)
    net = DDP(model(args).to(device), bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    run = tr.Run(args, "ddp", "DDP of an MLP on synthetic data", device,
                 samples_per_step=args.batch * torch.distributed.get_world_size())
    gen = torch.Generator(device=device).manual_seed(1000 + run.rank)
    for _ in run.steps():
        x = torch.randn(args.batch, 64, generator=gen, device=device)
        y = torch.randint(0, 10, (args.batch,), generator=gen, device=device)
        with run.step() as s:
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            s.loss = loss.item()
    run.finish()


if __name__ == "__main__":
    main()
