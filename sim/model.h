// Execution models of the deadlock-risk simulator and the exact deadlock detector (docs/simulator.md, "Models").
//
//   (a) queue        one FIFO per GPU: collectives run one at a time in submission order; a collective completes when
//                    it is at the head of every member's queue; a sync waits until the GPU's queue is empty.
//   (b) stream       one stream per communicator: a collective completes when every member has submitted it; a sync
//                    waits until every collective submitted by that GPU has completed.
//   (c) stream-limit (b) with at most R resident (submitted, not completed) collectives per GPU; a submission beyond R
//                    waits until one of them completes.
//   (d) dfccl        preemption: a sync never waits on collectives; a collective completes when every member has
//                    submitted it.
//
// Every model is run to quiescence (no rank can take a step); a trial deadlocks when some rank is then unfinished. The
// wait-for graph of that final state is built (rank -> the collective it waits for -> each member that has not yet
// reached it) and a cycle is searched by depth-first search and reported.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scenario.h"

namespace dfccl::sim {

// The scenario vocabulary (common/scenario.h): what the simulator runs.
using scenario::Bernoulli;
using scenario::kSync;
using scenario::Layout;
using scenario::Programs;
using scenario::Scenario;
using scenario::ScenarioParams;
using scenario::Step;

enum class Model : uint8_t { queue, stream, stream_limit, dfccl };

struct ModelSpec {
  Model model = Model::queue;
  int limit = 0;  // R for stream_limit (>= 1), ignored otherwise

  // Accepts a|queue, b|stream, c|stream-limit (limit from the argument), d|dfccl. Throws std::invalid_argument.
  static ModelSpec parse(std::string_view name, int limit);
  std::string letter() const;  // "a", "b", "c", "d"
  std::string name() const;    // "queue", "stream", "stream-limit(R=4)", "dfccl"
};

// Why a rank cannot take its next step.
enum class WaitKind : uint8_t {
  queue_head,  // (a): its queue head is not at the head of every member's queue
  sync,        // (a)-(c): a sync waits for collectives it submitted
  slot,        // (c): a submission waits for one of its R resident collectives to complete
};
std::string_view to_string(WaitKind kind);

// One edge of the wait-for graph: `from` waits for `collective`, which `to` has not reached (submitted, or for (a)
// brought to the head of its queue).
struct WaitEdge {
  int from = -1;
  int to = -1;
  Step collective = -1;
  WaitKind kind = WaitKind::sync;
};

struct Cycle {
  std::vector<WaitEdge> edges;  // edges[i].to == edges[i+1].from, last.to == first.from
  std::vector<int> ranks() const;
  // "rank 0 [sync, waits for g1#0(g:0,1)] -> rank 1 [queue head g0#3 ...] -> rank 0"; at most max_hops hops shown.
  std::string describe(const Scenario& s, size_t max_hops = SIZE_MAX) const;
};

struct Outcome {
  bool deadlock = false;
  int64_t completed = 0;       // collectives completed
  int stuck_ranks = 0;         // ranks unfinished at quiescence
  std::optional<Cycle> cycle;  // when deadlock and a cycle was asked for
};

// Runs programs under a model. One Engine per thread; it keeps its buffers between trials.
class Engine {
 public:
  explicit Engine(const Scenario& scenario) : s_(scenario) {}
  Outcome run(const Programs& programs, ModelSpec model, bool want_cycle);

  // The wait-for graph of the last run's final state (empty unless it deadlocked). Exposed for tests.
  std::vector<WaitEdge> wait_for_graph(const Programs& programs, ModelSpec model) const;
  // A cycle of a wait-for graph by depth-first search, or nothing.
  static std::optional<Cycle> find_cycle(int num_ranks, const std::vector<WaitEdge>& edges);

 private:
  template <Model M>
  void run_model(const Programs& p, int limit);
  template <Model M>
  void run_host(const Programs& p, int r, int limit);
  void complete_queue_head(const Programs& p, Step c);
  bool finished(const Programs& p, int r, Model m) const;

  const Scenario& s_;
  std::vector<int64_t> pc_;       // next step of each rank's host
  std::vector<int64_t> head_;     // (a) index of the queue head (== pc_ when the queue is empty)
  std::vector<int32_t> pending_;  // (b, c) submitted and not completed
  std::vector<uint8_t> blocked_;  // 0 runnable, 1 sync, 2 slot
  std::vector<int32_t> missing_;  // per collective: members that have not submitted it (b-d) or have not got it at
                                  // the head of their queue (a); it completes at 0
  std::vector<int> ready_;
  std::vector<Step> done_;
  int64_t completed_ = 0;
};

}  // namespace dfccl::sim
