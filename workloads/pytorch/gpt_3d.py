"""3D-parallel training of a small GPT: data x pipeline x tensor parallelism on a DeviceMesh (a workload: step time,
tokens/s, step-time CV, loss and each group's collective counts per step to HDF5).

    torchrun --nproc-per-node 8 workloads/pytorch/gpt_3d.py --device cpu --steps 20 --check
    mpirun -np 8 python workloads/pytorch/gpt_3d.py --device cpu --steps 20 --check
    torchrun --nproc-per-node 8 workloads/pytorch/gpt_3d.py --device cuda --schedule interleaved --disorder
    python workloads/pytorch/gpt_3d.py --reference --steps 20      # the same training in one process

The mesh is (dp, pp, tp) (--dp/--pp/--tp, 2x2x2 by default; global rank = (d * pp + p) * tp + t). Tensor
parallelism: torch.distributed.tensor.parallel with torch's defaults (parallelize_module scatters each weight from
tp rank 0: src_data_rank=0), column-parallel q/k/v and MLP-in, row-parallel attention-out and MLP-out. Pipeline
parallelism: torch.distributed.pipelining, Schedule1F1B with one stage per rank, or ScheduleInterleaved1F1B with two
(--schedule interleaved). Data parallelism: FSDP2 fully_shard over dp (--dp-mode ddp: DistributedDataParallel over
dp, with torch's TP+DDP transform; with tp > 1 it is not exact against one process, on Gloo either). Every rank
builds the whole model from --seed and keeps its stages; the tokens are synthetic (a fixed rule: token t+1 =
(5 t + 3) mod vocab from a random start), the global batch is split over the dp replicas and then into
--microbatches.

--check: global rank 0 then trains the whole model in one process on the same global batches (the --reference
training) and exits 1 when a step's loss differs by more than --rtol (relative). --checkpoint DIR: after the last
step, torch.distributed.checkpoint saves the model and optimizer, the parameters are overwritten, loaded back and
compared with what was saved (exit 1 on a difference).

--disorder (needs --schedule interleaved, where every rank holds a stage whose backward is done before its last
pipeline transfer): each rank moves its data-parallel reduction of that stage (the schedule's REDUCE_GRAD) to just
before its last pipeline transfer (the last stage's gradient send, the first stage's gradient receive) when
dp rank + pp rank is odd, and to just after it when even: on the last stage even dp replicas reduce before the last
send and odd ones after, on the first stage the other way round. On CUDA, torch.cuda.synchronize() and
torch.cuda.empty_cache() follow each reduction's submission. The four ranks of two replicas x two stages then wait in
a cycle if each runs its collectives in submission order (DFCCL_MODE=blocking, or NCCL): DFCCL completes with the
same losses; in blocking mode the ranks hang and the backend's watchdog names the stuck groups, ops and missing ranks.
"""
import copy
import datetime
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_results as tr


def options(ap):
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=64, help="model width (256 or less for CPU runs)")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--seq", type=int, default=32, help="tokens per sequence")
    ap.add_argument("--batch", type=int, default=16, help="sequences per step (global, over all dp replicas)")
    ap.add_argument("--microbatches", type=int, default=4, help="per dp replica")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--schedule", choices=["1f1b", "interleaved"], default="1f1b")
    ap.add_argument("--dp-mode", choices=["fsdp", "ddp"], default="fsdp")
    ap.add_argument("--disorder", action="store_true", help="rank-dependent order of dp reductions and pp transfers")
    ap.add_argument("--reference", action="store_true", help="train the whole model in this one process")
    ap.add_argument("--check", action="store_true", help="exit 1 if a step's loss differs from the reference")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--checkpoint", default="", help="save, overwrite, load and compare with dcp in this folder")


