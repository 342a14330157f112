"""Runs a function on N ranks, each a process of its own with its own process group (FileStore rendezvous).

run_ranks(fn, world, *args, backend="dfccl") returns [fn(rank, world, *args) for each rank] or fails the test with
every rank's traceback; a job that does not finish within `timeout` seconds is killed and fails the test.
The ranks are forked by a forkserver that has imported torch (and nothing of dfccl) once for the whole session: each
rank starts as a fresh process with the environment of the test at the call, imports dfccl_torch and makes its
process group, as a spawned one would, without paying for torch's import again.

run_script(script, world, *args, env=None, timeout=240) runs a workload script as torchrun would start it on one
host (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/MASTER_PORT set; each rank runs the file as __main__), with its ranks
forked from the same forkserver, and returns a Launch: its returncode (the first non-zero rank exit code, else 0),
each rank's stdout and stderr joined in rank order, and the equivalent torchrun command for messages. As torchrun
does, once a rank fails the others are given `grace` seconds and then killed.

`pytest --device cuda` runs the tests that take their tensors' device from devices.device() on CUDA tensors (every
rank on GPU rank % device_count); the default is cpu (DFCCL's host executor).
"""
import datetime
import multiprocessing as mp
import os
import queue
import runpy
import socket
import sys
import time
import traceback
from dataclasses import dataclass

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def _entry(fn, rank, world, store_path, backend, q, args, env):
    try:
        os.environ.clear()
        os.environ.update(env)
        import torch
        import torch.distributed as dist

        import dfccl_torch  # noqa: F401  (registers "dfccl")

        torch.set_num_threads(1)
        if os.environ.get("TORCH_DFCCL_TEST_DEVICE", "cpu") == "cuda":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        dist.init_process_group(backend, init_method=f"file://{store_path}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        result = fn(rank, world, *args)
        dist.destroy_process_group()
        q.put((rank, True, result))
    except BaseException:  # noqa: B036 - reported to the parent
        q.put((rank, False, traceback.format_exc()))


def pytest_addoption(parser):
    parser.addoption("--device", choices=["cpu", "cuda"], default=os.environ.get("TORCH_DFCCL_TEST_DEVICE", "cpu"),
                     help="device of the tensors of the tests that use devices.device() (default: cpu)")


def pytest_configure(config):
    os.environ["TORCH_DFCCL_TEST_DEVICE"] = config.getoption("--device")  # inherited by the spawned ranks


@pytest.fixture
def run_ranks(tmp_path):
    counter = [0]

    def run(fn, world, *args, backend="dfccl", timeout=240):
        counter[0] += 1
        store = tmp_path / f"store{counter[0]}"
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch", "torch.distributed"])  # before the forkserver starts: its first use
        q = ctx.Queue()
        env = dict(os.environ)
        procs = [ctx.Process(target=_entry, args=(fn, r, world, str(store), backend, q, args, env))
                 for r in range(world)]
        for p in procs:
            p.start()
        results, errors = {}, []
        deadline = time.monotonic() + timeout
        try:
            while len(results) + len(errors) < world:
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"{fn.__name__} on {world} ranks ({backend}): no result after {timeout} s from ranks "
                                f"{sorted(set(range(world)) - set(results))}")
                try:
                    rank, ok, value = q.get(timeout=min(left, 1.0))
                except queue.Empty:
                    dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in results]
                    if dead:
                        time.sleep(1.0)  # let its traceback arrive
                        if q.empty():
                            pytest.fail(f"{fn.__name__}: ranks {dead} died (exit codes "
                                        f"{[procs[r].exitcode for r in dead]})")
                    continue
                if ok:
                    results[rank] = value
                else:
                    errors.append(f"rank {rank}:\n{value}")
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
        if errors:
            pytest.fail(f"{fn.__name__} on {world} ranks ({backend}):\n" + "\n".join(errors))
        return [results[r] for r in range(world)]

    return run


def _script_entry(script, argv, env, out_path, err_path):
    """A rank of run_script: the script as __main__ with its output in two files; exits with the script's code."""
    code = 1
    try:
        for fd, path in ((1, out_path), (2, err_path)):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [script, *argv]
        sys.path.insert(0, os.path.dirname(script))
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: B036 - a failing rank prints its traceback and exits 1, as under torchrun
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


@dataclass
class Launch:
    returncode: int
    stdout: str
    stderr: str
    cmd: str


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lost_port(stderr):
    return "EADDRINUSE" in stderr or "address already in use" in stderr.lower()


@pytest.fixture
def run_script(tmp_path):
    counter = [0]

    def run(script, world, *args, **kw):
        """Runs the script's ranks (run_once); a launch whose store lost its port to another process (EADDRINUSE
        between _free_port and the store's bind) is started again on a new port, at most twice more."""
        for _ in range(3):
            launch = run_once(script, world, *args, **kw)
            if launch.returncode == 0 or not _lost_port(launch.stderr):
                return launch
        return launch

    def run_once(script, world, *args, env=None, timeout=240, grace=30):
        counter[0] += 1
        logs = tmp_path / f"launch{counter[0]}"
        logs.mkdir()
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch", "torch.distributed"])
        base = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
        base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(world),
                    LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0", TORCHELASTIC_RUN_ID="dfccl-tests")
        argv = [str(a) for a in args]
        procs = []
        for r in range(world):
            renv = dict(base, RANK=str(r), LOCAL_RANK=str(r), ROLE_RANK=str(r))
            p = ctx.Process(target=_script_entry, args=(script, argv, renv, str(logs / f"{r}.out"),
                                                        str(logs / f"{r}.err")))
            p.start()
            procs.append(p)
        deadline = time.monotonic() + timeout
        first_failure = None
        try:
            while any(p.exitcode is None for p in procs):
                now = time.monotonic()
                if first_failure is None and any(p.exitcode not in (None, 0) for p in procs):
                    first_failure = now
                if now > deadline or (first_failure is not None and now > first_failure + grace):
                    break
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.exitcode is None:
                    p.kill()
                p.join(timeout=30)
        cmd = (f"torchrun --standalone --nproc-per-node {world} {script} {' '.join(argv)}")
        out = "".join((logs / f"{r}.out").read_text(errors="replace") for r in range(world))
        err = "".join((logs / f"{r}.err").read_text(errors="replace") for r in range(world))
        codes = [p.exitcode for p in procs]
        if time.monotonic() > deadline and first_failure is None:
            pytest.fail(f"{cmd}: no exit after {timeout} s (exit codes {codes})\n{out[-3000:]}\n{err[-5000:]}")
        failed = [c for c in codes if c != 0]
        code = 0 if not failed else (failed[0] if failed[0] > 0 else 128 - failed[0])
        return Launch(code, out, err, cmd)

    return run
