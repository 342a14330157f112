// The start protocol of captured collectives (docs/design.md, "CUDA graphs") on the host executor: a capture is
// recorded as comm_capture records it (the board, the graph lane, a slot and a group from the engine), then each
// replay posts the starts from a host thread (Engine::graph_post runs core::graph_post, as a graph's start node does
// on a GPU) and waits for the slots' completions as a captured wait does. Two communicators captured in opposite
// orders on two ranks complete exact at every replay, also with the starts of one rank posted by two threads at once
// (two capture streams).
#include <gtest/gtest.h>
#include <stdlib.h>

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
#include "group.h"

namespace {

using dfccl::test::Group;
namespace core = dfccl::core;

// Every communicator of these tests makes its graph lane at init; set before any engine reads its settings.
const int graphs_on = setenv("DFCCL_GRAPHS", "1", 1);

// One captured all-reduce (int32 sum) of one rank: its start node's parameters and its buffers.
struct Node {
  std::shared_ptr<dfcclComm> ref;  // the communicator behind the handle, held for the test
  dfcclComm* comm = nullptr;
  std::shared_ptr<dfccl::Engine> engine;
  core::Desc desc{};
  uint32_t slot = 0, group = 0, index = 0, gen = 0;
  std::vector<int32_t> in, out;
};

// A rank's capture: its group per communicator (index, generation, collectives so far).
struct Capture {
  struct G {
    uint32_t index = 0, gen = 0, n = 0;
  };
  std::map<dfcclComm*, G> groups;
};

// Records an all-reduce of n elements on comm into cap, as comm_capture does (nothing is posted).
std::unique_ptr<Node> record(dfcclComm_t handle, Capture& cap, size_t n) {
  auto k = std::make_unique<Node>();
  k->ref = dfccl::api::comm_lookup(handle).comm;
  dfcclComm* comm = k->ref.get();
  k->comm = comm;
  k->engine = dfccl::engine_ref(comm);
  k->in.assign(n, 0);
  k->out.assign(n, -1);
  core::Desc d{};
  d.kind = core::Kind::AllReduce;
  d.dtype = core::DType::I32;
  d.op = core::RedOp::Sum;
  d.count = n;
  d.send = k->in.data();
  d.recv = k->out.data();
  dfccl::comm_capture_submit(comm, d, [&](const core::Desc& sd) {
    k->desc = sd;
    auto it = cap.groups.find(comm);
    if (it == cap.groups.end()) {
      Capture::G g;
      g.index = k->engine->graph_take_group(&g.gen, "graph_start_test");
      it = cap.groups.emplace(comm, g).first;
    }
    k->slot = k->engine->graph_take_slot("graph_start_test");
    k->group = it->second.index;
    k->gen = it->second.gen;
    k->index = it->second.n++;
    k->engine->graph_group_size(k->group, it->second.n);
  });
  return k;
}

void post(const Node& k) {
  k.engine->graph_post(nullptr, k.desc, k.comm->index, &k.comm->dev->graph_turn, k.slot, k.group, k.index, k.gen);
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
  return {errors, p.a[0]->engine->standin_runs() + p.a[1]->engine->standin_runs()};
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
  const Outcome o = replay_opposite(200, true);
  EXPECT_EQ(o.errors[0], "");
  EXPECT_EQ(o.errors[1], "");
  EXPECT_GT(o.standin_runs, 0u);
  std::printf("waits that ran the scheduler: %llu of 800\n", static_cast<unsigned long long>(o.standin_runs));
}

}  // namespace
