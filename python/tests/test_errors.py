"""Errors: abort of a stuck collective, wait(timeout), mismatched collectives, use after shutdown, the watchdog."""
import contextlib
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from devices import device, on_cuda, sync


def backend():
    return dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))


def abort_stuck(rank, world):
    """Rank 0 submits an all_reduce that rank 1 never calls, then aborts: wait() raises within 2 s, naming it."""
    if rank == 1:
        time.sleep(3)
        backend().abort()
        return None
    t = torch.ones(64)
    work = dist.all_reduce(t, async_op=True)
    time.sleep(0.3)
    assert not work.is_completed()
    start = time.monotonic()
    backend().abort()
    try:
        work.wait()
        raise AssertionError("wait() after abort returned normally")
    except dist.DistBackendError as e:
        elapsed = time.monotonic() - start
        msg = str(e)
    assert elapsed < 2.0, elapsed
    assert "allreduce" in msg and "group '0'" in msg, msg
    try:
        dist.all_reduce(t)
        raise AssertionError("all_reduce after abort did not raise")
    except dist.DistBackendError as e:
        assert "aborted" in str(e), str(e)
    return msg


def test_abort_stuck_collective(run_ranks):
    msg = run_ranks(abort_stuck, 2)[0]
    assert "abort" in msg.lower(), msg


def wait_timeout(rank, world):
    """wait(timeout) on a collective whose peer comes late raises naming the op; the collective completes later."""
    t = torch.full((16,), float(rank + 1))
    if rank == 1:
        time.sleep(2)
        dist.all_reduce(t)
        return None
    work = dist.all_reduce(t, async_op=True)
    try:
        work.wait(timeout=datetime.timedelta(milliseconds=300))
        raise AssertionError("wait(300 ms) returned before the peer arrived")
    except dist.DistBackendError as e:
        msg = str(e)
    work.wait()
    assert torch.equal(t, torch.full((16,), 3.0))
    assert work.is_completed() and work.get_future().done()
    return msg


def test_wait_timeout_names_op(run_ranks):
    msg = run_ranks(wait_timeout, 2)[0]
    assert "allreduce" in msg and "300 ms" in msg, msg


def mismatch(rank, world):
    """The ranks' all_reduce counts differ: both ranks' works fail with DistBackendError naming the op."""
    t = torch.ones(8 if rank == 0 else 16)
    try:
        dist.all_reduce(t)
    except dist.DistBackendError as e:
        return str(e)
    return "no error"


def test_mismatched_counts_raise(run_ranks):
    for rank, msg in enumerate(run_ranks(mismatch, 2)):
        assert "allreduce" in msg and "count" in msg, f"rank {rank}: {msg}"


def after_shutdown(rank, world):
    b = backend()
    dist.barrier()
    b.shutdown()
    try:
        b.allreduce([torch.ones(2)]).wait()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None


def test_use_after_shutdown(run_ranks):
    for name, msg in run_ranks(after_shutdown, 2):
        assert name == "DistBackendError" and "shut down" in msg, (name, msg)


@contextlib.contextmanager
def stderr_to(path):
    """The process's file descriptor 2 (where the backend's watchdog writes) goes to path inside the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "w") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def watchdog_names_missing(rank, world, log_dir):
    """Group [1, 2, 3] with a 1.5 s timeout: rank 1 calls an all_reduce that ranks 2 and 3 join only after 4 s. The
    watchdog reports it on rank 1's stderr, naming the op, the group and ranks 1, 2 of the group (global 2, 3); a CPU
    wait() raises with the same words. Then the collective completes."""
    g = dist.new_group([1, 2, 3], timeout=datetime.timedelta(seconds=1.5))
    if rank == 0:
        return None
    dev = device()
    t = torch.full((100,), float(rank), device=dev)
    if rank != 1:
        time.sleep(4)
        dist.all_reduce(t, group=g)
        sync()
        return None
    log = os.path.join(log_dir, "rank1.stderr")
    msg = None
    with stderr_to(log):
        work = dist.all_reduce(t, group=g, async_op=True)
        if on_cuda():
            time.sleep(2.5)  # wait() only joins the stream: the watchdog is what reports
        else:
            try:
                work.wait()
            except dist.DistBackendError as e:
                msg = str(e)
        work.wait(timeout=datetime.timedelta(seconds=30))
        sync()
    assert torch.equal(t.cpu(), torch.full((100,), 6.0)), t[:3]
    with open(log) as f:
        return g.group_name, msg, f.read()


def test_watchdog_names_missing_ranks(run_ranks, tmp_path):
    group, msg, log = run_ranks(watchdog_names_missing, 4, str(tmp_path))[1]
    lines = [line for line in log.splitlines() if line.startswith("dfccl watchdog:")]
    assert lines, log
    want = [f"group '{group}'", "op allreduce", "timeout 1500 ms", "ranks that never arrived: 1, 2 (global 2, 3)"]
    assert all(w in lines[0] for w in want), lines[0]
    assert "not called yet by ranks 1, 2" in log, log  # the dfcclDebugDump it read, written out again
    if msg is not None:  # CPU: wait() raised after the group's timeout with the same finding
        assert all(w in msg for w in want[:2] + want[3:]), msg
