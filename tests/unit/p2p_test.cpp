// Point-to-point and all-to-all on the host executor: exact transfers for every type, count and rank count; the
// crossed [send, recv] programs that hang a blocking library; mismatched sides; bad arguments.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "forked_rank.h"
#include "group.h"

namespace dfccl::test {
namespace {

constexpr size_t kCounts[] = {0, 1, 17, 1009, size_t(1) << 18};  // empty, one, odd, prime, several slots

// The bytes rank `rank` sends in a transfer tagged `tag` (distinct per transfer, so crossed data is seen).
std::vector<uint8_t> payload(dfcclDataType_t t, size_t count, int rank, uint64_t tag) {
  std::vector<uint8_t> b(count * type_size(t));
  fill_input(b.data(), count, dfcclMax, t, rank, tag * 1000003);
  return b;
}

// Waits for every request (freeing it) and returns the first failure's message ("" if none).
std::string finish(std::vector<dfcclRequest_t>& reqs, int timeout_ms) {
  std::string err;
  for (dfcclRequest_t q : reqs) {
    const dfcclResult_t r = dfcclSynchronize(q, timeout_ms);
    if (r != dfcclSuccess && err.empty()) err = std::string(dfcclGetErrorString(r)) + ": " + dfcclGetLastError(nullptr);
    dfcclRequestFree(q);
  }
  reqs.clear();
  return err;
}

class P2p : public ::testing::TestWithParam<int> {};

// Every rank sends to rank + 1 and to itself, and receives from rank - 1 and from itself; each rank posts its four
// calls in its own random order, without grouping.
TEST_P(P2p, RingAndSelfExact) {
  const int n = GetParam();
  Group g(n, dfcclExecutorHost);
  std::mt19937 rng{static_cast<uint32_t>(n)};
  uint64_t tag = 0;
  for (int t = 0; t < dfcclNumTypes; ++t)
    for (size_t count : kCounts) {
      const dfcclDataType_t type = dfcclDataType_t(t);
      ++tag;
      std::vector<std::vector<uint8_t>> send(static_cast<size_t>(n)), from_prev(send), from_self(send);
      std::vector<dfcclRequest_t> reqs;
      for (int r = 0; r < n; ++r) {
        send[size_t(r)] = payload(type, count, r, tag);
        from_prev[size_t(r)].assign(send[size_t(r)].size(), 0xee);
        from_self[size_t(r)].assign(send[size_t(r)].size(), 0xee);
        const int next = (r + 1) % n, prev = (r + n - 1) % n;
        std::vector<int> order = {0, 1, 2, 3};
        std::shuffle(order.begin(), order.end(), rng);
        for (int k : order) {
          dfcclRequest_t q = nullptr;
          const void* s = send[size_t(r)].data();
          switch (k) {
            case 0: DFCCL_ASSERT_OK(dfcclSend(s, count, type, next, g[r], 0, nullptr, &q)); break;
            case 1: DFCCL_ASSERT_OK(dfcclSend(s, count, type, r, g[r], 0, nullptr, &q)); break;
            case 2:
              DFCCL_ASSERT_OK(dfcclRecv(from_prev[size_t(r)].data(), count, type, prev, g[r], 0, nullptr, &q));
              break;
            default: DFCCL_ASSERT_OK(dfcclRecv(from_self[size_t(r)].data(), count, type, r, g[r], 0, nullptr, &q));
          }
          reqs.push_back(q);
        }
      }
      const std::string err = finish(reqs, 60000);
      ASSERT_TRUE(err.empty()) << type_name(type) << " x " << count << ": " << err;
      for (int r = 0; r < n; ++r) {
        const int prev = (r + n - 1) % n;
        EXPECT_EQ(from_prev[size_t(r)], send[size_t(prev)])
            << "rank " << r << " from " << prev << ", " << type_name(type) << " x " << count;
        EXPECT_EQ(from_self[size_t(r)], send[size_t(r)])
            << "rank " << r << " from itself, " << type_name(type) << " x " << count;
      }
    }
}

// dfcclAllToAll of count elements of type t per pair on every rank at once, all ranks' transfers in flight together
// (payloads tagged `tag`); checks every block that each rank received and returns the first failure ("" if none).
std::string all_to_all_exact(Group& g, dfcclDataType_t t, size_t count, uint64_t tag) {
  const int n = g.size();
  const size_t es = type_size(t);
  std::vector<std::vector<uint8_t>> send(static_cast<size_t>(n)), recv(send);
  std::vector<dfcclRequest_t> reqs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    send[size_t(r)] = payload(t, count * size_t(n), r, tag);
    recv[size_t(r)].assign(send[size_t(r)].size(), 0xee);
    if (dfcclAllToAll(send[size_t(r)].data(), recv[size_t(r)].data(), count, t, g[r], 0, nullptr, &reqs[size_t(r)]) !=
        dfcclSuccess)
      return dfcclGetLastError(nullptr);
  }
  if (std::string err = finish(reqs, 60000); !err.empty()) return err;
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p)
      if (std::memcmp(recv[size_t(r)].data() + size_t(p) * count * es, send[size_t(p)].data() + size_t(r) * count * es,
                      count * es) != 0)
        return "rank " + std::to_string(r) + ": the block from rank " + std::to_string(p) + " is wrong";
  return "";
}

