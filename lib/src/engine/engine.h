// The engine: one per (process, device, executor, mode), shared by every communicator created on that device. It
// owns the daemon and its memory (submission rings, contexts, completion queue), hands out slots, and runs a host
// progress thread that drains completions, fires callbacks and relaunches the daemon while work is pending.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/block.h"
#include "dfccl.h"
#include "engine/arrivals.h"
#include "engine/engine_config.h"
#include "engine/requests.h"
#include "engine/settlement.h"
#include "engine/slot_table.h"
#include "executor/executor.h"
#include "transport/transport.h"

namespace dfccl {

class Engine;
namespace net {
class Proxy;
}

// The slots and groups that captured graphs hold (engine_graph.cpp; docs/design.md, "CUDA graphs"): shared by the
// engine and the graphs' release records, so that a graph destroyed after its engine frees nothing twice. No CUDA
// call touches it: the release runs on a CUDA thread (a user object's destructor).
struct GraphPool {
  std::mutex mu;
  std::vector<uint32_t> free_slots;  // graph slots whose graph is gone (a slot never returns to host submissions)
  std::vector<uint32_t> free_groups;
  uint32_t groups_made = 0;
  uint32_t next_gen = 0;
  void release(const std::vector<uint32_t>& slots, const std::vector<uint32_t>& groups);
};

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  static std::shared_ptr<Engine> acquire(dfcclExecutor_t executor, int device, dfcclMode_t mode);
  ~Engine();

  Executor& exec() { return *exec_; }
  dfcclExecutor_t executor_kind() const { return exec_->kind(); }
  dfcclMode_t mode() const { return cfg_.params.blocking ? dfcclModeBlocking : dfcclModePreemptive; }
  const core::DaemonParams& params() const { return cfg_.params; }
  const TransportParams& transport() const { return cfg_.transport; }
  uint64_t sync_spin_ns() const { return cfg_.sync_spin_ns; }
  bool check_host_order() const { return cfg_.check_host_order; }  // DFCCL_CHECK_HOST_ORDER
  bool waits_on_host() const { return cfg_.wait_on_host; }         // dfcclWait blocks the calling thread (EngineConfig)

  // Communicator table of the daemon. detach takes no lock that is held across a CUDA call (an abort calls it while
  // the progress thread may hold the engine's lock inside one). `arrivals` (may be null) names the ranks a pending
  // collective waits for.
  uint32_t attach(core::CommDev* dev_comm, std::shared_ptr<const ArrivalSource> arrivals = nullptr);
  void detach(uint32_t index);
  // What an aborted communicator leaves behind, freed when the engine goes (its last communicator): its connection
  // region (a peer that has not aborted may still write into it), its mappings of its neighbours' regions and its
  // device memory. Caller: the abort, which must make no CUDA call (another thread's implicit synchronization can
  // hold every one of them until the daemon leaves). Takes no lock that is held across a CUDA call.
  struct Leftovers {
    std::shared_ptr<Transport> transport;              // the communicator's: it made the regions and the mappings
    std::vector<RegionBlob> regions;                   // this rank's own regions
    std::vector<std::pair<void*, RegionBlob>> mapped;  // peers' regions mapped here
    std::vector<void*> device;                         // device allocations (lane states, CommDev)
    bool empty() const { return regions.empty() && mapped.empty() && device.empty(); }
  };
  void retire(const Leftovers& left);

