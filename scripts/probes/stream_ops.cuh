// What the stream-path probes (doorbell_path, desc_path) share: the driver's stream memory operations and a
// one-thread kernel that makes its stream wait until a word reaches a value (dfccl's stream waiter).
#pragma once

#include <cuda.h>

using WriteFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
using WaitFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

__global__ void waiter(const unsigned long long* word, unsigned long long v) {
  unsigned long long x;
  do {
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(x) : "l"(word) : "memory");
  } while (x < v);
}