// dfcclAllToAll, and dfcclAllToAllv with uneven blocks (some empty): block p of rank r's output is rank p's block r.
TEST_P(P2p, AllToAllExact) {
  const int n = GetParam();
  Group g(n, dfcclExecutorHost);
  for (int t = 0; t < dfcclNumTypes; ++t)
    for (size_t count : kCounts)
      ASSERT_EQ(all_to_all_exact(g, dfcclDataType_t(t), count, count), "")
          << type_name(dfcclDataType_t(t)) << " x " << count;
}

// Rank s sends (s * 5 + d * 3) % 7 * 301 elements to rank d (0 for some pairs), packed in rank order with a gap.
TEST_P(P2p, AllToAllvUnevenExact) {
  const int n = GetParam();
  Group g(n, dfcclExecutorHost);
  auto elems = [](int s, int d) { return size_t((s * 5 + d * 3) % 7) * 301; };
  const dfcclDataType_t type = dfcclFloat64;
  std::vector<std::vector<size_t>> scount(static_cast<size_t>(n)), sdisp(scount), rcount(scount), rdisp(scount);
  std::vector<std::vector<double>> send(static_cast<size_t>(n)), recv(send);
  for (int r = 0; r < n; ++r) {
    size_t so = 0, ro = 0;
    for (int p = 0; p < n; ++p) {
      scount[size_t(r)].push_back(elems(r, p));
      sdisp[size_t(r)].push_back(so);
      so += elems(r, p) + 3;
      rcount[size_t(r)].push_back(elems(p, r));
      rdisp[size_t(r)].push_back(ro);
      ro += elems(p, r) + 5;
    }
    send[size_t(r)].resize(so);
    for (size_t i = 0; i < so; ++i) send[size_t(r)][i] = double(r * 1000003 + int(i));
    recv[size_t(r)].assign(ro, -1.0);
  }
  std::vector<dfcclRequest_t> reqs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    DFCCL_ASSERT_OK(dfcclAllToAllv(send[size_t(r)].data(), scount[size_t(r)].data(), sdisp[size_t(r)].data(),
                                   recv[size_t(r)].data(), rcount[size_t(r)].data(), rdisp[size_t(r)].data(), type,
                                   g[r], 0, nullptr, &reqs[size_t(r)]));
  ASSERT_EQ(finish(reqs, 60000), "");
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) {
      const double* got = recv[size_t(r)].data() + rdisp[size_t(r)][size_t(p)];
      const double* want = send[size_t(p)].data() + sdisp[size_t(p)][size_t(r)];
      for (size_t i = 0; i < elems(p, r); ++i) ASSERT_EQ(got[i], want[i]) << "rank " << r << " from " << p << " @" << i;
      EXPECT_EQ(got[elems(p, r)], -1.0) << "rank " << r << ": the gap after rank " << p << "'s block was written";
    }
}