  // Queues a collective (d.seq is assigned here) and returns its request. Stream-ordered for the CUDA executor.
  std::shared_ptr<RequestState> submit(core::Desc d, uint32_t comm_index, cudaStream_t stream);
  // Queues several collectives of one communicator on one stream, all or none (dfcclNoResources when the slots
  // would run out), in order.
  std::vector<std::shared_ptr<RequestState>> submit_many(std::span<const core::Desc> descs, uint32_t comm_index,
                                                         cudaStream_t stream);
  // Queues descs[i] on communicator comms[i], all or none, in order; a descriptor with after = k > 0 becomes a stage
  // of a chain: it starts only once descs[i - k] has completed on this rank (Desc::after; its slot is filled in).
  std::vector<std::shared_ptr<RequestState>> submit_chain(std::span<const core::Desc> descs,
                                                          std::span<const uint32_t> comms, cudaStream_t stream);
  // dfcclWait: the stream waits on the GPU (CUDA); the calling thread waits where waits_on_host() (the host executor,
  // the CUDA executor under MPS), at most DFCCL_HOST_WAIT_TIMEOUT_MS, then dfcclTimeout.
  void wait_on_stream(const std::shared_ptr<RequestState>& r, cudaStream_t stream);
  // Captured collectives (engine_graph.cpp; docs/design.md, "CUDA graphs"). Caller: a capture (comm/comm_graph.h).
  // graph_take_slot: a slot owned by one captured collective for its graph's life (dfcclNoResources, naming fn, when
  // fewer than kHostSlotsKept would remain for other submissions). graph_take_group: a group and the generation
  // that tells its words from an earlier owner's; graph_group_size: how many collectives it has now (before any
  // replay). graph_post: the start node on `stream` (host executor: posts now); with_wait: one node that also waits
  // for the instance, as graph_wait's would right after it (NCCL's form; host executor: waits now too). graph_wait:
  // the stream waits for the instance of `slot` that its replay posted, the wait node running the scheduler itself
  // while no daemon does (core::graph_wait_block; host executor: waits now), released by an abort of the
  // communicator; poll_only: a later wait of the same captured call, which polls only.
  static constexpr uint32_t kHostSlotsKept = 64;
  uint32_t graph_take_slot(const char* fn);
  uint32_t graph_take_group(uint32_t* gen, const char* fn);
  void graph_group_size(uint32_t group, uint64_t n);
  void graph_post(cudaStream_t stream, core::Desc d, uint32_t comm_index, uint64_t* turns, uint32_t slot,
                  uint32_t group, uint32_t index, uint32_t gen, bool with_wait);
  void graph_wait(cudaStream_t stream, uint32_t slot, uint32_t comm_index, bool poll_only = false);
  // An eager dfcclWait as a wait that stands in (core::graph_wait_block; wait_on_stream uses it once graphs are
  // captured): `stream` waits for r's collective, and the wait runs the scheduler itself when no daemon does. For the
  // first wait of a pending collective only (the wait's tag is its instance's); false, queuing nothing, for any
  // other (already waited for, done, or across hosts: those wait as listed waits). Host executor: waits now.
  bool wait_as_standin(const std::shared_ptr<RequestState>& r, cudaStream_t stream);
  const std::shared_ptr<GraphPool>& graph_pool() const { return graph_pool_; }
  // The sequence number of the last instance of graph slot `slot` that completed (0: none yet).
  uint64_t graph_done_seq(uint32_t slot) const { return __atomic_load_n(&h_->graph_done[slot], __ATOMIC_ACQUIRE); }
  // How many captured waits ran the scheduler themselves (stood in for the daemon) so far.
  uint64_t standin_runs() const { return __atomic_load_n(&h_->standin_runs, __ATOMIC_ACQUIRE); }
  // Blocks up to timeout_ms for every outstanding collective of one communicator.
  bool wait_comm_idle(uint32_t comm_index, int64_t timeout_ms);
  uint32_t outstanding(uint32_t comm_index);

  // dfcclCommAbort: tells the daemon through pinned memory, with no CUDA call (EngineHost::aborts). Its collectives
  // are then finished as aborted wherever they are queued, and blocking-mode waits of other communicators look
  // again. why: the status they report (dfcclAborted, or dfcclRemoteError when a peer failed, with message).
  void abort_comm(uint32_t comm_index, dfcclResult_t why = dfcclAborted, const std::string& message = {});

  // dfcclRequestGetMissingRanks: the ranks that have not called r's collective (none once it finished); a compound
  // request's, merged.
  std::vector<int> missing_ranks(const RequestState& r);

  // Throws dfcclTimeout when the engine's lock stays busy for kLockWaitMs.
  dfcclStats_t stats();
  // dfcclDebugDump: the engine's state as the host and the device see it, for diagnosing a hang (lines of text).
  void debug_dump(std::FILE* f, bool device_state);
  std::string heartbeats_text() const;            // the blocks' heartbeats from pinned memory, one line
  static constexpr int kDumpDeviceWaitMs = 2000;  // debug_dump waits this long for the device's side
  static constexpr int kLockWaitMs = 1000;        // stats and debug_dump wait this long for the engine's lock
  void device_synchronize() { exec_->device_synchronize(); }
  // The engine's network proxies (net/proxy.h; DFCCL_NET_THREADS of them, at least one), started by the first
  // communicator with a remote rank and stopped with the engine. Throws dfcclSystemError when the network transport
  // cannot start.
  std::vector<std::shared_ptr<net::Proxy>> net_proxies();

