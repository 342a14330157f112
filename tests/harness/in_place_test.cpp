// nccl-tests' in-place measurement: run.in_place's resolution, the in-place buffer layout of every collective, and
// the pairing of out-of-place and in-place rows for the console and JSON writers.
#include <gtest/gtest.h>

#include "colls/collective.h"
#include "config/workload.h"
#include "output/row_pairs.h"
#include "plan/entry_plan.h"
#include "workload_error.h"

using namespace dfccl::harness;
using dfccl::harness::test::error_of;

TEST(InPlace, AutoIsBothForSweepsAndOffOtherwise) {
  EXPECT_EQ(parse_workload("", "s.toml", {}).in_place, InPlace::Both);
  Workload w = parse_workload("[mix]\ncount = 2\n", "m.toml", {});
  EXPECT_EQ(w.in_place, InPlace::Off);
  EXPECT_NE(w.resolved_toml.find("in_place = 'off'"), std::string::npos) << w.resolved_toml;
  EXPECT_EQ(parse_workload("[[step]]\ncoll = 'all_reduce'\nbytes = '1K'\n", "st.toml", {}).in_place, InPlace::Off);
  EXPECT_EQ(parse_workload("[mix]\ncount = 2\n", "m.toml", {{"in_place", "only"}}).in_place, InPlace::Only);
  EXPECT_EQ(parse_workload("", "s.toml", {{"run.in_place", "off"}}).in_place, InPlace::Off);
  EXPECT_NE(error_of("", {{"in_place", "sometimes"}}).find("'run.in_place'"), std::string::npos);
}

// nccl-tests' getCollByteCount offsets and dfccl.h's conventions, on rank 2 of 4 with count 3 (float32).
TEST(InPlace, BufferLayoutOfEveryCollective) {
  auto layout = [](const Collective& c, bool in_place) {
    EntryPlan p;
    p.coll = &c;
    p.group_rank = 2;
    p.group_size = 4;
    p.count = 3;
    p.send_elems = c.send_elems(p.count, p.group_size);
    p.recv_elems = c.recv_elems(p.count, p.group_size);
    p.in_place = in_place;
    return buffer_layout(p);
  };
  BufferLayout l = layout(kAllGather, true);
  EXPECT_EQ(l.buffer_bytes, 48u);
  EXPECT_EQ(l.send_offset, 24u);  // sendbuff == recvbuff + rank * sendcount
  EXPECT_EQ(l.recv_offset, 0u);
  l = layout(kReduceScatter, true);
  EXPECT_EQ(l.buffer_bytes, 48u);
  EXPECT_EQ(l.send_offset, 0u);
  EXPECT_EQ(l.recv_offset, 24u);  // recvbuff == sendbuff + rank * recvcount
  for (const Collective* c : {&kAllReduce, &kBroadcast, &kReduce}) {
    l = layout(*c, true);
    EXPECT_EQ(l.buffer_bytes, 12u) << c->name;
    EXPECT_EQ(l.send_offset + l.recv_offset, 0u) << c->name;
  }
  l = layout(kAllGather, false);
  EXPECT_EQ(l.send_bytes, 12u);
  EXPECT_EQ(l.recv_bytes, 48u);
  EXPECT_EQ(l.buffer_bytes + l.send_offset + l.recv_offset, 0u);
}

namespace {
CaseRow row(int64_t case_index, int64_t bytes, bool in_place) {
  CaseRow r;
  r.case_index = case_index;
  r.coll = "all_reduce";
  r.bytes = bytes;
  r.in_place = in_place;
  return r;
}
}  // namespace

TEST(InPlace, RowsPairWithTheirTwins) {
  RowPairer both(true);
  EXPECT_TRUE(both.add(row(0, 8, false)).empty());  // waits for its twin
  auto out = both.add(row(1, 8, true));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].out_of_place && out[0].in_place);
  EXPECT_EQ(out[0].first().case_index, 0);
  // The in-place case of 64 B had no completed trial: its out-of-place row comes out alone when the next one comes.
  EXPECT_TRUE(both.add(row(2, 64, false)).empty());
  out = both.add(row(4, 512, false));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].out_of_place && !out[0].in_place);
  EXPECT_EQ(out[0].first().bytes, 64);
  out = both.flush();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first().bytes, 512);
  // A twin that does not match (another size) does not pair.
  EXPECT_TRUE(both.add(row(6, 8, false)).empty());
  out = both.add(row(7, 16, true));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].out_of_place && !out[0].in_place);
  EXPECT_TRUE(!out[1].out_of_place && out[1].in_place);
  RowPairer off(false);
  EXPECT_EQ(off.add(row(0, 8, false)).size(), 1u);  // nothing waits when no twin comes
  EXPECT_EQ(off.add(row(1, 8, true)).size(), 1u);
  EXPECT_TRUE(off.flush().empty());
}