// Two ranks each post [send, recv] to the other, no grouping, messages far larger than a connection's FIFO: a send
// can finish only after the peer's receive has started, which its own send precedes. Preemptive: every trial
// completes. Blocking (no preemption, like NCCL): the first trial hangs, which the wait's timeout detects; the abort
// recovers from it.
void crossed_trials(dfcclMode_t mode, int trials, int timeout_ms, int* completed) {
  Group g(2, dfcclExecutorHost, mode);
  std::mt19937 rng{7};
  *completed = 0;
  for (int k = 0; k < trials; ++k) {
    const size_t count = (size_t(1) << 18) + rng() % 5000;  // 1 MiB and more of int32: many FIFOs' worth
    std::vector<std::vector<uint8_t>> send(2), recv(2);
    std::vector<dfcclRequest_t> reqs;
    for (int r = 0; r < 2; ++r) {
      send[size_t(r)] = payload(dfcclInt32, count, r, uint64_t(k));
      recv[size_t(r)].assign(send[size_t(r)].size(), 0);
      dfcclRequest_t s = nullptr, q = nullptr;
      DFCCL_ASSERT_OK(dfcclSend(send[size_t(r)].data(), count, dfcclInt32, 1 - r, g[r], 0, nullptr, &s));
      DFCCL_ASSERT_OK(dfcclRecv(recv[size_t(r)].data(), count, dfcclInt32, 1 - r, g[r], 0, nullptr, &q));
      reqs.push_back(s);
      reqs.push_back(q);
    }
    int done = 0;
    for (dfcclRequest_t q : reqs) done += dfcclSynchronize(q, timeout_ms) == dfcclSuccess;
    if (done < 4) {
      for (int r = 0; r < 2; ++r) dfcclCommAbort(g[r]);
      for (dfcclRequest_t q : reqs) EXPECT_NE(dfcclSynchronize(q, 2000), dfcclTimeout) << "the abort released it";
      for (dfcclRequest_t q : reqs) dfcclRequestFree(q);
      g.comms.clear();  // aborted: nothing to destroy
      return;
    }
    for (dfcclRequest_t q : reqs) dfcclRequestFree(q);
    ASSERT_EQ(recv[0], send[1]) << "trial " << k;
    ASSERT_EQ(recv[1], send[0]) << "trial " << k;
    ++*completed;
  }
}

TEST(P2pCrossed, PreemptiveAlwaysCompletes) {
  int completed = 0;
  crossed_trials(dfcclModePreemptive, 100, 60000, &completed);
  EXPECT_EQ(completed, 100);
}

TEST(P2pCrossed, BlockingModeHangs) {
  int completed = -1;
  crossed_trials(dfcclModeBlocking, 3, 1000, &completed);
  EXPECT_EQ(completed, 0) << "a blocking library cannot complete [send, recv] against [send, recv]";
}

