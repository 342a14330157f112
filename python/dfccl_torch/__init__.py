"""torch.distributed backend "dfccl".

Importing this package registers the backend for CPU tensors (DFCCL's host executor) and CUDA tensors (the CUDA
executor):

    import dfccl_torch  # noqa: F401
    torch.distributed.init_process_group(backend="dfccl", ...)

Environment: DFCCL_TORCH_CUDA=0 creates no CUDA communicator even where a GPU is present (CPU tensors only).
DFCCL_PERSISTENT_LANES defaults to 0 here (the backend uses no persistent collectives; this saves their memory).
"""
import os

import torch
import torch.distributed as dist

os.environ.setdefault("DFCCL_PERSISTENT_LANES", "0")

from . import _C  # noqa: E402

__all__ = ["ProcessGroupDFCCL", "BACKEND", "shrink_group"]

BACKEND = "dfccl"
ProcessGroupDFCCL = _C.ProcessGroupDFCCL


def _create_backend(dist_opts, pg_options):
    """The factory torch calls for init_process_group and every new_group (extended API)."""
    cuda_device = -1
    if os.environ.get("DFCCL_TORCH_CUDA", "1") != "0" and torch.cuda.is_available():
        cuda_device = torch.cuda.current_device()
    return _C.ProcessGroupDFCCL(
        dist_opts.store,
        dist_opts.group_rank,
        dist_opts.group_size,
        dist_opts.timeout,
        str(dist_opts.group_id),
        [int(r) for r in (dist_opts.global_ranks_in_group or [])],
        cuda_device,
    )


def shrink_group(group=None, ranks_to_exclude=None):
    """The survivors' process group after a failure, on every survivor (python/README.md, "Surviving a dead rank").

    Agrees with the other survivors on the ranks of `group` (default: the default group) to leave out: the union of
    every survivor's `ranks_to_exclude` or, where it is None, of the ranks its communicators found failed (a dead
    rank, one that stopped answering), plus every rank that dies meanwhile (dfcclCommShrink). Then torch's
    dist.shrink_group(<that set>, group) makes the new group (which replaces the default group when `group` is it)
    and destroys the old one, whose outstanding works fail. Returns (new group, excluded ranks of `group`).
    Raises RuntimeError when nothing is to be excluded (no failure found, no list), DistBackendError when the
    agreement fails (a survivor that never calls it is named after the group's timeout). Do not abort() the group
    before: an aborted communicator cannot be shrunk.
    """
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("cpu"))
    excluded = [int(r) for r in backend.prepare_shrink([int(r) for r in (ranks_to_exclude or [])])]
    if not excluded:
        raise RuntimeError("dfccl_torch.shrink_group: no rank failed and none was named: nothing to exclude")
    new_pg = dist.shrink_group(excluded, group=pg)
    # torch registers the new backend for one device type (the old group's bound device, else cpu) as NCCL's or Gloo's
    # type, and DDP then takes it for Gloo's (its logger casts it to ProcessGroupGloo). As init_process_group does for
    # a plugin: a custom backend, for both device types.
    made = None
    for dev in ("cpu", "cuda"):
        try:
            made = new_pg._get_backend(torch.device(dev))
            break
        except RuntimeError:
            continue
    custom = dist.ProcessGroup.BackendType.CUSTOM
    for dev in ["cpu"] + (["cuda"] if made.has_cuda else []):
        new_pg._register_backend(torch.device(dev), custom, made)
    new_pg._set_default_backend(custom)
    return new_pg, excluded


if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["cpu", "cuda"])
