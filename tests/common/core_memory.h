// Caller: the tests of the scheduler's pieces on the host executor (tests/unit/core_*_test.cpp). One engine's memory,
// zeroed as the engine allocates it, and the view a launch of epoch 1 is given over it (no channel contexts).
#pragma once

#include <cstring>
#include <memory>

#include "../../kernels/core/engine_memory.h"

namespace dfccl::test {

struct CoreMemory {
  std::unique_ptr<core::EngineGlobal> g = std::make_unique<core::EngineGlobal>();
  std::unique_ptr<core::EngineHost> h = std::make_unique<core::EngineHost>();
  core::EngineView ev{};
  CoreMemory() {
    std::memset(static_cast<void*>(g.get()), 0, sizeof(core::EngineGlobal));
    std::memset(static_cast<void*>(h.get()), 0, sizeof(core::EngineHost));
    ev.g = g.get();
    ev.h = h.get();
    ev.p.epoch = 1;
  }
};

}  // namespace dfccl::test