// A receive smaller than its send (and a type that differs), in either order of arrival: both sides fail with
// dfcclInvalidUsage naming the field and both values, within 2 s, and nothing lands past the receive buffer.
void mismatch(bool receiver_first, size_t send_count, dfcclDataType_t recv_type, const char* field) {
  Group g(2, dfcclExecutorHost);
  const size_t recv_count = 50;
  std::vector<int32_t> send(send_count, 7), recv(recv_count + 16, -1);
  dfcclRequest_t q = nullptr;
  dfcclResult_t second = dfcclSuccess;
  if (receiver_first) {
    DFCCL_ASSERT_OK(dfcclRecv(recv.data(), recv_count, recv_type, 0, g[1], 0, nullptr, &q));
    second = dfcclSend(send.data(), send_count, dfcclInt32, 1, g[0], 0, nullptr, nullptr);
  } else {
    DFCCL_ASSERT_OK(dfcclSend(send.data(), send_count, dfcclInt32, 1, g[0], 0, nullptr, &q));
    second = dfcclRecv(recv.data(), recv_count, recv_type, 0, g[1], 0, nullptr, nullptr);
  }
  const std::string message = dfcclGetLastError(nullptr);
  EXPECT_EQ(second, dfcclInvalidUsage) << message;
  EXPECT_NE(message.find(field), std::string::npos) << message;
  EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  // The side queued first fails too; a send small enough to land in the connection's FIFO may have finished before
  // the mismatch was known, and learns it from the asynchronous error (as a broadcast's root does).
  const auto t0 = std::chrono::steady_clock::now();
  const dfcclResult_t queued = dfcclSynchronize(q, 2000);
  if (receiver_first) EXPECT_EQ(queued, dfcclInvalidUsage) << "the receive already queued fails too";
  else EXPECT_TRUE(queued == dfcclInvalidUsage || queued == dfcclSuccess) << dfcclGetErrorString(queued);
  for (int r = 0; r < 2; ++r) {
    dfcclResult_t async = dfcclSuccess;
    while (dfcclCommGetAsyncError(g[r], &async) == dfcclSuccess && async == dfcclSuccess &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(async, dfcclInvalidUsage) << "rank " << r;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  dfcclRequestFree(q);
  for (size_t i = recv_count; i < recv.size(); ++i) ASSERT_EQ(recv[i], -1) << "written past the receive buffer";
}

TEST(P2pMismatch, ReceiveSmallerThanSend) {
  mismatch(false, 60, dfcclInt32, "argument 'count' is 60 on the sender (rank 0) but 50 on the receiver (rank 1)");
  mismatch(true, 60, dfcclInt32, "argument 'count' is 60 on the sender (rank 0) but 50 on the receiver (rank 1)");
}

TEST(P2pMismatch, DataType) {
  mismatch(false, 50, dfcclFloat32, "argument 'datatype' is dfcclInt32 on the sender");
  mismatch(true, 50, dfcclUint32, "argument 'datatype' is dfcclInt32 on the sender");
}

// Each bad argument is refused with dfcclInvalidArgument naming it; nothing is queued, and the communicator still
// works afterwards.
TEST(P2pErrors, BadArgumentsNamed) {
  Group g(2, dfcclExecutorHost);
  std::vector<int32_t> a(64), b(64);
  auto refused = [](dfcclResult_t r, const char* name) {
    EXPECT_EQ(r, dfcclInvalidArgument) << name;
    const std::string m = dfcclGetLastError(nullptr);
    EXPECT_NE(m.find(name), std::string::npos) << m;
  };
  refused(dfcclSend(a.data(), 4, dfcclInt32, 2, g[0], 0, nullptr, nullptr), "argument 'peer' = 2");
  refused(dfcclRecv(a.data(), 4, dfcclInt32, -1, g[0], 0, nullptr, nullptr), "argument 'peer' = -1");
  refused(dfcclSend(a.data(), size_t(-4), dfcclInt32, 1, g[0], 0, nullptr, nullptr), "argument 'count'");
  refused(dfcclSend(nullptr, 4, dfcclInt32, 1, g[0], 0, nullptr, nullptr), "argument 'sendbuff' is NULL");
  refused(dfcclRecv(a.data(), 4, dfcclDataType_t(42), 1, g[0], 0, nullptr, nullptr), "argument 'datatype'");
  refused(dfcclSend(reinterpret_cast<char*>(a.data()) + 1, 4, dfcclInt32, 1, g[0], 0, nullptr, nullptr),
          "argument 'sendbuff'");
  refused(dfcclAllToAll(a.data(), a.data() + 4, 8, dfcclInt32, g[0], 0, nullptr, nullptr), "overlap");
  const size_t counts[2] = {4, 4}, displs[2] = {0, 4}, bad_counts[2] = {4, size_t(-1)};
  refused(dfcclAllToAllv(a.data(), nullptr, displs, b.data(), counts, displs, dfcclInt32, g[0], 0, nullptr, nullptr),
          "argument 'sendcounts' is NULL");
  refused(dfcclAllToAllv(a.data(), counts, displs, b.data(), counts, nullptr, dfcclInt32, g[0], 0, nullptr, nullptr),
          "argument 'rdispls' is NULL");
  refused(dfcclAllToAllv(a.data(), counts, displs, b.data(), bad_counts, displs, dfcclInt32, g[0], 0, nullptr, nullptr),
          "argument 'recvcounts[1]'");
  // Receive blocks that overlap (the later write would win), and a block whose displacement and count are each
  // valid but whose end is not.
  const size_t overlapping[2] = {0, 3}, far[2] = {0, (size_t(1) << 48) - 2};
  refused(
      dfcclAllToAllv(a.data(), counts, displs, b.data(), counts, overlapping, dfcclInt32, g[0], 0, nullptr, nullptr),
      "the blocks of ranks 0 and 1 in 'recvbuff' overlap: 'rdispls[0]' = 0 with 'recvcounts[0]' = 4");
  refused(dfcclAllToAllv(a.data(), counts, far, b.data(), counts, displs, dfcclInt32, g[0], 0, nullptr, nullptr),
          "arguments 'sdispls[1]' = 281474976710654 and 'sendcounts[1]' = 4 end");
  refused(dfcclAllToAllv(a.data(), counts, displs, b.data(), counts, far, dfcclInt32, g[0], 0, nullptr, nullptr),
          "arguments 'rdispls[1]' = 281474976710654 and 'recvcounts[1]' = 4 end");
  // Still usable: the refused calls took no key.
  std::vector<dfcclRequest_t> reqs(4);
  for (int r = 0; r < 2; ++r) {
    DFCCL_ASSERT_OK(dfcclSend(a.data(), 4, dfcclInt32, 1 - r, g[r], 0, nullptr, &reqs[size_t(r) * 2]));
    DFCCL_ASSERT_OK(dfcclRecv(b.data() + 8 * r, 4, dfcclInt32, 1 - r, g[r], 0, nullptr, &reqs[size_t(r) * 2 + 1]));
  }
  EXPECT_EQ(finish(reqs, 10000), "");
  // Send blocks may overlap (read twice): each rank sends its first 4 elements to both ranks.
  std::vector<std::vector<int32_t>> in(2, std::vector<int32_t>(8)), out(2, std::vector<int32_t>(8, -1));
  const size_t same[2] = {0, 0};
  std::vector<dfcclRequest_t> all(2);
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 8; ++i) in[size_t(r)][size_t(i)] = 10 * r + i;
    DFCCL_ASSERT_OK(dfcclAllToAllv(in[size_t(r)].data(), counts, same, out[size_t(r)].data(), counts, displs,
                                   dfcclInt32, g[r], 0, nullptr, &all[size_t(r)]));
  }
  EXPECT_EQ(finish(all, 10000), "");
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(out[size_t(r)], (std::vector<int32_t>{0, 1, 2, 3, 10, 11, 12, 13})) << "rank " << r;
}

