// The start protocol of captured collectives (docs/design.md, "CUDA graphs") on the host executor: a capture is
// recorded as comm_capture records it (the board, the graph lane, a slot and a group from the engine), then each
// replay posts the starts from a host thread (Engine::graph_post runs core::graph_post, as a graph's start node does
// on a GPU) and waits for the slots' completions as a captured wait does. Two communicators captured in opposite
// orders on two ranks complete exact at every replay, also with the starts of one rank posted by two threads at once
// (two capture streams).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/comm_handles.h"
#include "comm/comm_state.h"
#include "comm/comm_submit.h"
#include "engine/engine.h"
#include "engine/requests.h"
#include "group.h"
#include "match/match_board.h"
#include "watchdog.h"

namespace {

using dfccl::test::Group;
using dfccl::test::Watchdog;
namespace core = dfccl::core;

// Every communicator of these tests makes its graph lane at init; set before any engine reads its settings.
const int graphs_on = setenv("DFCCL_GRAPHS", "1", 1);

// For the tests whose waits must stand in: the daemon leaves as soon as it has nothing to run and the host launches
// the next one only 2 ms later (read when the test's engine is made), so that waits often find no daemon. Without
// this, a machine busy enough keeps one daemon running through every replay, and no wait needs to stand in.
struct SparseDaemon {
  SparseDaemon() {
    setenv("DFCCL_IDLE_NS", "0", 1);
    setenv("DFCCL_RELAUNCH_NS", "2000000", 1);
  }
  ~SparseDaemon() {
    unsetenv("DFCCL_IDLE_NS");
    unsetenv("DFCCL_RELAUNCH_NS");
  }
};

// One captured collective or transfer of one rank: its start node's parameters and (collectives) its buffers.
struct Node {
  std::shared_ptr<dfcclComm> ref;  // the communicator behind the handle, held for the test
  dfcclComm* comm = nullptr;
  std::shared_ptr<dfccl::Engine> engine;
  core::Desc desc{};
  uint64_t* turns = nullptr;
  uint32_t slot = 0, group = 0, index = 0, gen = 0;
  std::vector<int32_t> in, out;
};

// A rank's capture: its group per (communicator, turn counter): index, generation, starts so far.
struct Capture {
  struct G {
    uint32_t index = 0, gen = 0, n = 0;
  };
  std::map<std::pair<dfcclComm*, uint64_t*>, G> groups;
};

// Records starts as comm_graph.cpp's record_starts does (nothing is posted): one node each, with its slot and group.
std::vector<std::unique_ptr<Node>> record_starts(const std::shared_ptr<dfcclComm>& ref, Capture& cap,
                                                 const std::vector<dfccl::CaptureStart>& starts) {
  std::vector<std::unique_ptr<Node>> nodes;
  for (const dfccl::CaptureStart& st : starts) {
    auto k = std::make_unique<Node>();
    k->ref = ref;
    k->comm = ref.get();
    k->engine = dfccl::engine_ref(k->comm);
    k->desc = st.d;
    k->turns = st.turns;
    auto it = cap.groups.find({k->comm, st.turns});
    if (it == cap.groups.end()) {
      Capture::G g;
      g.index = k->engine->graph_take_group(&g.gen, "graph_start_test");
      it = cap.groups.emplace(std::make_pair(k->comm, st.turns), g).first;
    }
    k->slot = k->engine->graph_take_slot("graph_start_test");
    k->group = it->second.index;
    k->gen = it->second.gen;
    k->index = it->second.n++;
    k->engine->graph_group_size(k->group, it->second.n);
    nodes.push_back(std::move(k));
  }
  return nodes;
}

// Records an all-reduce of n elements on comm into cap, as comm_capture does (nothing is posted).
std::unique_ptr<Node> record(dfcclComm_t handle, Capture& cap, size_t n) {
  const std::shared_ptr<dfcclComm> ref = dfccl::api::comm_lookup(handle).comm;
  std::vector<int32_t> in(n, 0), out(n, -1);
  core::Desc d{};
  d.kind = core::Kind::AllReduce;
  d.dtype = core::DType::I32;
  d.op = core::RedOp::Sum;
  d.count = n;
  d.send = in.data();
  d.recv = out.data();
  std::vector<std::unique_ptr<Node>> nodes;
  dfccl::comm_capture_submit(
      ref.get(), d, [&](const std::vector<dfccl::CaptureStart>& starts) { nodes = record_starts(ref, cap, starts); });
  nodes[0]->in = std::move(in);  // the vectors' buffers move with them
  nodes[0]->out = std::move(out);
  return std::move(nodes[0]);
}

void post(const Node& k) {
  k.engine->graph_post(nullptr, k.desc, k.comm->index, k.turns, k.slot, k.group, k.index, k.gen, false);
}

// NCCL's form: the one node that posts and waits (core::graph_start_wait_block), run now on one thread per block.
void post_wait(const Node& k) {
  k.engine->graph_post(nullptr, k.desc, k.comm->index, k.turns, k.slot, k.group, k.index, k.gen, true);
}

// Waits up to ms for the instance of k's slot numbered `seq` (or a later one) to complete.
bool wait_done(const Node& k, uint64_t seq, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (k.engine->graph_done_seq(k.slot) < seq) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

// Replay r's input of rank `rank` for the collective numbered `which`, and the sum every rank must get.
int32_t input(int rank, int r, int which, size_t i) { return int32_t(rank * 1000 + r * 3 + which * 7 + int(i % 13)); }
int32_t expected(int nranks, int r, int which, size_t i) {
  int32_t s = 0;
  for (int q = 0; q < nranks; ++q) s += input(q, r, which, i);
  return s;
}

struct Program {
  std::vector<std::unique_ptr<Node>> a, b;  // per rank: the collective on communicator A, on B
};

// Rank 0 captures A then B, rank 1 B then A.
Program capture_opposite(Group& ga, Group& gb, size_t n) {
  Program p;
  p.a.resize(2);
  p.b.resize(2);
  std::vector<Capture> caps(2);
  p.a[0] = record(ga[0], caps[0], n);
  p.b[0] = record(gb[0], caps[0], n);
  p.b[1] = record(gb[1], caps[1], n);
  p.a[1] = record(ga[1], caps[1], n);
  return p;
}

// Replays `replays` times the opposite captures of two ranks, waiting for each replay's two instances by polling
// their completions (standins false) or as a graph's wait nodes do (Engine::graph_wait: core::graph_wait_block on one
// thread per daemon block, which runs the scheduler itself while no daemon does). Returns each rank's error and how
// many waits ran the scheduler.
struct Outcome {
  std::vector<std::string> errors;
  uint64_t standin_runs = 0;
};
Outcome replay_opposite(int replays, bool standins) {
  Group ga(2, dfcclExecutorHost), gb(2, dfcclExecutorHost);
  const size_t n = 4099;
  Program p = capture_opposite(ga, gb, n);
  std::barrier sync(2);
  std::vector<std::string> errors(2);
  auto rank_main = [&](int rank) {
    Node& a = *p.a[size_t(rank)];
    Node& b = *p.b[size_t(rank)];
    uint64_t done_a = 0, done_b = 0;  // the last completion of each slot seen
    for (int r = 0; r < replays && errors[size_t(rank)].empty(); ++r) {
      for (size_t i = 0; i < n; ++i) {
        a.in[i] = input(rank, r, 0, i);
        b.in[i] = input(rank, r, 1, i);
      }
      if (r % 2 == 1 && rank == 0) {  // two capture streams: the starts posted by two threads at once
        std::thread other([&] { post(b); });
        post(a);
        other.join();
      } else if (rank == 0) {
        post(a);
        post(b);
      } else {
        post(b);
        post(a);
      }
      if (standins) {  // the waits as captured after both starts, in the rank's order
        Node& first = rank == 0 ? a : b;
        Node& second = rank == 0 ? b : a;
        first.engine->graph_wait(nullptr, first.slot, first.comm->index);
        second.engine->graph_wait(nullptr, second.slot, second.comm->index);
      }
      if (!wait_done(a, done_a + 1, 20000) || !wait_done(b, done_b + 1, 20000)) {
        errors[size_t(rank)] = "replay " + std::to_string(r) + " did not complete within 20 s";
        break;
      }
      for (size_t i = 0; i < n && errors[size_t(rank)].empty(); ++i)
        if (a.out[i] != expected(2, r, 0, i) || b.out[i] != expected(2, r, 1, i))
          errors[size_t(rank)] = "replay " + std::to_string(r) + ": wrong element " + std::to_string(i);
      done_a = a.engine->graph_done_seq(a.slot);
      done_b = b.engine->graph_done_seq(b.slot);
      sync.arrive_and_wait();  // the inputs of the next replay only once every rank has its result
    }
  };
  std::thread t1(rank_main, 1);
  rank_main(0);
  t1.join();
  uint64_t ran = 0;  // as an application reads them
  for (dfcclComm_t c : {ga[0], ga[1]}) {
    dfcclStats_t s = DFCCL_STATS_INITIALIZER;
    EXPECT_EQ(dfcclGetStats(c, &s), dfcclSuccess);
    ran += s.standinRuns;
  }
  return {errors, ran};
}

TEST(GraphStart, OppositeCaptureOrdersReplayExact) {
  const Outcome o = replay_opposite(200, false);
  EXPECT_EQ(o.errors[0], "");
  EXPECT_EQ(o.errors[1], "");
  EXPECT_EQ(o.standin_runs, 0u);
}

// The wait nodes contend with the host's daemon launches for the engine (scheduler/owner.h): one scheduler at a time,
// so every replay stays exact, and waits that found no daemon ran the scheduler themselves.
TEST(GraphStart, WaitNodesStandInForTheDaemonExact) {
  SparseDaemon sparse;
  const Outcome o = replay_opposite(200, true);
  EXPECT_EQ(o.errors[0], "");
  EXPECT_EQ(o.errors[1], "");
  EXPECT_GT(o.standin_runs, 0u);
  std::printf("waits that ran the scheduler: %llu of 800\n", static_cast<unsigned long long>(o.standin_runs));
}

// Calls without a request (NCCL's form), each one node that posts its instance and waits for it
// (core::graph_start_wait_block): both ranks captured A then B. Even replays run A's node and then B's; odd ones run
// them at once (two capture streams), rank 1's in the other order of starting. The nodes of one slot learn their
// run's instance from their block 0 at every replay: every replay is exact, and some nodes ran the scheduler.
TEST(GraphStart, NodesThatPostAndWaitReplayExact) {
  SparseDaemon sparse;
  Group ga(2, dfcclExecutorHost), gb(2, dfcclExecutorHost);
  const size_t n = 4099;
  const int replays = 200;
  std::vector<std::unique_ptr<Node>> a(2), b(2);
  for (int rank = 0; rank < 2; ++rank) {
    Capture cap;
    a[size_t(rank)] = record(ga[rank], cap, n);
    b[size_t(rank)] = record(gb[rank], cap, n);
  }
  std::vector<std::string> errors(2);
  std::atomic<int> progress{0};
  const Watchdog watchdog(progress, 20000, [&] {
    for (dfcclComm_t c : {ga[0], ga[1]}) dfcclDebugDump(c, 1);
    for (dfcclComm_t c : {ga[0], ga[1], gb[0], gb[1]}) dfcclCommAbort(c);
  });
  std::barrier sync(2);
  auto rank_main = [&](int rank) {
    Node& ka = *a[size_t(rank)];
    Node& kb = *b[size_t(rank)];
    std::string& err = errors[size_t(rank)];
    for (int r = 0; r < replays && !watchdog.fired(); ++r) {
      for (size_t i = 0; i < n; ++i) {
        ka.in[i] = input(rank, r, 0, i);
        kb.in[i] = input(rank, r, 1, i);
      }
      if (r % 2 == 1) {
        std::thread other([&] { post_wait(rank == 0 ? kb : ka); });
        post_wait(rank == 0 ? ka : kb);
        other.join();
      } else {
        post_wait(ka);
        post_wait(kb);
      }
      for (size_t i = 0; i < n && err.empty(); ++i)
        if (ka.out[i] != expected(2, r, 0, i) || kb.out[i] != expected(2, r, 1, i))
          err = "replay " + std::to_string(r) + ": wrong element " + std::to_string(i);
      progress.fetch_add(1);
      sync.arrive_and_wait();  // the inputs of the next replay only once every rank has its result
    }
    sync.arrive_and_drop();  // a rank that stopped early (the watchdog) holds the other no longer
  };
  std::thread t1(rank_main, 1);
  rank_main(0);
  t1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_FALSE(watchdog.fired());
  const uint64_t runs = a[0]->engine->standin_runs() + a[1]->engine->standin_runs();
  EXPECT_GT(runs, 0u);
  std::printf("nodes that ran the scheduler: %llu of %d\n", static_cast<unsigned long long>(runs), 4 * replays);
}

// Eager collectives waited for by waits that stand in (Engine::wait_as_standin, what dfcclWait queues once graphs are
// captured): two communicators called in opposite orders on two ranks, each collective's wait standing in when no
// daemon runs; on odd rounds a rank's two waits run at once (two streams). Every round is exact, some waits ran the
// scheduler, and only a collective's first wait may stand in. Rounds stuck for 20 s: each engine's state is dumped
// and the communicators aborted (which ends the waits), failing the test.
TEST(GraphStart, EagerWaitsStandInExact) {
  SparseDaemon sparse;
  Group ga(2, dfcclExecutorHost), gb(2, dfcclExecutorHost);
  const size_t n = 4099;
  const int rounds = 200;
  std::vector<std::string> errors(2);
  std::vector<std::shared_ptr<dfccl::Engine>> engines;  // held: the watchdog's abort ends the handles
  for (dfcclComm_t c : {ga[0], ga[1]}) engines.push_back(dfccl::engine_ref(dfccl::api::comm_lookup(c).comm.get()));
  std::atomic<uint64_t> refused_second{0};
  std::atomic<int> progress{0};
  const Watchdog watchdog(progress, 20000, [&] {
    for (dfcclComm_t c : {ga[0], ga[1]}) dfcclDebugDump(c, 1);
    for (dfcclComm_t c : {ga[0], ga[1], gb[0], gb[1]}) dfcclCommAbort(c);
  });
  auto rank_main = [&](int rank) {
    std::vector<int32_t> in_a(n), in_b(n), out_a(n), out_b(n);
    std::string& err = errors[size_t(rank)];
    for (int r = 0; r < rounds && err.empty(); ++r) {
      for (size_t i = 0; i < n; ++i) {
        in_a[i] = input(rank, r, 0, i);
        in_b[i] = input(rank, r, 1, i);
      }
      dfcclRequest_t ra = nullptr, rb = nullptr;
      auto call = [&](bool a) {
        if (dfcclAllReduce(a ? in_a.data() : in_b.data(), a ? out_a.data() : out_b.data(), n, dfcclInt32, dfcclSum,
                           a ? ga[rank] : gb[rank], 0, nullptr, a ? &ra : &rb) != dfcclSuccess)
          err = std::string("dfcclAllReduce: ") + dfcclGetLastError(nullptr);
      };
      call(rank == 0);
      call(rank != 0);
      if (!err.empty()) break;
      auto stand_in = [&](dfcclRequest_t q) {  // false for the first: the collective completed already
        const auto state = dfccl::request_state(q, "graph_start_test");
        const auto engine = state->engine.lock();
        if (!engine) return;
        engine->wait_as_standin(state, nullptr);
        if (!engine->wait_as_standin(state, nullptr)) refused_second.fetch_add(1);
      };
      if (r % 2 == 1) {
        std::thread other([&] { stand_in(rank == 0 ? rb : ra); });
        stand_in(rank == 0 ? ra : rb);
        other.join();
      } else {
        stand_in(rank == 0 ? ra : rb);
        stand_in(rank == 0 ? rb : ra);
      }
      for (dfcclRequest_t q : {ra, rb}) {
        if (err.empty() && dfcclSynchronize(q, 20000) != dfcclSuccess)
          err = "round " + std::to_string(r) + ": a collective failed or did not finish within 20 s";
        dfcclRequestFree(q);
      }
      for (size_t i = 0; i < n && err.empty(); ++i)
        if (out_a[i] != expected(2, r, 0, i) || out_b[i] != expected(2, r, 1, i))
          err = "round " + std::to_string(r) + ": wrong element " + std::to_string(i);
      progress.fetch_add(1);
    }
  };
  std::thread t1(rank_main, 1);
  rank_main(0);
  t1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(refused_second.load(), uint64_t(4 * rounds));
  const uint64_t runs = engines[0]->standin_runs() + engines[1]->standin_runs();
  EXPECT_GT(runs, 0u);
  std::printf("eager waits that ran the scheduler: %llu of %d\n", static_cast<unsigned long long>(runs), 4 * rounds);
}

// ---- Point-to-point transfers and all-to-alls (comm_capture_p2p): each replay's transfers take their turns on the
// captured lanes of their connections, in capture order per (lane, direction, peer).

// Records transfers `parts` (root = the peer) of eager lane `lane` on comm into cap, as comm_capture_p2p does.
std::vector<std::unique_ptr<Node>> record_p2p(dfcclComm_t handle, Capture& cap, std::vector<core::Desc> parts,
                                              uint32_t lane) {
  const std::shared_ptr<dfcclComm> ref = dfccl::api::comm_lookup(handle).comm;
  std::vector<std::unique_ptr<Node>> nodes;
  dfccl::comm_capture_submit_p2p(
      ref.get(), std::move(parts), lane,
      [&](const std::vector<dfccl::CaptureStart>& starts) { nodes = record_starts(ref, cap, starts); });
  return nodes;
}

core::Desc transfer(core::Kind kind, int32_t* buf, size_t count, int peer) {
  core::Desc d{};
  d.kind = kind;
  d.dtype = core::DType::I32;
  d.op = core::RedOp::Sum;
  d.count = count;
  d.root = peer;
  if (kind == core::Kind::Send) d.send = buf;
  else d.recv = buf;
  return d;
}

// One rank's transfers: on communicator A a send to the peer before a receive from it, larger than a connection
// buffers (each rank's send waits for the other's receive: NCCL's smallest hang); on B an all-to-allv whose blocks
// differ by sender and receiver (rank q sends kBlock + 1000 q + 500 p elements to p).
constexpr size_t kA = 96 * 1024;  // 384 KiB: the host executor's connection buffers 8 x 32 KiB per lane
constexpr size_t kBlock = 3000;
size_t block(int from, int to) { return kBlock + 1000 * size_t(from) + 500 * size_t(to); }

struct P2pRank {
  std::vector<int32_t> a_send, a_recv, b_send, b_recv;
  std::vector<size_t> sdispl, rdispl;       // B's blocks, by rank
  std::vector<std::unique_ptr<Node>> a, b;  // captured starts on A, on B
};

// Captures rank `rank`'s transfers (of 2): rank 0 A then B, rank 1 B then A.
void capture_p2p(P2pRank& pr, int rank, Group& ga, Group& gb) {
  const int peer = 1 - rank;
  pr.a_send.assign(kA, 0);
  pr.a_recv.assign(kA, -1);
  size_t sn = 0, rn = 0;
  for (int q = 0; q < 2; ++q) {
    pr.sdispl.push_back(sn);
    pr.rdispl.push_back(rn);
    sn += block(rank, q);
    rn += block(q, rank);
  }
  pr.b_send.assign(sn, 0);
  pr.b_recv.assign(rn, -1);
  Capture cap;
  auto capture_a = [&] {
    pr.a = record_p2p(ga[rank], cap,
                      {transfer(core::Kind::Send, pr.a_send.data(), kA, peer),
                       transfer(core::Kind::Recv, pr.a_recv.data(), kA, peer)},
                      dfccl::kP2pUser);
  };
  auto capture_b = [&] {  // as api_coll.cpp's all_to_all orders its parts
    std::vector<core::Desc> parts;
    for (int step = 0; step < 2; ++step) {
      const int to = (rank + step) % 2, from = (rank - step + 2) % 2;
      parts.push_back(transfer(core::Kind::Send, pr.b_send.data() + pr.sdispl[size_t(to)], block(rank, to), to));
      parts.push_back(transfer(core::Kind::Recv, pr.b_recv.data() + pr.rdispl[size_t(from)], block(from, rank), from));
    }
    pr.b = record_p2p(gb[rank], cap, std::move(parts), dfccl::kP2pAllToAll);
  };
  if (rank == 0) {
    capture_a();
    capture_b();
  } else {
    capture_b();
    capture_a();
  }
}

// Replays the captures of two ranks `replays` times (as replay_opposite does); with `eager`, rank 0 also sends on A
// eagerly before each replay's starts and rank 1 receives it after them: eager transfers keep their own order beside
// the captured ones. Returns each rank's error and how many waits ran the scheduler.
Outcome replay_p2p(int replays, bool standins, bool eager) {
  std::vector<P2pRank> ranks(2);  // first: its buffers outlive the engines, which its nodes hold
  Group ga(2, dfcclExecutorHost), gb(2, dfcclExecutorHost);
  capture_p2p(ranks[0], 0, ga, gb);
  capture_p2p(ranks[1], 1, ga, gb);
  std::barrier sync(2);
  std::vector<std::string> errors(2);
  // A replay stuck for 30 s (a wait standing in never returns by itself): abort the communicators, which ends it.
  std::atomic<int> replayed{0};
  const Watchdog watchdog(replayed, 30000, [&] {
    for (dfcclComm_t c : {ga[0], ga[1], gb[0], gb[1]}) dfcclCommAbort(c);
  });
  auto rank_main = [&](int rank) {
    P2pRank& pr = ranks[size_t(rank)];
    const int peer = 1 - rank;
    std::vector<Node*> order;  // capture order
    for (auto* list : rank == 0 ? std::vector{&pr.a, &pr.b} : std::vector{&pr.b, &pr.a})
      for (auto& k : *list) order.push_back(k.get());
    std::vector<uint64_t> done(order.size(), 0);  // the last completion of each slot seen
    std::vector<int32_t> side(4099, -1);          // the eager transfer's buffer
    std::string& err = errors[size_t(rank)];
    for (int r = 0; r < replays && err.empty(); ++r) {
      for (size_t i = 0; i < kA; ++i) pr.a_send[i] = input(rank, r, 0, i);
      for (int q = 0; q < 2; ++q)
        for (size_t i = 0; i < block(rank, q); ++i) pr.b_send[pr.sdispl[size_t(q)] + i] = input(rank, r, 10 + q, i);
      dfcclRequest_t side_req = nullptr;
      if (eager && rank == 0) {
        for (size_t i = 0; i < side.size(); ++i) side[i] = input(rank, r, 5, i);
        if (dfcclSend(side.data(), side.size(), dfcclInt32, peer, ga[rank], 0, nullptr, &side_req) != dfcclSuccess)
          err = std::string("dfcclSend: ") + dfcclGetLastError(nullptr);
      }
      if (r % 2 == 1 && rank == 0) {  // two capture streams: A's starts and B's posted by two threads at once
        std::thread other([&] {
          for (auto& k : pr.b) post(*k);
        });
        for (auto& k : pr.a) post(*k);
        other.join();
      } else {
        for (Node* k : order) post(*k);
      }
      if (eager && rank == 1 &&
          dfcclRecv(side.data(), side.size(), dfcclInt32, peer, ga[rank], 0, nullptr, &side_req) != dfcclSuccess)
        err = std::string("dfcclRecv: ") + dfcclGetLastError(nullptr);
      if (standins)
        for (Node* k : order) k->engine->graph_wait(nullptr, k->slot, k->comm->index);
      for (size_t j = 0; j < order.size() && err.empty(); ++j)
        if (!wait_done(*order[j], done[j] + 1, 20000))
          err = "replay " + std::to_string(r) + " did not complete within 20 s";
      if (side_req) {
        if (err.empty() && dfcclSynchronize(side_req, 20000) != dfcclSuccess)
          err = "replay " + std::to_string(r) + ": the eager transfer failed or did not finish within 20 s";
        dfcclRequestFree(side_req);
      }
      if (!err.empty()) break;
      for (size_t i = 0; i < kA && err.empty(); ++i)
        if (pr.a_recv[i] != input(peer, r, 0, i))
          err = "replay " + std::to_string(r) + ": wrong A element " + std::to_string(i);
      for (int q = 0; q < 2 && err.empty(); ++q)
        for (size_t i = 0; i < block(q, rank) && err.empty(); ++i)
          if (pr.b_recv[pr.rdispl[size_t(q)] + i] != input(q, r, 10 + rank, i))
            err = "replay " + std::to_string(r) + ": wrong element " + std::to_string(i) + " from rank " +
                  std::to_string(q) + " in the all-to-allv";
      for (size_t i = 0; eager && rank == 1 && i < side.size() && err.empty(); ++i)
        if (side[i] != input(peer, r, 5, i)) err = "replay " + std::to_string(r) + ": wrong eager element";
      for (size_t j = 0; j < order.size(); ++j) done[j] = order[j]->engine->graph_done_seq(order[j]->slot);
      if (rank == 0) replayed.fetch_add(1);
      sync.arrive_and_wait();  // the inputs of the next replay only once every rank has its result
    }
    if (!err.empty()) {  // the other rank may wait for this one's transfers or posts: end them
      dfcclCommAbort(ga[rank]);
      dfcclCommAbort(gb[rank]);
    }
    sync.arrive_and_drop();  // and not at the barrier
  };
  std::thread t1(rank_main, 1);
  rank_main(0);
  t1.join();
  return {errors, ranks[0].a[0]->engine->standin_runs() + ranks[1].a[0]->engine->standin_runs()};
}

// Both ranks send before they receive, and rank 0 captured A before B, rank 1 B before A: every replay is exact.
TEST(GraphStartP2p, OppositeCaptureOrdersReplayExact) {
  const Outcome o = replay_p2p(200, false, false);
  EXPECT_EQ(o.errors[0], "");
  EXPECT_EQ(o.errors[1], "");
}

TEST(GraphStartP2p, WaitNodesStandInForTheDaemonExact) {
  SparseDaemon sparse;
  const Outcome o = replay_p2p(200, true, false);
  EXPECT_EQ(o.errors[0], "");
  EXPECT_EQ(o.errors[1], "");
  EXPECT_GT(o.standin_runs, 0u);
}

// A rank's eager transfers with its peer on A, called before one replay's starts on rank 0 and after them on rank 1,
// match the peer's eager ones: captured transfers keep an order of their own.
TEST(GraphStartP2p, EagerTransfersBesideReplaysExact) {
  const Outcome o = replay_p2p(100, false, true);
  EXPECT_EQ(o.errors[0], "");
  EXPECT_EQ(o.errors[1], "");
}

// Captures that disagree between the ranks are refused at capture, naming the transfer, and fail the communicator.
TEST(GraphStartP2p, CapturedCountMismatchIsNamed) {
  Group g(2, dfcclExecutorHost);
  std::vector<int32_t> buf(64);
  Capture c0, c1;
  record_p2p(g[0], c0, {transfer(core::Kind::Send, buf.data(), 64, 1)}, dfccl::kP2pUser);
  std::string what;
  try {
    record_p2p(g[1], c1, {transfer(core::Kind::Recv, buf.data(), 32, 0)}, dfccl::kP2pUser);
  } catch (const std::exception& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("captured dfcclSend #0 from rank 0 to rank 1"), std::string::npos) << what;
  EXPECT_NE(what.find("argument 'count' is 64 on the sender"), std::string::npos) << what;
}

}  // namespace
