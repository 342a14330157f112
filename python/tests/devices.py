"""The device of the tests' tensors in the rank processes: cpu, or with `pytest --device cuda` the rank's GPU
(conftest.py sets TORCH_DFCCL_TEST_DEVICE and the current device of every rank)."""
import os

import torch


def device():
    if os.environ.get("TORCH_DFCCL_TEST_DEVICE", "cpu") == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def on_cuda():
    return device().type == "cuda"


def sync():
    """Makes the host wait for the current stream (a no-op on CPU): results are read after it."""
    if on_cuda():
        torch.cuda.current_stream().synchronize()