// Stderr into a file while it lives (the library's warnings and dumps go to stderr); text() reads what came so far,
// path() names the file.
class StderrToFile {
 public:
  explicit StderrToFile(const std::string& name)
      : path_(testing::TempDir() + "dfccl-p2p-" + name + "-" + std::to_string(getpid()) + ".txt") {
    std::fflush(stderr);
    saved_ = dup(2);
    sink_ = std::fopen(path_.c_str(), "w");
    if (sink_) dup2(fileno(sink_), 2);
  }
  ~StderrToFile() {
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    if (sink_) std::fclose(sink_);
    std::remove(path_.c_str());
  }
  StderrToFile(const StderrToFile&) = delete;
  StderrToFile& operator=(const StderrToFile&) = delete;
  bool ok() const { return sink_ != nullptr; }
  const std::string& path() const { return path_; }
  std::string text() const {
    std::fflush(stderr);
    return dfccl::test::read_file(path_, 0);
  }

 private:
  std::string path_;
  int saved_ = -1;
  std::FILE* sink_ = nullptr;
};

// A send whose receiver has not posted its receive is named by the stuck warning, with the missing side; once the
// receive comes, both complete.
TEST(P2pStuck, TheWarningNamesTheMissingReceive) {
  // The warning goes to stderr (where the log of this process already goes, or will): stderr into a file for the test.
  StderrToFile log("stuck");
  ASSERT_TRUE(log.ok());
  setenv("DFCCL_STUCK_WARN_S", "1", 1);
  {
    Group g(2, dfcclExecutorHost);
    const size_t count = size_t(1) << 20;  // far more than the connection's FIFO: the send cannot finish alone
    std::vector<int32_t> in(count, 5), out(count, 0);
    std::vector<dfcclRequest_t> reqs(2);
    DFCCL_ASSERT_OK(dfcclSend(in.data(), count, dfcclInt32, 1, g[0], 0, nullptr, &reqs[0]));
    const std::string text = dfccl::test::wait_stuck_warning(log.path());
    EXPECT_NE(text.find("dfcclSend #0 to rank 1, not posted yet by rank 1 (its receive)"), std::string::npos) << text;
    int missing[4] = {-1, -1, -1, -1}, n = -1;
    DFCCL_ASSERT_OK(dfcclRequestGetMissingRanks(reqs[0], missing, 4, &n));
    EXPECT_EQ(n, 1);
    EXPECT_EQ(missing[0], 1);
    DFCCL_ASSERT_OK(dfcclRecv(out.data(), count, dfcclInt32, 0, g[1], 0, nullptr, &reqs[1]));
    ASSERT_EQ(dfcclSynchronize(reqs[0], 60000), dfcclSuccess);
    DFCCL_ASSERT_OK(dfcclRequestGetMissingRanks(reqs[0], missing, 4, &n));
    EXPECT_EQ(n, 0) << "a finished request misses nobody";
    EXPECT_EQ(finish(reqs, 60000), "");
    EXPECT_EQ(out, in);
  }
  unsetenv("DFCCL_STUCK_WARN_S");
}

