// The transport's entry points that exist with and without UCX: the factory and the names of outcomes.
#include "net/transport.h"

namespace dfccl::net {

#ifdef DFCCL_HAVE_UCX
// transport_ucx.cpp
Result<std::unique_ptr<Transport>> make_ucx_transport(const Options& options);
std::string ucx_description();
#endif

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kPending: return "pending";
    case Code::kCancelled: return "cancelled";
    case Code::kPeerFailed: return "peer failed";
    case Code::kTruncated: return "truncated";
    case Code::kTimeout: return "timeout";
    case Code::kInvalid: return "invalid argument";
    case Code::kUnsupported: return "unsupported";
    case Code::kError: return "error";
  }
  return "unknown";
}

bool transport_available() {
#ifdef DFCCL_HAVE_UCX
  return true;
#else
  return false;
#endif
}

std::string transport_description() {
#ifdef DFCCL_HAVE_UCX
  return ucx_description();
#else
  return "none (built without UCX: install libucx-dev and reconfigure)";
#endif
}

Result<std::unique_ptr<Transport>> make_transport([[maybe_unused]] const Options& options) {
#ifdef DFCCL_HAVE_UCX
  return make_ucx_transport(options);
#else
  return {nullptr,
          {Code::kUnsupported, "network transport: DFCCL was built without UCX (install libucx-dev and "
                               "reconfigure; dfccl-info shows the build's features)"}};
#endif
}

}  // namespace dfccl::net
