// The settings a communicator reads (lib/src/settings/settings.h): every DFCCL_* value is checked at init, which
// fails naming the variable, also for one that only a later call uses; abort and destroy use the values read at init
// and succeed whatever the environment says later.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "group.h"

namespace dfccl::test {
namespace {

// Sets a variable for one scope and removes it afterwards.
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name); }
};

// The result of initialising two host-executor ranks; on success the communicators are destroyed.
dfcclResult_t try_init(std::string* message) {
  dfcclComm_t comms[2] = {};
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  const dfcclResult_t r = dfcclCommInitAllConfig(comms, 2, nullptr, &cfg);
  *message = dfcclGetLastError(nullptr);
  if (r == dfcclSuccess)
    for (dfcclComm_t c : comms) EXPECT_EQ(dfcclCommDestroy(c), dfcclSuccess);
  return r;
}

// A junk value of a setting that only abort, destroy or a host wait reads fails init, naming the variable; so does a
// value of the other executor's settings. Also while an engine of the host executor already exists (the engine's
// own settings were read before).
TEST(CommSettings, AJunkValueFailsInitNamingTheVariable) {
  Group keep(2, dfcclExecutorHost);  // the engine exists before the junk is set
  for (const char* name : {"DFCCL_ABORT_TIMEOUT_MS", "DFCCL_DESTROY_TIMEOUT_MS", "DFCCL_HOST_WAIT_TIMEOUT_MS",
                           "DFCCL_PEER_TIMEOUT_S", "DFCCL_SPIN_MIN_NS", "DFCCL_NET_SLOT_BYTES"}) {
    ScopedEnv junk(name, "abc");
    std::string message;
    EXPECT_EQ(try_init(&message), dfcclInvalidArgument) << name;
    EXPECT_NE(message.find(name), std::string::npos) << name << ": " << message;
  }
  ScopedEnv odd("DFCCL_NET_SLOT_BYTES", "16392");  // in range, not a multiple of 16
  std::string message;
  EXPECT_EQ(try_init(&message), dfcclInvalidArgument);
  EXPECT_NE(message.find("DFCCL_NET_SLOT_BYTES=16392 must be a multiple of 16"), std::string::npos) << message;
}

// A variable that only the CUDA executor reads, set while a host-executor engine is made, is reported once under
// DFCCL_DEBUG=WARN, naming the host executor's own setting where it has one; a variable both read is not.
TEST(CommSettings, CudaOnlySettingsOnTheHostExecutorAreReported) {
  ScopedEnv slots("DFCCL_SLOTS", "4"), threads("DFCCL_THREADS", "128"), grow("DFCCL_SPIN_GROW", "4"),
      chan("DFCCL_MIN_CHAN_BYTES", "4096");
  testing::internal::CaptureStderr();
  { Group g(2, dfcclExecutorHost); }
  { Group again(2, dfcclExecutorHost); }
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string slots_warning =
      "DFCCL_SLOTS is set but only the CUDA executor reads it: the host executor ignores it (its setting is "
      "DFCCL_HOST_SLOTS)";
  const size_t first = err.find(slots_warning);
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(slots_warning, first + 1), std::string::npos) << "warned twice: " << err;
  EXPECT_NE(err.find("DFCCL_THREADS is set but only the CUDA executor reads it"), std::string::npos) << err;
  EXPECT_EQ(err.find("DFCCL_SPIN_GROW"), std::string::npos) << err;
  EXPECT_EQ(err.find("DFCCL_MIN_CHAN_BYTES"), std::string::npos) << err;
}

// Abort and destroy take their timeouts from init: junk set afterwards changes nothing, the pending collective ends
// as aborted, and destroy succeeds.
TEST(CommSettings, AbortAndDestroyUseTheSettingsReadAtInit) {
  Group g(2, dfcclExecutorHost);
  ScopedEnv abort_junk("DFCCL_ABORT_TIMEOUT_MS", "abc"), destroy_junk("DFCCL_DESTROY_TIMEOUT_MS", "-1");
  std::vector<int32_t> in(16, 1), out(16);
  dfcclRequest_t q = nullptr;  // rank 1 never joins
  DFCCL_ASSERT_OK(dfcclAllReduce(in.data(), out.data(), 16, dfcclInt32, dfcclSum, g[0], 0, nullptr, &q));
  EXPECT_EQ(dfcclCommAbort(g[0]), dfcclSuccess) << dfcclGetLastError(nullptr);
  EXPECT_EQ(dfcclSynchronize(q, 5000), dfcclAborted);
  EXPECT_EQ(dfcclRequestFree(q), dfcclSuccess);
  EXPECT_EQ(dfcclCommDestroy(g[1]), dfcclSuccess) << dfcclGetLastError(nullptr);
  g.comms.clear();  // both are ended: the group's destructor has nothing left to do
}

}  // namespace
}  // namespace dfccl::test