// Whether c's connections go through the network (DFCCL_NET_FORCE=1): those are all made at init, full.
bool on_network(dfcclComm_t c) {
  dfcclCommInfo_t info = DFCCL_COMM_INFO_INITIALIZER;
  EXPECT_EQ(dfcclCommGetInfo(c, &info), dfcclSuccess);
  return info.transport == dfcclTransportNetwork;
}

// What dfcclDebugDump(c, 0) writes to stderr.
std::string debug_dump_of(dfcclComm_t c) {
  StderrToFile out("dump");
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(dfcclDebugDump(c, 0), dfcclSuccess);
  return out.text();
}

int connections(dfcclComm_t c) {
  dfcclCommInfo_t info = DFCCL_COMM_INFO_INITIALIZER;
  EXPECT_EQ(dfcclCommGetInfo(c, &info), dfcclSuccess);
  return info.p2pConnections;
}

// A connection is made by the first call with a rank, on the calling side alone: rank 0 of 4 is connected with
// rank 1 once its send is queued, before rank 1 has called anything; rank 1's receive finds it; ranks 2 and 3,
// which have not communicated, have no connection until the all-to-all.
TEST(P2pArena, AConnectionIsMadeByTheFirstCallWithARank) {
  Group g(4, dfcclExecutorHost);
  if (on_network(g[0])) GTEST_SKIP() << "network connections are all made at init";
  for (int r = 0; r < 4; ++r) EXPECT_EQ(connections(g[r]), 0) << "rank " << r << " before any transfer";
  const size_t count = size_t(1) << 18;  // several FIFOs' worth: the send cannot finish before the receive
  std::vector<uint8_t> in = payload(dfcclInt32, count, 0, 1), out(in.size(), 0);
  std::vector<dfcclRequest_t> reqs(2);
  DFCCL_ASSERT_OK(dfcclSend(in.data(), count, dfcclInt32, 1, g[0], 0, nullptr, &reqs[0]));
  EXPECT_EQ(connections(g[0]), 1);
  EXPECT_EQ(connections(g[1]), 0);
  const std::string dump = debug_dump_of(g[0]);  // the shape, as the dump tells it (1 channel of 32 KiB slots)
  EXPECT_NE(dump.find("rank 0 of 4: point-to-point arena"), std::string::npos) << dump;
  EXPECT_NE(dump.find("connected with 1 (1 x 32 KiB)"), std::string::npos) << dump;
  DFCCL_ASSERT_OK(dfcclRecv(out.data(), count, dfcclInt32, 0, g[1], 0, nullptr, &reqs[1]));
  EXPECT_EQ(connections(g[1]), 1);
  ASSERT_EQ(finish(reqs, 60000), "");
  EXPECT_EQ(out, in);
  EXPECT_EQ(connections(g[2]), 0);
  EXPECT_EQ(connections(g[3]), 0);
  ASSERT_EQ(all_to_all_exact(g, dfcclInt32, 4099, 2), "");
  for (int r = 0; r < 4; ++r) EXPECT_EQ(connections(g[r]), 4) << "rank " << r << " after the all-to-all";
}

