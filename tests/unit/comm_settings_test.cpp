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
// DFCCL_DEBUG=WARN; a variable both read (one default for both, or one per executor) is not.
TEST(CommSettings, CudaOnlySettingsOnTheHostExecutorAreReported) {
  ScopedEnv threads("DFCCL_THREADS", "128"), slots("DFCCL_SLOTS", "4"), grow("DFCCL_SPIN_GROW", "4"),
      chan("DFCCL_MIN_CHAN_BYTES", "4096");
  testing::internal::CaptureStderr();
  { Group g(2, dfcclExecutorHost); }
  { Group again(2, dfcclExecutorHost); }
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string threads_warning =
      "DFCCL_THREADS is set but only the CUDA executor reads it: the host executor ignores it";
  const size_t first = err.find(threads_warning);
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(threads_warning, first + 1), std::string::npos) << "warned twice: " << err;
  EXPECT_EQ(err.find("DFCCL_SLOTS"), std::string::npos) << err;
  EXPECT_EQ(err.find("DFCCL_SPIN_GROW"), std::string::npos) << err;
  EXPECT_EQ(err.find("DFCCL_MIN_CHAN_BYTES"), std::string::npos) << err;
}

dfcclCommInfo_t info_of(dfcclComm_t comm) {
  dfcclCommInfo_t info = DFCCL_COMM_INFO_INITIALIZER;
  EXPECT_EQ(dfcclCommGetInfo(comm, &info), dfcclSuccess) << dfcclGetLastError(comm);
  return info;
}

// A variable with a default per executor: unset, the host executor takes its own (8 slots of 32 KiB, 1 block and
// 1 point-to-point channel, where the CUDA executor's are 3 of 128 KiB, 128 and 8: env_test); set, it applies to
// the host executor too.
TEST(CommSettings, TheHostExecutorHasItsOwnDefaults) {
  {
    Group g(2, dfcclExecutorHost);
    const dfcclCommInfo_t info = info_of(g[0]);
    EXPECT_EQ(info.slots, 8);
    EXPECT_EQ(info.slotBytes, 32768u);
    EXPECT_EQ(info.blocks, 1);
    EXPECT_EQ(info.p2pChannels, 1);
  }
  ScopedEnv slots("DFCCL_SLOTS", "5"), bytes("DFCCL_SLOT_BYTES", "16384");
  Group g(2, dfcclExecutorHost);
  const dfcclCommInfo_t info = info_of(g[0]);
  EXPECT_EQ(info.slots, 5);
  EXPECT_EQ(info.slotBytes, 16384u);
}

// A deprecated DFCCL_HOST_* name still sets the host executor's value where the new name is unset, with one warning
// per process naming the new name; where both are set the new one wins and the old one is reported ignored.
TEST(CommSettings, ADeprecatedHostNameStillWorksAndWarnsOnce) {
  ScopedEnv old_slots("DFCCL_HOST_SLOTS", "4");
  testing::internal::CaptureStderr();
  {
    Group g(2, dfcclExecutorHost);
    EXPECT_EQ(info_of(g[0]).slots, 4);
  }
  { Group again(2, dfcclExecutorHost); }
  std::string err = testing::internal::GetCapturedStderr();
  const std::string warning = "DFCCL_HOST_SLOTS is deprecated: use DFCCL_SLOTS";
  const size_t first = err.find(warning);
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(warning, first + 1), std::string::npos) << "warned twice: " << err;

  ScopedEnv old_blocks("DFCCL_HOST_BLOCKS", "3"), blocks("DFCCL_BLOCKS", "2");
  testing::internal::CaptureStderr();
  {
    Group g(2, dfcclExecutorHost);
    EXPECT_EQ(info_of(g[0]).blocks, 2);
  }
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("DFCCL_HOST_BLOCKS is deprecated and ignored: DFCCL_BLOCKS is set"), std::string::npos) << err;
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
