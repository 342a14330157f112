#include "util/error.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace dfccl {
namespace {
thread_local std::string tls_last_error;
}

void throw_cuda(int err, const char* call, const char* file, int line) {
  throw Error(dfcclUnhandledCudaError,
              fmt::format("CUDA error {} ({}) in {} at {}:{}", err, cudaGetErrorString(static_cast<cudaError_t>(err)),
                          call, file, line));
}

void throw_system(const std::string& what) {
  throw Error(dfcclSystemError, fmt::format("{}: {}", what, std::strerror(errno)));
}

void set_last_error(const std::string& message) { tls_last_error = message; }
const char* last_error() { return tls_last_error.c_str(); }

}  // namespace dfccl
