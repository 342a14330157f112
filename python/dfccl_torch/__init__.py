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

__all__ = ["ProcessGroupDFCCL", "BACKEND"]

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


if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["cpu", "cuda"])
