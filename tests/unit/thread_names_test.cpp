// Every thread the library starts is named "dfccl-<role>" (lib/src/util/thread_name.h; docs/design.md, "Threads"), so
// that top -H, gdb and py-spy tell the proxy, the daemon's blocks and the progress thread apart. A unique id's
// rendezvous root, then two ranks of the host executor in this process (with every hop over the network transport
// where the build has one) that have run an all-reduce: the threads they leave running are listed from
// /proc/self/task.
#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "group.h"

namespace dfccl::test {
namespace {

using Clock = std::chrono::steady_clock;
using Names = std::map<int, std::string>;  // thread id -> its name (comm)

// The threads of this process now, with their names.
Names threads_now() {
  Names out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    if (f && std::getline(f, name)) out[std::atoi(e->d_name)] = name;
  }
  closedir(d);
  return out;
}

bool ours(const std::string& name) { return name.rfind("dfccl-", 0) == 0; }

// The names of the threads started since `before` (which holds the test's own: main and gtest's). UCX names the one
// thread it starts itself ("async", its asynchronous event thread): not ours to name, left out.
std::multiset<std::string> started_since(const Names& before) {
  std::multiset<std::string> out;
  for (const auto& [tid, name] : threads_now())
    if (!before.count(tid) && name != "async") out.insert(name);
  return out;
}

// started_since(before) once every thread in it is named "dfccl-..." or after 5 s: a thread is born with its
// creator's name and renames itself in its first statement.
std::multiset<std::string> settled_since(const Names& before) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  for (;;) {
    std::multiset<std::string> now = started_since(before);
    bool all_ours = true;
    for (const std::string& n : now) all_ours = all_ours && ours(n);
    if (all_ours || Clock::now() > deadline) return now;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string listing(const std::multiset<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += " " + n;
  return s;
}

TEST(ThreadNames, EveryThreadTheLibraryStartsIsNamed) {
#ifdef DFCCL_TEST_HAVE_UCX
  setenv("DFCCL_NET_FORCE", "1", 1);  // every hop through the network transport: each engine starts its proxy
  const bool net = true;
#else
  const bool net = false;
#endif
  setenv("DFCCL_BLOCKS", "2", 1);
  // The daemons neither give up on a late peer nor leave when idle: they are still there to be listed below.
  setenv("DFCCL_IDLE_NS", "30000000000", 1);
  setenv("DFCCL_STUCK_NS", "30000000000", 1);
  const Names before = threads_now();

  // A unique id that no rank uses: its rendezvous root waits for them.
  dfcclUniqueId id;
  DFCCL_ASSERT_OK(dfcclGetUniqueId(&id));
  std::multiset<std::string> alive = settled_since(before);
  EXPECT_EQ(alive.count("dfccl-rvroot"), 1u) << listing(alive);

  Group g(2, dfcclExecutorHost);
  const size_t n = 1 << 16;
  std::vector<float> in0(n, 1.0f), in1(n, 2.0f), out0(n), out1(n);
  dfcclRequest_t r0 = nullptr, r1 = nullptr;
  DFCCL_ASSERT_OK(dfcclAllReduce(in0.data(), out0.data(), n, dfcclFloat32, dfcclSum, g[0], 0, nullptr, &r0));
  DFCCL_ASSERT_OK(dfcclAllReduce(in1.data(), out1.data(), n, dfcclFloat32, dfcclSum, g[1], 0, nullptr, &r1));
  DFCCL_ASSERT_OK(dfcclSynchronize(r0, 60000));
  DFCCL_ASSERT_OK(dfcclSynchronize(r1, 60000));
  ASSERT_EQ(out0[n - 1], 3.0f);
  ASSERT_EQ(out1[0], 3.0f);

  alive = settled_since(before);
  const std::string all = listing(alive);
  for (const std::string& name : alive) EXPECT_TRUE(ours(name)) << "thread '" << name << "':" << all;
  // Per rank (engine): its progress thread, its proxy, daemon blocks 0 and 1; once per process: the peer watch.
  EXPECT_EQ(alive.count("dfccl-progress"), 2u) << all;
  EXPECT_EQ(alive.count("dfccl-proxy"), net ? 2u : 0u) << all;
  EXPECT_EQ(alive.count("dfccl-hb0"), 2u) << all;
  EXPECT_EQ(alive.count("dfccl-hb1"), 2u) << all;
  EXPECT_EQ(alive.count("dfccl-watch"), 1u) << all;
}

}  // namespace
}  // namespace dfccl::test
