// The completion queue entry (kernels/core/flagged.h, CqEntry): what the daemon's last block writes
// (scheduler/completion.h, write_cq_entry, here on the host executor) is what the host reads back (read_cq_entry), and
// the host takes an entry only when every word carries its completion's flag: not a zeroed entry, not an entry of a lap
// earlier, not one with a word still missing (the words travel without a fence, each on its own).
#include <gtest/gtest.h>

#include "../../kernels/core/scheduler/completion.h"
#include "../../kernels/host/exec_host.h"

namespace dfccl::test {
namespace {

using namespace dfccl::core;

CqInfo sample(u64 k) {
  CqInfo c{};
  c.seq = 0x123456789abcull + k;
  c.t_start = 0x1800000000000000ull + 17 * k;
  c.t_end = c.t_start + 4321;
  c.slot = u32(k % kMaxSlots);
  c.status = u32(k % 3);
  c.preemptions = 0xdeadbeefu;
  c.wait_us = 77;
  return c;
}

bool same(const CqInfo& a, const CqInfo& b) { return memcmp(&a, &b, sizeof(CqInfo)) == 0; }

TEST(CoreCq, EntryReadsBackWhatWasWritten) {
  CqEntry e{};
  for (u64 pos : {u64(0), u64(1), u64(kCqEntries) - 1, u64(kCqEntries) * 5 + 3, (u64(1) << 32) + 9}) {
    const CqInfo c = sample(pos);
    write_cq_entry<host::HostExec>(e, pos, c);
    CqInfo r{};
    ASSERT_TRUE(read_cq_entry(e, pos, &r)) << "completion " << pos;
    EXPECT_TRUE(same(r, c)) << "completion " << pos;
  }
}

TEST(CoreCq, OnlyAWholeEntryOfItsOwnCompletionIsTaken) {
  CqEntry e{};
  CqInfo r{};
  EXPECT_FALSE(read_cq_entry(e, 0, &r)) << "a zeroed entry";
  const u64 pos = 3 * kCqEntries + 11;
  write_cq_entry<host::HostExec>(e, pos - kCqEntries, sample(1));  // the entry's occupant a lap earlier
  EXPECT_FALSE(read_cq_entry(e, pos, &r)) << "an entry of a lap earlier";
  const CqInfo c = sample(2);
  write_cq_entry<host::HostExec>(e, pos, c);
  for (u32 i = 0; i < kCqWords; ++i) {  // each word in turn not landed yet (still the earlier lap's)
    const u64 good = e.w[i];
    e.w[i] = (good & ~u64(0xffffffffu)) | entry_flag(pos - kCqEntries);
    EXPECT_FALSE(read_cq_entry(e, pos, &r)) << "word " << i << " missing";
    e.w[i] = good;
  }
  ASSERT_TRUE(read_cq_entry(e, pos, &r));
  EXPECT_TRUE(same(r, c));
}

}  // namespace
}  // namespace dfccl::test