# ---------------------------------------------------------------------------------------------------------------------
# The model


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.head_dim = d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        b, t, _ = x.shape
        # With tensor parallelism q, k and v hold this rank's heads only: the view infers how many.
        q, k, v = (m(x).view(b, t, -1, self.head_dim).transpose(1, 2) for m in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = nn.LayerNorm(d), Attention(d, heads), nn.LayerNorm(d), MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """The whole model, or one pipeline stage of it (prune()): blocks keep their global index as their name, so that
    every parameter has one name on every rank (what torch.distributed.checkpoint needs)."""

    def __init__(self, a):
        super().__init__()
        self.tok, self.pos = nn.Embedding(a.vocab, a.hidden), nn.Embedding(a.seq, a.hidden)
        self.blocks = nn.ModuleDict({str(i): Block(a.hidden, a.heads) for i in range(a.layers)})
        self.norm, self.head = nn.LayerNorm(a.hidden), nn.Linear(a.hidden, a.vocab, bias=False)

    def prune(self, layers, first, last):
        self.blocks = nn.ModuleDict({k: v for k, v in self.blocks.items() if int(k) in layers})
        if not first:
            self.tok = self.pos = None
        if not last:
            self.norm = self.head = None
        return self

    def forward(self, x):
        if self.tok is not None:
            x = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for b in self.blocks.values():
            x = b(x)
        return self.head(self.norm(x)) if self.head is not None else x


def loss_fn(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def batch(a, step, device):
    """The global batch of a step (same on every rank and in the reference): tokens and next-token targets."""
    g = torch.Generator().manual_seed(a.seed * 100003 + step)
    start = torch.randint(0, a.vocab, (a.batch, 1), generator=g)
    seq = [start]
    for _ in range(a.seq):
        seq.append((seq[-1] * 5 + 3) % a.vocab)
    tokens = torch.cat(seq, dim=1)
    return tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device)


def make_optimizer(a, params):
    return torch.optim.SGD(params, lr=a.lr, momentum=0.9)


def reference_losses(a, nsteps):
    """The whole model trained in one process on the same global batches: one loss per step."""
    torch.manual_seed(a.seed)
    model = GPT(a)
    opt = make_optimizer(a, model.parameters())
    losses = []
    for step in range(nsteps):
        x, y = batch(a, step, torch.device("cpu"))
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


# ---------------------------------------------------------------------------------------------------------------------
# The parallel set-up


def tensor_parallel(block, tp_mesh):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    plan = {"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
            "attn.o": RowwiseParallel(), "mlp.fc1": ColwiseParallel(), "mlp.fc2": RowwiseParallel()}
    parallelize_module(block, tp_mesh, plan)  # torch's default src_data_rank=0: weights scattered from tp rank 0


def stage_layers(a, stage, nstages):
    per = a.layers // nstages
    return range(stage * per, (stage + 1) * per)


def build_stages(a, mesh, device, coords):
    """This rank's pipeline stages: (stage index, module) pairs, tensor- and data-parallel."""
    from torch.distributed.fsdp import fully_shard
    d, p, _ = coords
    nstages = a.pp * (2 if a.schedule == "interleaved" else 1)
    torch.manual_seed(a.seed)
    whole = GPT(a)
    stages = []
    for s in range(p, nstages, a.pp):
        part = copy.deepcopy(whole).prune(stage_layers(a, s, nstages), s == 0, s == nstages - 1).to(device)
        if a.tp > 1:
            for blk in part.blocks.values():
                tensor_parallel(blk, mesh["tp"])
        if a.dp > 1 and a.dp_mode == "fsdp":
            for blk in part.blocks.values():
                fully_shard(blk, mesh=mesh["dp"], reshard_after_forward=False)
            fully_shard(part, mesh=mesh["dp"], reshard_after_forward=False)
        elif a.dp > 1:
            from torch.distributed.tensor.parallel.ddp import _pre_dp_module_transform
            if a.tp > 1:
                _pre_dp_module_transform(part)
            part = torch.nn.parallel.DistributedDataParallel(part, process_group=mesh["dp"].get_group())
        stages.append((s, part))
    return stages, nstages


def pipeline(a, stages, nstages, mesh, device):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B
    mb = a.batch // a.dp // a.microbatches
    pstages = []
    for s, part in stages:
        x = torch.empty(mb, a.seq, dtype=torch.long, device="meta") if s == 0 else \
            torch.empty(mb, a.seq, a.hidden, device="meta")
        y = torch.empty(mb, a.seq, a.vocab if s == nstages - 1 else a.hidden, device="meta")
        pstages.append(PipelineStage(part, s, nstages, device, input_args=x, output_args=y,
                                     group=mesh["pp"].get_group()))
    if a.schedule == "interleaved":
        return ScheduleInterleaved1F1B(pstages, n_microbatches=a.microbatches, loss_fn=loss_fn), pstages
    return Schedule1F1B(pstages[0], n_microbatches=a.microbatches, loss_fn=loss_fn), pstages


def disorder(a, sched, pstages, coords, device):
    """Moves this rank's REDUCE_GRAD of the stage that finishes first to just before (dp + pp rank odd) or just after
    (even) the rank's last pipeline gradient transfer (SEND_B of the last stage, RECV_B of the first); on CUDA,
    synchronizes the device and empties the cache after submitting each of the two. Returns the rank's actions."""
    from torch.distributed.pipelining import schedules
    C = schedules._ComputationType
    d, p, _ = coords
    order = sched.pipeline_order_with_comms[p]
    transfers = [i for i, act in enumerate(order) if act is not None and act.computation_type in (C.SEND_B, C.RECV_B)]
    reduces = [i for i, act in enumerate(order) if act is not None and act.computation_type == C.REDUCE_GRAD]
    if not transfers or not reduces or reduces[0] > transfers[-1]:
        raise SystemExit(f"gpt_3d.py: --disorder: pp rank {p} has no stage done before its last pipeline transfer")
    transfer = order[transfers[-1]]
    reduce = order.pop(reduces[0])
    at = transfers[-1] - 1
    order.insert(at if (d + p) % 2 == 1 else at + 1, reduce)
    if device.type == "cuda":
        def sync():
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()

        by_index = {st.stage_index: st for st in pstages}
        st = by_index[reduce.stage_index]
        orig_reduce = st.perform_reduce_grad
        st.perform_reduce_grad = lambda *args, **kw: (orig_reduce(*args, **kw), sync())[0]
        # The transfer's ops are made by the stage's getter, then submitted by schedules._batch_p2p: mark, then sync.
        st = by_index[transfer.stage_index]
        name = "get_bwd_send_ops" if transfer.computation_type == C.SEND_B else "get_bwd_recv_ops"
        getter, armed = getattr(st, name), [False]

        def marked(mb, *args, **kw):
            armed[0] = armed[0] or mb == transfer.microbatch_index
            return getter(mb, *args, **kw)
        setattr(st, name, marked)
        orig_batch = schedules._batch_p2p

        def batch_then_sync(ops, desc=None):
            works = orig_batch(ops, desc=desc)
            if armed[0]:
                armed[0] = False
                sync()
            return works
        schedules._batch_p2p = batch_then_sync
    return [str(x) for x in order if x is not None]


# ---------------------------------------------------------------------------------------------------------------------
# Collective counts per group


class GroupCounter:
    """Ops this rank issued on each of its groups (the backend's op_counts, dfccl only), per step."""

    def __init__(self, a, mesh):
        import torch.distributed as dist
        self.groups = {"world": dist.group.WORLD}
        self.groups.update({dim: mesh[dim].get_group() for dim in ("dp", "pp", "tp")})
        self.enabled = a.backend == "dfccl"
        self.last = self.snapshot()
        self.rows = []  # per step: {dim: {op: n}}

    def snapshot(self):
        out = {}
        for dim, g in self.groups.items():
            counts = {}
            if self.enabled:
                import torch.distributed as dist
                be = g._get_backend(torch.device("cpu")) if g is not dist.group.WORLD else \
                    dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
                counts = dict(be.op_counts())
            out[dim] = counts
        return out

    def step(self):
        now = self.snapshot()
        self.rows.append({dim: {op: n - self.last[dim].get(op, 0) for op, n in now[dim].items()
                                if n - self.last[dim].get(op, 0)} for dim in now})
        self.last = now


# ---------------------------------------------------------------------------------------------------------------------


def check_checkpoint(a, stages, opts, rank):
    """dcp.save of every stage's model and optimizer state, then the parameters overwritten, dcp.load, and every
    local shard compared with what was saved. Returns the number of tensors compared; raises on a difference."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    def local(t):
        return t.to_local() if hasattr(t, "to_local") else t

    state, saved = {}, {}
    for (s, part), opt in zip(stages, opts):
        msd, osd = get_state_dict(part, opt)
        state[f"model{s}"], state[f"optim{s}"] = msd, osd
        saved.update({f"{s}.{k}": local(v).detach().clone() for k, v in msd.items()})
    dcp.save(state, checkpoint_id=a.checkpoint)
    with torch.no_grad():
        for _, part in stages:
            for prm in part.parameters():
                local(prm).fill_(-7.0)
    fresh = {}
    for (s, part), opt in zip(stages, opts):
        msd, osd = get_state_dict(part, opt)
        fresh[f"model{s}"], fresh[f"optim{s}"] = msd, osd
    dcp.load(fresh, checkpoint_id=a.checkpoint)
    n = 0
    for (s, part), opt in zip(stages, opts):
        set_state_dict(part, opt, model_state_dict=fresh[f"model{s}"], optim_state_dict=fresh[f"optim{s}"])
        msd, _ = get_state_dict(part, opt)
        for k, v in msd.items():
            if not torch.equal(local(v).detach().cpu(), saved[f"{s}.{k}"].cpu()):
                raise SystemExit(f"gpt_3d.py: rank {rank}: checkpoint: {k} of stage {s} differs after dcp.load")
            n += 1
    return n


def main():
    args = tr.parse(__doc__.splitlines()[0], options)
    if args.layers % (args.pp * (2 if args.schedule == "interleaved" else 1)):
        sys.exit("gpt_3d.py: --layers must be a multiple of the number of pipeline stages")
    if args.batch % (args.dp * args.microbatches) or args.heads % args.tp or args.hidden % args.heads:
        sys.exit("gpt_3d.py: --batch must split over dp x microbatches, --heads over tp, --hidden over --heads")
    if args.disorder and args.schedule != "interleaved":
        sys.exit("gpt_3d.py: --disorder needs --schedule interleaved (a stage done before the last transfer)")
    if args.reference:
        for i, loss in enumerate(reference_losses(args, args.warmup + args.steps)):
            print(f"gpt_3d reference: step {i - args.warmup}: loss {loss:.8g}", flush=True)
        return

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    device = tr.init(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != args.dp * args.pp * args.tp:
        sys.exit(f"gpt_3d.py: {world} ranks, but dp x pp x tp = {args.dp * args.pp * args.tp}")
    mesh = init_device_mesh(device.type, (args.dp, args.pp, args.tp), mesh_dim_names=("dp", "pp", "tp"))
    if args.backend == "dfccl":  # new_group's default timeout is torch's (30 min), not the world group's
        for dim in ("dp", "pp", "tp"):
            mesh[dim].get_group()._get_backend(device).set_timeout(datetime.timedelta(seconds=args.timeout))
    coords = (mesh["dp"].get_local_rank(), mesh["pp"].get_local_rank(), mesh["tp"].get_local_rank())
    d, p, t = coords
    stages, nstages = build_stages(args, mesh, device, coords)
    sched, pstages = pipeline(args, stages, nstages, mesh, device)
    opts = [make_optimizer(args, part.parameters()) for _, part in stages]
    if args.disorder:
        acts = disorder(args, sched, pstages, coords, device)
        if t == 0 and d < 2:
            print(f"gpt_3d: rank {rank} (dp {d}, pp {p}): schedule {' '.join(acts)}", flush=True)
    counter = GroupCounter(args, mesh)
    layout = f"dp={args.dp} pp={args.pp} tp={args.tp}"
    run = tr.Run(args, "gpt_3d", f"a {args.layers}-layer GPT (hidden {args.hidden}) over {layout}: TP "
                 f"(parallelize_module), PP ({args.schedule}), DP ({args.dp_mode})", device,
                 samples_per_step=args.batch * args.seq, sample_unit="tokens", layout=layout)
    last_stage = p == args.pp - 1
    run.printer = ((0 * args.pp) + args.pp - 1) * args.tp  # dp 0, last pp rank, tp 0: where the loss is
    rows = slice(d * args.batch // args.dp, (d + 1) * args.batch // args.dp)
    for step in run.steps():
        x, y = batch(args, step, device)
        x, y = x[rows].contiguous(), y[rows].contiguous()
        with run.step() as s:
            for o in opts:
                o.zero_grad()
            losses = []
            if p == 0:
                sched.step(x, target=y if last_stage else None, losses=losses if last_stage else None)
            elif last_stage:
                sched.step(target=y, losses=losses)
            else:
                sched.step()
            for o in opts:
                o.step()
            s.loss = torch.stack(losses).mean().item() if last_stage else 0.0
        counter.step()
    # The loss of a step: the mean over the dp replicas of their last stage's loss (tp rank 0 reports it).
    mine = torch.tensor(run.losses, dtype=torch.float64, device=device)
    mine *= 1.0 if (last_stage and t == 0) else 0.0
    dist.all_reduce(mine)
    run.losses = (mine / args.dp).tolist()
    # Collective counts: per step and mesh dimension, summed over the ranks; per (dimension, op) over the timed steps.
    dims = ["world", "dp", "pp", "tp"]
    per_step = torch.tensor([[sum(r[dim].values()) for dim in dims] for r in counter.rows], dtype=torch.float64,
                            device=device)
    dist.all_reduce(per_step)
    ops = [None] * world
    timed = counter.rows[args.warmup:]
    mine_ops = {}
    for r in timed:
        for dim in dims:
            for op, n in r[dim].items():
                mine_ops[(dim, op)] = mine_ops.get((dim, op), 0) + n
    dist.all_gather_object(ops, mine_ops)
    total = {}
    for o in ops:
        for k, n in o.items():
            total[k] = total.get(k, 0) + n
    run.step_columns = {f"ops_{dim}": [int(v) for v in per_step[:, i].tolist()] for i, dim in enumerate(dims)}
    run.tables = {"group_ops": {"group": [k[0] for k in sorted(total)], "op": [k[1] for k in sorted(total)],
                                "per_step": [total[k] / len(timed) for k in sorted(total)]}}
    worst = math.nan
    if args.check and rank == 0:
        ref = reference_losses(args, len(run.losses))
        worst = max(abs(x - r) / abs(r) for x, r in zip(run.losses, ref))
        print(f"gpt_3d: largest relative difference from the one-process reference over {len(ref)} steps: "
              f"{worst:.3g}", flush=True)
    saved = 0
    if args.checkpoint:
        saved = check_checkpoint(args, stages, opts, rank)
        if rank == 0:
            print(f"gpt_3d: checkpoint: dcp.save and dcp.load of {args.checkpoint}: every rank's tensors equal "
                  f"after the load", flush=True)
    if rank == 0:
        for k in sorted(total):
            print(f"gpt_3d: group {k[0]}: {k[1]} x {total[k] / len(timed):g} per step (all ranks)", flush=True)
    run.extra = {"reference_max_rel_diff": worst, "microbatches": args.microbatches, "disorder": int(args.disorder),
                 "checkpoint_tensors": saved}
    for dim in dims:
        run.extra[f"ops_per_step_{dim}"] = float(sum(run.step_columns[f"ops_{dim}"][args.warmup:]) / len(timed))
    run.finish()
    if args.check and rank == 0 and not worst <= args.rtol:
        sys.exit(f"gpt_3d.py: the loss differs from the one-process reference by {worst:.3g} > {args.rtol}")


if __name__ == "__main__":
    main()
