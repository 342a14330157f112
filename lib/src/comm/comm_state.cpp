#include "comm/comm_state.h"

#include "util/error.h"

namespace dfccl {

void throw_comm_ended(const dfcclComm* c) {
  const int code = c->fail_code.load(std::memory_order_acquire);
  if (code != dfcclSuccess && !c->user_aborted) throw Error(dfcclResult_t(code), c->failure);
  throw Error(dfcclInvalidUsage, "argument 'comm' was destroyed or aborted");
}

std::shared_ptr<Engine> engine_ref(dfcclComm* c) {
  std::lock_guard<std::mutex> lk(c->engine_mu);
  return c->engine;
}

const core::CommStatic& p2p_static(const dfcclComm* c, int peer, int direction) {
  return c->p2p.cs[size_t(peer) * 2 + size_t(direction)];
}

}  // namespace dfccl
