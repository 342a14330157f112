"""Runs a function on N ranks, each a process of its own with its own process group (FileStore rendezvous).

run_ranks(fn, world, *args, backend="dfccl") returns [fn(rank, world, *args) for each rank] or fails the test with
every rank's traceback; a job that does not finish within `timeout` seconds is killed and fails the test.
The ranks are forked by a forkserver that has imported torch (and nothing of dfccl) once for the whole session: each
rank starts as a fresh process with the environment of the test at the call, imports dfccl_torch and makes its
process group, as a spawned one would, without paying for torch's import again.

`pytest --device cuda` runs the tests that take their tensors' device from devices.device() on CUDA tensors (every
rank on GPU rank % device_count); the default is cpu (DFCCL's host executor).
"""
import datetime
import multiprocessing as mp
import os
import queue
import sys
import time
import traceback

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
