#!/usr/bin/env python3
"""Derives the collective sizes of the shipped model workloads (workloads/resnet50-dp.toml, workloads/gpt2-3d.toml)
from the models' shapes, so that every number in those files can be checked. No framework needed: the parameter
shapes are written out from the architectures.

  python3 scripts/workload_sizes.py resnet50   # DDP gradient buckets of torchvision's ResNet-50
  python3 scripts/workload_sizes.py gpt2       # collectives of one GPT-2 (124M) Megatron-style step, tp=2 pp=2
"""
import sys

MiB = 1 << 20


def resnet50_params():
    """torchvision resnet50: (name, element count) in model.parameters() order."""
    p = [("conv1.weight", 64 * 3 * 7 * 7), ("bn1.weight", 64), ("bn1.bias", 64)]
    inplanes = 64
    for layer, (planes, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)], start=1):
        for b in range(blocks):
            pre = f"layer{layer}.{b}"
            p += [(f"{pre}.conv1.weight", planes * inplanes), (f"{pre}.bn1.weight", planes), (f"{pre}.bn1.bias", planes),
                  (f"{pre}.conv2.weight", planes * planes * 9), (f"{pre}.bn2.weight", planes), (f"{pre}.bn2.bias", planes),
                  (f"{pre}.conv3.weight", planes * 4 * planes), (f"{pre}.bn3.weight", planes * 4),
                  (f"{pre}.bn3.bias", planes * 4)]
            if b == 0:
                p += [(f"{pre}.downsample.0.weight", planes * 4 * inplanes),
                      (f"{pre}.downsample.1.weight", planes * 4), (f"{pre}.downsample.1.bias", planes * 4)]
            inplanes = planes * 4
    p += [("fc.weight", 1000 * 2048), ("fc.bias", 1000)]
    return p


def ddp_buckets(params, elem_bytes=4, first_cap=1 * MiB, cap=25 * MiB):
    """PyTorch DDP's default bucketing as we model it: gradients in the order they become ready in backward (reverse
    parameter order); a bucket closes once it reaches its cap (1 MiB for the first, 25 MiB after)."""
    buckets, cur, limit = [], 0, first_cap
    for _, n in reversed(params):
        cur += n * elem_bytes
        if cur >= limit:
            buckets.append(cur)
            cur, limit = 0, cap
    if cur:
        buckets.append(cur)
    return buckets


def resnet50():
    params = resnet50_params()
    total = sum(n for _, n in params)
    assert total == 25_557_032, total  # torchvision's documented parameter count
    buckets = ddp_buckets(params)
    print(f"# ResNet-50: {total} parameters, {total * 4} bytes of fp32 gradients, {len(buckets)} buckets")
    for i, b in enumerate(buckets):
        print(f"bucket {i}: {b} bytes ({b / MiB:.2f} MiB)")


def gpt2():
    h, layers, seq, vocab, micro, mb = 768, 12, 1024, 50304, 2, 8  # GPT-2 small, vocab padded to 128*393
    tp, pp, elem = 2, 2, 2  # bf16
    act = mb * seq * h * elem
    per_layer = 12 * h * h + 13 * h  # attention + MLP weights and biases, two layer norms
    layers_per_stage = layers // pp
    stage_params = layers_per_stage * per_layer // tp
    wte = vocab * h // tp
    wpe = seq * h
    print(f"# GPT-2 small, micro-batch {mb} x {seq} tokens, {micro} micro-batches, tp={tp} pp={pp}, bf16")
    print(f"tp all_reduce per layer per micro-batch (2 forward + 2 backward): {act} bytes")
    print(f"tp all_reduces per stage per micro-batch: {4 * layers_per_stage}")
    print(f"pp activation / gradient transfer (broadcast in the 2-rank pp group): {act} bytes")
    print(f"tp vocab-parallel embedding all_reduce (first stage, forward): {act} bytes")
    print(f"tp cross-entropy all_reduces (last stage, fp32 b*s values, 3 of them): {mb * seq * 4} bytes")
    print(f"dp gradient all_reduce, stage 0: {(stage_params + wte + wpe) * elem} bytes; "
          f"stage 1: {(stage_params + wte) * elem} bytes")
    print(f"embedding-group all_reduce of the word-embedding gradients (first and last stage): {wte * elem} bytes")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "resnet50"
    {"resnet50": resnet50, "gpt2": gpt2}[what]()
