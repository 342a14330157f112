// Errors inside the library are exceptions carrying a dfcclResult_t; every C entry point catches them (guard), keeps
// the message as the thread's last error and returns the code. Messages name the offending argument.
#pragma once

#include <stdexcept>
#include <string>

#include "dfccl.h"

namespace dfccl {

class Error : public std::runtime_error {
 public:
  Error(dfcclResult_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  dfcclResult_t code() const { return code_; }

 private:
  dfcclResult_t code_;
};

[[noreturn]] void throw_cuda(int err, const char* call, const char* file, int line);
[[noreturn]] void throw_system(const std::string& what);  // errno-based

void set_last_error(const std::string& message);
const char* last_error();

// Runs f; maps exceptions to result codes and remembers their message for dfcclGetLastError().
template <class F>
dfcclResult_t guard(F&& f) noexcept {
  try {
    return f();
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return dfcclSystemError;
  } catch (const std::exception& e) {
    set_last_error(std::string("internal error: ") + e.what());
    return dfcclInternalError;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return dfcclInternalError;
  }
}

}  // namespace dfccl

#define DFCCL_CUDA(call)                                                             \
  do {                                                                               \
    const int dfccl_err_ = static_cast<int>(call);                                   \
    if (dfccl_err_ != 0) ::dfccl::throw_cuda(dfccl_err_, #call, __FILE__, __LINE__); \
  } while (0)