 private:
  // What debug_dump's device reads need, copied under the lock (the reads run without it, on a helper thread).
  struct DeviceSnapshot {
    std::vector<std::pair<uint32_t, uint64_t>> slots;  // occupied slots: index, its collective's sequence number
    std::vector<std::pair<uint32_t, uint64_t>> rings;  // used rings: index, next position
    std::array<bool, core::kMaxComms> comm_pending{};
    std::array<core::CommDev*, core::kMaxComms> comm_dev{};
    std::array<uint64_t, core::kMaxComms> comm_gen{};
  };
  std::string device_state_text(const DeviceSnapshot& snap);
  // kProfile builds, at teardown once the daemon has left: the medians of the graph path's phases over the captured
  // instances traced (core::GraphStamp), one INFO line of subsystem ENGINE. No-op otherwise.
  void log_graph_trace();
  void log_slow_instances(const std::vector<uint64_t[core::kGraphStamps]>& t);
  std::string host_state_text_locked();
  DeviceSnapshot device_snapshot_locked();
  std::string comm_lanes_text(const DeviceSnapshot& snap, uint32_t i);
  Engine(std::unique_ptr<Executor> exec, dfcclMode_t mode, const EngineSettings& settings);
  void progress_loop();
  bool drain_completions();
  // Caller: the progress thread (settlement_), for a finished collective's request: complete_request, then, for a
  // request with `settles`, its sequence number into EngineHost::settled (for the streams that wait) and its slot
  // freed.
  void finish_request(const std::shared_ptr<RequestState>& req, int status, const std::string& error);
  // The requests of collectives across hosts that finished before their signatures were checked (settlement.h).
  Settlement settlement_{[this](const std::shared_ptr<RequestState>& req, int status, const std::string& error) {
    finish_request(req, status, error);
  }};
  void launch_locked(uint64_t now);
  // A launch of the daemon that threw: the device's context has failed (a fault in any kernel of the process). The
  // requests that were pending on the device, to be completed with dfcclUnhandledCudaError and `why` once mu_ is
  // released (complete_failed); empty why: the launch went well.
  struct Failed {
    std::vector<std::shared_ptr<RequestState>> reqs;
    std::string why;
  };
  // Caller: holding mu_, with the daemon not running. launch_locked; if it throws, fault_locked.
  Failed relaunch_locked(uint64_t now);
  // Caller: holding mu_, after a launch threw. Records why in fault_ (the first time) and takes every request pending
  // on the device out of its slot. From then on no relaunch is tried and submissions are refused with fault_.
  Failed fault_locked(const std::string& why);
  void complete_failed(Failed& failed);  // without mu_: completes failed's requests and empties it
  std::string fault_;  // under mu_
  bool daemon_gone_locked(uint64_t now);
  void warn_if_stuck_locked(uint64_t now);
  bool wait_pending_locked(const core::WaitEntry& w) const;
  void confirm_wait(uint64_t probe);  // after listing a wait: a daemon will run for it (see engine.cpp)
  // Queues on `stream` a wait for the instance `seq` of `slot` (0: a captured wait's, read at each replay) that may
  // stand in unless poll_only (graph_wait, wait_as_standin).
  void queue_standin(cudaStream_t stream, uint32_t slot, uint64_t seq, uint32_t comm_index, bool poll_only);
  // What such a wait is given: the engine's memory and parameters (the wait sets its epoch, standin and standin_seq
  // at each run), and the wait's arguments.
  core::EngineView standin_view() const;
  core::GraphWait standin_args(uint32_t slot, uint64_t seq, uint32_t comm_index, bool poll_only) const;
  void compact_waits_locked();
  uint64_t waits_holding_locked();
  std::shared_ptr<RequestState> submit_locked(core::Desc d, uint32_t comm_index, cudaStream_t stream);

