// Helpers that the backend's source files share; not part of the extension's interface.
#pragma once

#include <ATen/ATen.h>
#include <dfccl.h>

#include <cstddef>
#include <string>

namespace dfccl_torch {

// Raises c10::DistBackendError (what torch.distributed raises for a backend's failure) with msg.
[[noreturn]] void throwDist(const std::string& msg);

// r's text, followed by DFCCL's last error message on this thread where there is one.
std::string describe(dfcclResult_t r);

// Raises naming `where` unless t is defined, dense (strided) and contiguous.
void checkTensor(const at::Tensor& t, const std::string& where);

// t's size in bytes.
inline size_t bytesOf(const at::Tensor& t) { return size_t(t.numel()) * t.element_size(); }

}  // namespace dfccl_torch