// 8 ranks, connections of 4 channels of 4 x 128 KiB slots, and an arena of 12 MiB per rank where all eight full
// connections would need 33 MiB: the first connection (0 with 1) is full, the all-to-all's connections share what
// is left (fewer channels of 32 KiB slots), each rank keeps the smallest connection for every rank not yet
// connected. Transfers over connections of every shape, all in flight together, are exact, and each rank's memory
// for them stays the arena.
TEST(P2pArena, ConnectionsOfDifferentSizesInOneArenaAreExact) {
  struct Settings {  // for this test's engine only
    Settings() {
      setenv("DFCCL_BLOCKS", "4", 1);
      setenv("DFCCL_P2P_CHANNELS", "4", 1);
      setenv("DFCCL_P2P_ARENA_BYTES", "12582912", 1);
      setenv("DFCCL_SLOT_BYTES", "131072", 1);
      setenv("DFCCL_SLOTS", "4", 1);
      setenv("DFCCL_MIN_CHAN_BYTES", "4096", 1);
    }
    ~Settings() {
      for (const char* v : {"DFCCL_BLOCKS", "DFCCL_P2P_CHANNELS", "DFCCL_P2P_ARENA_BYTES", "DFCCL_SLOT_BYTES",
                            "DFCCL_SLOTS", "DFCCL_MIN_CHAN_BYTES"})
        unsetenv(v);
    }
  } settings;
  {
    Group g(8, dfcclExecutorHost);
    if (on_network(g[0])) GTEST_SKIP() << "network connections are all made at init";
    dfcclCommInfo_t info = DFCCL_COMM_INFO_INITIALIZER;
    DFCCL_ASSERT_OK(dfcclCommGetInfo(g[0], &info));
    EXPECT_GE(info.p2pBytes, size_t(12) << 20);
    EXPECT_LT(info.p2pBytes, (size_t(12) << 20) + (size_t(64) << 10)) << "the arena and the lane states only";
    const size_t count = size_t(1) << 18;
    std::vector<uint8_t> in = payload(dfcclInt32, count, 0, 3), out(in.size(), 0);
    std::vector<dfcclRequest_t> reqs(2);
    DFCCL_ASSERT_OK(dfcclSend(in.data(), count, dfcclInt32, 1, g[0], 0, nullptr, &reqs[0]));
    DFCCL_ASSERT_OK(dfcclRecv(out.data(), count, dfcclInt32, 0, g[1], 0, nullptr, &reqs[1]));
    ASSERT_EQ(finish(reqs, 60000), "");
    EXPECT_EQ(out, in);
    for (int round = 0; round < 3; ++round)
      ASSERT_EQ(all_to_all_exact(g, dfcclInt32, count / 8 + 17 * size_t(round), 4), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, P2p, ::testing::Values(1, 2, 3, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace dfccl::test