  std::unique_ptr<Executor> exec_;
  core::EngineGlobal* g_ = nullptr;
  core::ChanCtx* ctx_ = nullptr;
  core::EngineHost* h_ = nullptr;
  // The settings, read once at creation; cfg_.params.epoch is set at each launch.
  EngineConfig cfg_;
  uint64_t backoff_ns_ = 0, next_launch_ns_ = 0;
  static constexpr uint64_t kExitQueryNs = 200000;  // progress_loop: the executor's exit query without a word from it
  uint64_t last_exit_query_ns_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;  // completions and submissions
  SlotTable slots_;             // under mu_ (but its per-communicator counts: an abort reads them without it)
  // Attached communicators (device address; null: free). Atomic accesses: detach stores without the lock.
  std::array<core::CommDev*, core::kMaxComms> comm_dev_{};
  std::array<uint64_t, core::kMaxComms> comm_gen_{};  // their attachment numbers (Desc::comm_gen; atomic accesses)
  // Why each attached communicator was aborted, when not by the application (a peer failed); its own lock, never
  // held across a CUDA call.
  std::mutex failure_mu_;
  std::array<std::pair<dfcclResult_t, std::string>, core::kMaxComms> failure_{};
  std::array<std::shared_ptr<const ArrivalSource>, core::kMaxComms> arrivals_{};  // guarded by failure_mu_ too
  std::array<bool, core::kMaxComms> comm_settles_{};  // under mu_: its arrivals are across hosts (RequestState)
  // "; <who has not called it>" for a pending collective of comm (empty if unknown).
  std::shared_ptr<const ArrivalSource> arrivals_of(uint32_t comm);  // takes failure_mu_
  std::string arrivals_text(uint32_t comm, const core::Desc& d);

  // Whether a captured collective's instance is posted and not done (EngineHost::graph_posted, graph_done): the
  // progress thread relaunches the daemon for it. Reads only pinned memory and graph_slots_ (appended, never
  // shrunk), without a lock.
  bool graph_pending() const;
  std::shared_ptr<GraphPool> graph_pool_ = std::make_shared<GraphPool>();
  std::array<uint32_t, core::kMaxSlots> graph_slots_{};  // every slot that ever became a graph slot
  std::atomic<uint32_t> ngraph_slots_{0};

  std::mutex retired_mu_;
  std::vector<Leftovers> retired_;  // what aborted communicators left, freed with the engine
  uint64_t attachments_ = 0;
  uint64_t seq_ = 0, epoch_ = 0, cq_head_ = 0, probes_ = 0;
  uint64_t host_posted_ = 0;          // host-ordered submissions (EngineHost::host_ring)
  std::atomic<bool> running_{false};  // written under mu_; read without it by the progress loop's quiet turns
  uint64_t submitted_ = 0, completed_ = 0, launches_ = 0, exits_idle_ = 0, exits_stuck_ = 0, late_doorbells_ = 0;
  uint64_t standby_launches_ = 0;  // launches by confirm_wait while a daemon was running
  uint64_t last_stuck_check_ns_ = 0, stuck_warned_seq_ = 0;  // the stuck warning's (cfg_.stuck_warn_ns)

  std::atomic<bool> stop_{false};
  std::thread progress_;
  std::mutex net_mu_;
  std::vector<std::shared_ptr<net::Proxy>> net_;
  // The proxies' deliveries so far: the tails and heads they stored for the daemon. Takes net_mu_.
  uint64_t net_deliveries();
  // Caller: the progress thread, holding mu_. Whether the daemon is to be launched now: work is outstanding and its
  // back-off has passed, or the proxies delivered something since the last launch (data or credits came from
  // another host), which ends the back-off of a daemon that left stuck.
  bool relaunch_due_locked(uint64_t now);
  uint64_t net_seen_ = 0;  // net_deliveries() at the last launch (under mu_)
};

// Takes the lock within ms milliseconds, or gives up (false): the engine's lock can be held by a thread whose CUDA
// call is held by another thread's implicit synchronization, and diagnostics must not hang with it.
bool lock_within(std::unique_lock<std::mutex>& lk, int ms);

// Blocks up to timeout_ms (< 0: no limit) for the request; true if it finished.
bool wait_request(RequestState& r, int64_t timeout_ms);

}  // namespace dfccl
