// Which backends this build has, and their construction.
#include "backend.h"

namespace dfccl::harness {

#ifdef DFCCL_HARNESS_HAVE_DFCCL
std::unique_ptr<Backend> make_dfccl_backend(const BackendContext& ctx, const std::string& name);
#endif
#ifdef DFCCL_HARNESS_HAVE_NCCL
std::unique_ptr<Backend> make_nccl_backend(const BackendContext& ctx, bool graphs);
#endif

bool backend_compiled(const std::string& name) {
  if (name == "nccl" || name == "nccl-graph") {
#ifdef DFCCL_HARNESS_HAVE_NCCL
    return true;
#endif
  } else if (name == "dfccl" || name == "dfccl-blocking" || name == "dfccl-graph" || name == "host" ||
             name == "host-blocking") {
#ifdef DFCCL_HARNESS_HAVE_DFCCL
    return true;
#endif
  }
  return false;
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendContext& ctx) {
  if (!backend_compiled(name))
    throw BackendError(name == "nccl" || name == "nccl-graph"
                           ? "not built: NCCL was not found at configure time (set -DNCCL_HOME)"
                           : "not built: the dfccl library target did not exist at configure time");
#ifdef DFCCL_HARNESS_HAVE_NCCL
  if (name == "nccl" || name == "nccl-graph") return make_nccl_backend(ctx, name == "nccl-graph");
#endif
#ifdef DFCCL_HARNESS_HAVE_DFCCL
  return make_dfccl_backend(ctx, name);
#endif
  throw BackendError("unknown backend " + name);
}

}  // namespace dfccl::harness
