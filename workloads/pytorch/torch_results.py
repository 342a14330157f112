"""What the examples under workloads/pytorch share: the command line, process-group set-up under torchrun, per-step
timing and the HDF5 file (layout: docs/hdf5-layout.md, section "dfccl-torch").

    args = parse(description, extra=lambda ap: ap.add_argument(...))
    run = Run(args, "ddp", "DDP of an MLP on synthetic data", samples_per_step=...)
    for step in range(args.steps):
        with run.step() as s:
            ...
            s.loss = loss.item()
    run.finish()  # prints the summary, writes the file (rank 0), destroys the process group
"""
import argparse
import contextlib
import datetime
import math
import os
import socket
import subprocess
import sys
import time

import torch
import torch.distributed as dist

LAYOUT_VERSION = "1"


def parse(description, extra=None, argv=None):
    """The common options plus the example's own (extra(ap) adds them)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--backend", default="dfccl", help="torch.distributed backend (dfccl, gloo, nccl)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=50, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="steps before the timed ones (not in the statistics)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=300, help="the process group's timeout, s")
    ap.add_argument("--out", default="", help="HDF5 file (default: results/torch/<workload>-<UTC time>.h5)")
    if extra:
        extra(ap)
    args = ap.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    return args


def mpi_env():
    """Under mpirun (Open MPI's OMPI_COMM_WORLD_*, or PMI_RANK/PMI_SIZE) and not torchrun: sets RANK, WORLD_SIZE and
    LOCAL_RANK from MPI's variables, and MASTER_ADDR/MASTER_PORT to 127.0.0.1:29500 unless set (one host)."""
    if "RANK" in os.environ:
        return
    for rank, size, local in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
                              ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")):
        if rank in os.environ and size in os.environ:
            os.environ["RANK"], os.environ["WORLD_SIZE"] = os.environ[rank], os.environ[size]
            os.environ["LOCAL_RANK"] = os.environ.get(local, os.environ[rank])
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29500")
            return


def init(args):
    """Joins the job torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT, LOCAL_RANK) or mpirun (mpi_env) started, with
    args.backend; returns the device of this rank's tensors."""
    mpi_env()
    if args.backend == "dfccl":
        import dfccl_torch  # noqa: F401  (registers the backend)
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    return torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Step:
    loss = math.nan
    wrong = 0


class Run:
    """One example's run: step times and losses, the summary line and the HDF5 file."""

    def __init__(self, args, workload, description, device, samples_per_step, sample_unit="samples", layout=None):
        self.args, self.workload, self.description, self.device = args, workload, description, device
        self.samples_per_step, self.sample_unit = samples_per_step, sample_unit
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.layout = layout or f"dp={self.world}"
        self.printer = 0  # the rank that prints each step (the pipeline's last stage, where the loss is)
        self.times, self.losses, self.wrong = [], [], []
        self.start = time.monotonic()
        self.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.extra = {}  # more summary columns (float or int), set by the example
        self.step_columns = {}  # more columns of the steps table: name -> one value per step (warm-up included)
        self.tables = {}  # more tables under /backends/<backend>: name -> {column: values}

    @contextlib.contextmanager
    def step(self):
        """Times one step (warm-up or timed, in order), from a synchronized device to a synchronized device."""
        s = Step()
        sync(self.device)
        t0 = time.perf_counter()
        yield s
        sync(self.device)
        dt = time.perf_counter() - t0
        n = len(self.times)
        self.times.append(dt)
        self.losses.append(float(s.loss))
        self.wrong.append(int(s.wrong))
        kind = "warm-up" if n < self.args.warmup else "step"
        if self.rank == self.printer:
            print(f"{self.workload}: {kind} {n - self.args.warmup if n >= self.args.warmup else n}: "
                  f"{dt * 1e3:.2f} ms, loss {s.loss:.6g}" + (f", wrong {s.wrong}" if s.wrong else ""), flush=True)

    def steps(self):
        return range(self.args.warmup + self.args.steps)

    def _slowest(self):
        """Per-step time of the slowest rank (a MAX all-reduce of every rank's times, over the backend itself)."""
        t = torch.tensor(self.times, dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.cpu().tolist()

    def summary(self, times):
        timed = times[self.args.warmup:]
        mean = sum(timed) / len(timed)
        sd = math.sqrt(sum((x - mean) ** 2 for x in timed) / (len(timed) - 1)) if len(timed) > 1 else 0.0
        med = sorted(timed)[len(timed) // 2]
        return {"steps": len(timed), "step_time_mean_s": mean, "step_time_median_s": med,
                "step_time_cv": sd / mean if mean > 0 else math.nan,
                "throughput": self.samples_per_step / mean if mean > 0 else math.nan,
                "final_loss": self.losses[-1], "wrong": sum(self.wrong),
                "wall_s": time.monotonic() - self.start, **self.extra}

    def finish(self, status="complete"):
        times = self._slowest()
        summ = self.summary(times)
        gpus = [None] * self.world
        dist.all_gather_object(gpus, gpu_line(self.device))
        if self.rank == 0:
            print(f"{self.workload}: {summ['steps']} steps, step time median {summ['step_time_median_s'] * 1e3:.2f} ms,"
                  f" CV {summ['step_time_cv']:.3f}, throughput {summ['throughput']:.1f} {self.sample_unit}/s, "
                  f"final loss {summ['final_loss']:.6g}", flush=True)
            path = self.args.out or os.path.join(
                "results", "torch", f"{self.workload}-{self.date.replace(':', '').replace('-', '')}.h5")
            write_h5(path, self, times, summ, "\n".join(gpus), status)
            print(f"{self.workload}: wrote {path}", flush=True)
        dist.barrier()
        dist.destroy_process_group()
        return summ


def gpu_line(device):
    host = socket.gethostname()
    if device.type != "cuda":
        return f"{host}: no GPU"
    p = torch.cuda.get_device_properties(device)
    pci = f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}" if hasattr(p, "pci_bus_id") else "?"
    return f"{host}: device {device.index} {p.name} ({pci})"


def git_revision():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return subprocess.run(["git", "-C", here, "describe", "--always", "--dirty"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def dfccl_version():
    try:
        import dfccl_torch
        v = dfccl_torch._C.version()
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
    except ImportError:
        return "none"


def config_toml(args):
    lines = []
    for k, v in sorted(vars(args).items()):
        if isinstance(v, bool):
            lines.append(f"{k} = {'true' if v else 'false'}")
        elif isinstance(v, (int, float)):
            lines.append(f"{k} = {v}")
        else:
            lines.append(f'{k} = "{v}"')
    return "\n".join(lines) + "\n"


def _table(group, cols):
    """A table as docs/hdf5-layout.md has them: one 1-D dataset per column (float64, int64 or UTF-8 strings)."""
    import h5py
    import numpy as np
    for name, values in cols.items():
        if values and isinstance(values[0], str):
            group.create_dataset(name, data=np.array(values, dtype=object), dtype=h5py.string_dtype())
        elif values and isinstance(values[0], int):
            group.create_dataset(name, data=np.array(values, dtype=np.int64))
        else:
            group.create_dataset(name, data=np.array(values, dtype=np.float64))


def write_h5(path, run, times, summ, gpus, status):
    """The run's file: root attributes as the harness's, /summary (one row), /backends/<backend> with its steps."""
    import h5py
    a = run.args
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with h5py.File(path, "w") as f:
        attrs = {"tool": "dfccl-torch", "layout_version": LAYOUT_VERSION, "dfccl_version": dfccl_version(),
                 "git_revision": git_revision(), "date_utc": run.date, "hostname": socket.gethostname(),
                 "command_line": " ".join([os.path.basename(sys.executable)] + sys.argv), "config": config_toml(a),
                 "status": status, "workload": run.workload, "workload_kind": "torch",
                 "workload_description": run.description, "nranks": run.world, "layout": run.layout,
                 "gpus": gpus, "backends": a.backend, "torch_version": torch.__version__,
                 "nccl_version": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "none",
                 "sample_unit": run.sample_unit, "samples_per_step": run.samples_per_step}
        for k, v in attrs.items():
            f.attrs[k] = str(v) if isinstance(v, str) else v  # (torch.__version__ is a str subclass)
        row = {"backend": [a.backend], "workload": [run.workload]}
        row.update({k: [v] for k, v in summ.items()})
        _table(f.create_group("summary"), row)
        g = f.create_group(f"backends/{a.backend}")
        for k, v in {"backend": a.backend, "executor": "cuda" if a.device == "cuda" else "host",
                     "mode": os.environ.get("DFCCL_MODE", "preemptive") if a.backend == "dfccl" else a.backend,
                     "completion": "torch Work.wait", "available": 1}.items():
            g.attrs[k] = v
        n = len(times)
        _table(g.create_group("steps"), {
            "step": list(range(-a.warmup, n - a.warmup)), "warmup": [int(i < a.warmup) for i in range(n)],
            "time_s": times, "loss": run.losses, "wrong": run.wrong, **run.step_columns})
        for name, cols in run.tables.items():
            _table(g.create_group(name), cols)
