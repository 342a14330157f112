#include "comm.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "board_mirror.h"
#include "bootstrap.h"
#include "connection.h"
#include "core/collectives/collectives.h"
#include "env.h"
#include "error.h"
#include "hierarchy.h"
#include "log.h"
#include "match_board.h"
#include "net/links.h"
#include "p2p.h"
#include "p2p_table.h"
#include "peer_watch.h"
#include "persistent.h"
#include "thread_name.h"

namespace dfccl {

namespace {

// What each rank tells the others at init. All transport fields must agree.
struct RankInfo {
  int32_t nranks, executor, mode, device;
  uint32_t nchan, slot_bytes, nslots, seq_lanes, persistent_lanes, min_chan_bytes;
  uint32_t pid;
  uint32_t p2p_chan;
  uint64_t host_hash;
  uint32_t net_force, net_chan, net_slot_bytes;
  uint32_t hierarchy;
};

// What each rank publishes once the transport is chosen.
struct RegionInfo {
  int32_t p2p_ok;  // this rank reaches both ring neighbours' GPUs directly (and DFCCL_P2P_DISABLE is 0)
  int32_t pad;
  RegionBlob region;
};

void check_agreement(const std::vector<RankInfo>& all, int rank) {
  const RankInfo& me = all[size_t(rank)];
  for (size_t i = 0; i < all.size(); ++i) {
    const RankInfo& o = all[i];
    auto mismatch = [&](const char* what, int64_t mine, int64_t theirs) {
      throw Error(dfcclInvalidUsage,
                  fmt::format("communicator init: rank {} has {}={} but rank {} has {}={} (all ranks "
                              "of a communicator must use the same settings)",
                              rank, what, mine, i, what, theirs));
    };
    if (o.executor != me.executor) mismatch("executor", me.executor, o.executor);
    if (o.mode != me.mode) mismatch("mode", me.mode, o.mode);
    // The executor's own variables (the same executor on every rank from here on). CUDA: the blocks are also bounded
    // by what the GPU holds.
    const bool host = me.executor == dfcclExecutorHost;
    if (o.nchan != me.nchan) mismatch(host ? "DFCCL_HOST_BLOCKS" : "DFCCL_BLOCKS", me.nchan, o.nchan);
    if (o.slot_bytes != me.slot_bytes)
      mismatch(host ? "DFCCL_HOST_SLOT_BYTES" : "DFCCL_SLOT_BYTES", me.slot_bytes, o.slot_bytes);
    if (o.nslots != me.nslots) mismatch(host ? "DFCCL_HOST_SLOTS" : "DFCCL_SLOTS", me.nslots, o.nslots);
    if (o.seq_lanes != me.seq_lanes) mismatch("DFCCL_LANES", me.seq_lanes, o.seq_lanes);
    if (o.persistent_lanes != me.persistent_lanes)
      mismatch("DFCCL_PERSISTENT_LANES", me.persistent_lanes, o.persistent_lanes);
    if (o.min_chan_bytes != me.min_chan_bytes) mismatch("DFCCL_MIN_CHAN_BYTES", me.min_chan_bytes, o.min_chan_bytes);
    if (o.p2p_chan != me.p2p_chan)
      mismatch(host ? "DFCCL_HOST_P2P_CHANNELS" : "DFCCL_P2P_CHANNELS", me.p2p_chan, o.p2p_chan);
    if (o.net_force != me.net_force) mismatch("DFCCL_NET_FORCE", me.net_force, o.net_force);
    if (o.net_chan != me.net_chan) mismatch("DFCCL_NET_CHANNELS", me.net_chan, o.net_chan);
    if (o.net_slot_bytes != me.net_slot_bytes) mismatch("DFCCL_NET_SLOT_BYTES", me.net_slot_bytes, o.net_slot_bytes);
    if (o.hierarchy != me.hierarchy) mismatch("DFCCL_HIERARCHY", me.hierarchy, o.hierarchy);
  }
}

// What this rank tells the others at init (comm_init's first round).
RankInfo rank_info(const dfcclConfig_t& cfg, const Engine& e, const Bootstrap& b, int nranks) {
  const TransportParams& tp = e.transport();
  RankInfo mine{};
  mine.nranks = nranks;
  mine.executor = cfg.executor;
  mine.mode = cfg.mode;
  mine.device = cfg.device;
  mine.nchan = tp.nchan;
  mine.slot_bytes = tp.slot_bytes;
  mine.nslots = tp.nslots;
  mine.seq_lanes = tp.seq_lanes;
  mine.persistent_lanes = tp.persistent_lanes;
  mine.min_chan_bytes = e.params().min_chan_bytes;
  mine.p2p_chan = tp.p2p_chan;
  mine.pid = uint32_t(getpid());
  mine.host_hash = b.host_hash();
  mine.net_force = uint32_t(env_int("DFCCL_NET_FORCE"));
  mine.net_chan = uint32_t(env_int("DFCCL_NET_CHANNELS"));
  mine.net_slot_bytes = uint32_t(env_int("DFCCL_NET_SLOT_BYTES"));
  mine.hierarchy = uint32_t(env_int("DFCCL_HIERARCHY"));
  return mine;
}

// How release leaves the communicator's memory.
enum class Release {
  Free,        // free everything now (init failed, or destroy after the peers caught up)
  KeepRegion,  // the region may still be written by a peer: retired to the engine, the rest freed now
  Retire,      // an abort on the CUDA executor: everything retired to the engine, no CUDA call made
};

// Takes the communicator's memory out of it, sorted by what `how` does with it: `now` is freed at once, `left` is
// retired to the engine. This rank's regions are kept unless Free (a peer may still write into them); the peers'
// mappings and the device allocations are kept only by Retire.
void take_memory(dfcclComm* c, Release how, Engine::Leftovers& now, Engine::Leftovers& left) {
  for (RegionBlob* r : {&c->region, &c->p2p.region})
    if (r->ptr) (how == Release::Free ? now : left).regions.push_back(*r);
  for (const RegionBlob& r : c->net.shadows) (how == Release::Free ? now : left).regions.push_back(r);
  c->net.shadows.clear();
  Engine::Leftovers& later = how == Release::Retire ? left : now;
  // A remote neighbour's "mapping" is a shadow (freed above), with no blob.
  if (c->next_ptr && c->next_blob.bytes) later.mapped.emplace_back(c->next_ptr, c->next_blob);
  if (c->prev_ptr && c->prev_ptr != c->next_ptr && c->prev_blob.bytes)
    later.mapped.emplace_back(c->prev_ptr, c->prev_blob);
  for (size_t q = 0; q < c->p2p.mapped.size(); ++q)
    if (int(q) != c->rank && c->p2p.mapped[q]) later.mapped.emplace_back(c->p2p.mapped[q], c->p2p.blobs[q]);
  for (void* p : {static_cast<void*>(c->lanes), static_cast<void*>(c->dev), static_cast<void*>(c->p2p.lanes)})
    if (p) later.device.push_back(p);
  persistent_take(c, how == Release::Free ? now : left, later, later);
  c->region = RegionBlob{};
  c->next_ptr = c->prev_ptr = nullptr;
  c->lanes = nullptr;
  c->dev = nullptr;
  c->p2p = P2pConnections{};
}

// Releases what a partially or fully initialised communicator holds (not the handle itself). With Release::Retire
// it makes no CUDA call and takes no lock held across one; if it drops the engine's last reference, the engine is
// torn down on a thread of its own (its teardown waits for the daemon).
void release(dfcclComm* c, Release how) {
  if (!c->engine) return;
  Executor& ex = c->engine->exec();
  if (c->index != ~0u) {
    c->engine->detach(c->index);
    c->index = ~0u;
  }
  // The network proxy may still use the regions until its hops are stopped: if they are not, the regions stay.
  if (!net_detach(c) && how == Release::Free) how = Release::KeepRegion;
  mirror_release(c);
  c->net.proxies.clear();
  c->net.keys.clear();
  Engine::Leftovers now, left;
  take_memory(c, how, now, left);
  for (const auto& [p, blob] : now.mapped) ex.unmap_region(p, blob);
  for (const RegionBlob& r : now.regions) ex.free_region(r);
  for (void* p : now.device) ex.free_device(p);
  if (!left.empty()) c->engine->retire(left);
  c->board.reset();
  c->bootstrap.reset();
  std::shared_ptr<Engine> last;  // the engine goes, if this was its last user, after engine_mu is left
  {
    std::lock_guard<std::mutex> lk(c->engine_mu);
    last.swap(c->engine);
  }
  if (how == Release::Retire && last.use_count() == 1)
    std::thread([e = std::move(last)] { name_this_thread("retire"); }).detach();
}

// A failure that a connected rank relayed (net_tell_failed: its communicator broke on notice.origin), reported at
// the fifth probe that finds it, so that this rank's own finding, where it has one, names the cause first.
std::string relayed_failure(const dfcclComm* c, const net::Proxy::Notice& notice, int* rank, int* rounds) {
  const bool valid = notice.from >= 0 && notice.from < c->nranks && notice.origin >= 0 && notice.origin < c->nranks;
  if (!valid || notice.origin == c->rank) return {};  // a notice naming no rank of c is not believed
  if (++*rounds < 5) return {};
  *rank = notice.origin;
  return fmt::format("failed or aborted, as rank {} reported (its connections reach that rank)", notice.from);
}

// A broken network connection of c (a peer that left cleanly is no failure; a proxy whose engine went says so first:
// net/proxy.h), reported at the second probe that finds it, or the tenth for a peer process on this host
// (DFCCL_NET_FORCE=1), so that one that died is named by its pidfd first: a process's sockets close before it has
// finished exiting. Else a relayed failure (relayed_failure).
std::string network_failure(const dfcclComm* c, const net::Proxy::Notice& notice, int* rank, int* net_rounds,
                            int* relay_rounds) {
  int broken = -1;
  std::string m = net_failure(c, &broken);
  *net_rounds = m.empty() || c->bootstrap->peer_state(broken) == Bootstrap::kLeft ? 0 : *net_rounds + 1;
  if (*net_rounds > 0 && *net_rounds >= (c->bootstrap->local(broken) ? 10 : 2)) {
    *rank = broken;
    return m;
  }
  return relayed_failure(c, notice, rank, relay_rounds);
}

// Registers c with PeerWatch: a mismatch that any rank published on the match board fails it with
// dfcclInvalidUsage; its peers in other processes fail it when they exit without destroying it, abort it, or fall
// silent for DFCCL_PEER_TIMEOUT_S (0: never) — on this host through their processes (`peers`) and the segment's
// liveness words, on other hosts through the network connections (their state words carry what their messages
// said: an abort notice sets kAborted); its probe beats this rank's heartbeat. Ranks that are threads of this process
// share its fate and are watched for mismatches only. The functions read c's bootstrap and board, which stay until
// PeerWatch::remove or the failure they report.
void watch_peers(dfcclComm* c, std::vector<PeerProcess> peers) {
  const uint64_t timeout_ns = uint64_t(env_int("DFCCL_PEER_TIMEOUT_S")) * 1000000000ull;
  const bool other_processes = !peers.empty() || !c->bootstrap->all_local();
  PeerChecks checks;
  checks.peers = std::move(peers);
  checks.departed = [c](int rank) { return c->bootstrap->peer_state(rank) == Bootstrap::kLeft; };
  auto net_rounds = std::make_shared<int>(0);    // probes in a row that found a network failure
  auto relay_rounds = std::make_shared<int>(0);  // probes that found a failure relayed by a connected rank
  checks.probe = [c, timeout_ns, other_processes, net_rounds, relay_rounds](int* rank) -> std::string {
    if (std::string m = c->board->published(); !m.empty()) {
      *rank = c->rank;
      return m;
    }
    if (!other_processes) return {};
    const uint64_t now = Bootstrap::now_ns();
    c->bootstrap->beat(now);
    const net::Proxy::Notice notice = net_notice(c);
    if (notice.from >= 0 && notice.origin < 0 && !c->bootstrap->local(notice.from))
      c->bootstrap->set_peer_state(notice.from, Bootstrap::kAborted);
    for (int i = 0; i < c->nranks; ++i) {
      if (i == c->rank) continue;
      const uint64_t state = c->bootstrap->peer_state(i);
      if (state == Bootstrap::kLeft) continue;
      *rank = i;
      if (state == Bootstrap::kAborted) return "aborted the communicator";
      if (!c->bootstrap->local(i)) continue;  // its heartbeat is the network's (net_failure)
      const uint64_t last = c->bootstrap->peer_heartbeat(i);
      if (timeout_ns && now > last && now - last > timeout_ns)
        return fmt::format("has not been heard from for {} s (stopped or hung; DFCCL_PEER_TIMEOUT_S)",
                           (now - last) / 1000000000ull);
    }
    // Last, as its cause may be one found above.
    return network_failure(c, notice, rank, net_rounds.get(), relay_rounds.get());
  };
  checks.on_failure = [c](int rank, const std::string& reason) {
    if (std::string m = c->board->published(); !m.empty()) return comm_fail_mismatch(c, m);
    net_tell_failed(c, rank);  // ranks that only this rank's connections reach learn of it too
    comm_fail(c, rank, reason);
  };
  PeerWatch::add(c, std::move(checks));
}

}  // namespace

dfcclConfig_t resolve_config(const dfcclConfig_t* config, int rank) {
  dfcclConfig_t c = DFCCL_CONFIG_INITIALIZER;
  if (config) {
    if (config->magic != DFCCL_CONFIG_MAGIC || config->size != sizeof(dfcclConfig_t))
      throw Error(dfcclInvalidArgument, "argument 'config' was not initialised with DFCCL_CONFIG_INITIALIZER");
    c = *config;
    if (c.version != DFCCL_VERSION_CODE)
      throw Error(dfcclInvalidArgument,
                  fmt::format("argument 'config->version' = {}: this library is version {} "
                              "(initialise the config with DFCCL_CONFIG_INITIALIZER of its dfccl.h)",
                              c.version, DFCCL_VERSION_CODE));
    if (c.device < -1)
      throw Error(dfcclInvalidArgument,
                  fmt::format("argument 'config->device' = {} is negative (-1: the default)", c.device));
    if (c.initTimeoutMs < -1 || c.initTimeoutMs == 0)
      throw Error(dfcclInvalidArgument, fmt::format("argument 'config->initTimeoutMs' = {} must be positive (-1: "
                                                    "DFCCL_INIT_TIMEOUT_MS)",
                                                    c.initTimeoutMs));
  }
  if (c.executor < 0) {
    // env_str accepts only the table's words (cuda|host) and names the variable otherwise.
    c.executor = env_str("DFCCL_EXECUTOR") == "host" ? dfcclExecutorHost : dfcclExecutorCuda;
  }
  if (c.executor != dfcclExecutorCuda && c.executor != dfcclExecutorHost)
    throw Error(dfcclInvalidArgument,
                fmt::format("argument 'config->executor' = {} is not a dfcclExecutor_t", c.executor));
  if (c.mode < 0) {
    c.mode = env_str("DFCCL_MODE") == "blocking" ? dfcclModeBlocking : dfcclModePreemptive;  // preemptive|blocking
  }
  if (c.mode != dfcclModePreemptive && c.mode != dfcclModeBlocking)
    throw Error(dfcclInvalidArgument, fmt::format("argument 'config->mode' = {} is not a dfcclMode_t", c.mode));
  if (c.device < 0) {
    if (c.executor == dfcclExecutorHost) {
      c.device = rank;
    } else {
      int d = 0;
      const cudaError_t e = cudaGetDevice(&d);
      if (e != cudaSuccess)
        throw Error(dfcclNotSupported, fmt::format("no usable GPU for the CUDA executor ({}); use the host executor "
                                                   "(config.executor = dfcclExecutorHost or DFCCL_EXECUTOR=host)",
                                                   cudaGetErrorString(e)));
      c.device = d;
    }
  }
  if (c.initTimeoutMs < 0) c.initTimeoutMs = int(env_int("DFCCL_INIT_TIMEOUT_MS"));
  return c;
}

namespace {

// comm_init, step 1: every rank's RankInfo (transport settings, device, host, process), checked to agree; the
// network plan (which ranks are remote) and the connections' shape follow from them. *hosts: every rank's host hash.
std::vector<RankInfo> agree_on_transport(dfcclComm* c, const dfcclConfig_t& cfg, std::vector<uint64_t>* hosts) {
  const RankInfo mine = rank_info(cfg, *c->engine, *c->bootstrap, c->nranks);
  std::vector<RankInfo> all(static_cast<size_t>(c->nranks));
  c->bootstrap->allgather(&mine, sizeof(mine), all.data());
  c->bootstrap->unlink();  // everybody has the segment mapped
  check_agreement(all, c->rank);
  for (const RankInfo& r : all) hosts->push_back(r.host_hash);
  net_plan(c, *hosts);
  c->geometry = net_geometry(c, c->engine->transport());
  return all;
}

// comm_init, step 2: where the connection regions live (the GPUs' memory when every rank reaches its ring neighbours
// and point-to-point peers directly, else shared host memory for the whole communicator; host memory also when some
// rank is remote: the network proxy writes into the regions, net/links.h), this rank's region, the ring neighbours'
// regions mapped (a remote neighbour's: a shadow of this rank's), and the point-to-point connections.
void make_regions(dfcclComm* c, const std::vector<RankInfo>& all, uint32_t nlanes) {
  Executor& ex = c->engine->exec();
  const TransportParams& tp = c->engine->transport();
  const TransportParams& g = c->geometry;
  const int nranks = c->nranks, next = (c->rank + 1) % nranks, prev = (c->rank - 1 + nranks) % nranks;
  RegionInfo my_region{};
  my_region.p2p_ok = env_int("DFCCL_P2P_DISABLE") == 0;
  for (int q = 0; q < nranks; ++q)
    if (!c->net.remote[size_t(q)] && (tp.p2p_chan > 0 || q == next || q == prev))
      my_region.p2p_ok = my_region.p2p_ok && ex.peer_access(all[size_t(q)].device);
  std::vector<RegionInfo> regions(static_cast<size_t>(nranks));
  c->bootstrap->allgather(&my_region, sizeof(my_region), regions.data());
  bool host_path = c->net.any;
  for (const auto& r : regions) host_path = host_path || !r.p2p_ok;
  c->host_path = host_path;
  const uint64_t region_bytes = core::region_bytes(g.nchan, nlanes, g.nslots, g.slot_bytes);
  c->region = ex.alloc_region(region_bytes, host_path);
  my_region.region = c->region;
  c->bootstrap->allgather(&my_region, sizeof(my_region), regions.data());
  auto neighbour = [&](int q, RegionBlob& blob) {
    if (c->net.remote[size_t(q)]) return net_shadow(c, region_bytes, true);
    blob = regions[size_t(q)].region;
    return ex.map_region(blob);
  };
  c->next_ptr = neighbour(next, c->next_blob);
  c->prev_ptr = (prev == next) ? c->next_ptr : neighbour(prev, c->prev_blob);
  c->bootstrap->barrier();
  ex.region_mapped_by_all(c->region);
  p2p_connect(c, host_path);
}

// comm_init, step 3: the communicator as the daemon sees it (CommStatic in device memory, its private lane states).
void make_comm_static(dfcclComm* c, uint32_t nlanes) {
  Executor& ex = c->engine->exec();
  const TransportParams& tp = c->engine->transport();
  c->lanes = static_cast<core::LaneState*>(ex.alloc_device(sizeof(core::LaneState) * tp.nchan * nlanes));
  core::CommDev& d = c->host_dev;
  d.s.rank = c->rank;
  d.s.nranks = c->nranks;
  d.s.prev = (c->rank - 1 + c->nranks) % c->nranks;
  d.s.next = (c->rank + 1) % c->nranks;
  d.s.nchan = c->geometry.nchan;
  d.s.nlanes = nlanes;
  c->persistent_lanes = tp.persistent_lanes;
  d.s.nslots = tp.nslots;
  d.s.slot_bytes = c->geometry.slot_bytes;
  d.s.self = reinterpret_cast<char*>(c->region.ptr);
  d.s.next_region = static_cast<char*>(c->next_ptr);
  d.s.prev_region = static_cast<char*>(c->prev_ptr);
  d.s.lanes = c->lanes;
  c->dev = static_cast<core::CommDev*>(ex.alloc_device(sizeof(core::CommDev)));
  ex.copy_to_device(c->dev, &d, sizeof(d));
}

}  // namespace

dfcclComm* comm_init(int nranks, const dfcclUniqueId& id, int rank, const dfcclConfig_t& cfg) {
  auto c = std::make_unique<dfcclComm>();
  c->config = cfg;
  c->rank = rank;
  c->nranks = nranks;
  try {
    c->engine = Engine::acquire(dfcclExecutor_t(cfg.executor), cfg.device, dfcclMode_t(cfg.mode));
    c->bootstrap =
        std::make_shared<Bootstrap>(id, rank, nranks, cfg.initTimeoutMs,
                                    Bootstrap::Areas{MatchBoard::bytes(nranks), p2p_table::p2p_table_bytes(nranks)});
    Engine& e = *c->engine;
    const TransportParams& tp = e.transport();
    std::vector<uint64_t> hosts;
    const std::vector<RankInfo> all = agree_on_transport(c.get(), cfg, &hosts);
    // The region holds the sequence lanes, and the persistent ones only where they cannot be made later.
    const uint32_t nlanes = tp.seq_lanes + (persistent_in_region(c.get()) ? tp.persistent_lanes : 0);
    make_regions(c.get(), all, nlanes);
    make_comm_static(c.get(), nlanes);
    net_connect(c.get());
    c->board = std::make_shared<MatchBoard>(c->bootstrap, tp.seq_lanes);
    mirror_connect(c.get(), hosts);
    c->index = e.attach(c->dev, c->board);
    c->bootstrap->barrier();
    std::vector<PeerProcess> peers;
    for (int i = 0; i < nranks; ++i)  // process ids mean something on this host only
      if (c->bootstrap->local(i) && all[size_t(i)].pid != all[size_t(rank)].pid)
        peers.push_back({i, int(all[size_t(i)].pid)});
    watch_peers(c.get(), std::move(peers));
    hierarchy_init(c.get(), hosts);
    log(LogLevel::Info, LogSubsys::Init,
        "communicator {}: rank {} of {} on device {} ({} executor, {} mode); to ranks {} and {} through {}", c->index,
        rank, nranks, cfg.device, cfg.executor == dfcclExecutorHost ? "host" : "CUDA",
        cfg.mode == dfcclModeBlocking ? "blocking" : "preemptive", c->host_dev.s.prev, c->host_dev.s.next,
        c->host_path ? "shared host memory"
                     : (cfg.executor == dfcclExecutorHost ? "shared memory" : "GPU peer memory"));
  } catch (...) {
    release(c.get(), Release::Free);
    throw;
  }
  return c.release();
}

dfcclComm* comm_split(dfcclComm* parent, int color, int key, const dfcclConfig_t* config) {
  struct SplitInfo {
    int32_t color, key, rank, pad;
  };
  SplitInfo mine{color, key, parent->rank, 0};
  std::vector<SplitInfo> all(static_cast<size_t>(parent->nranks));
  parent->bootstrap->allgather(&mine, sizeof(mine), all.data());
  // The lowest parent rank of each color makes the new communicator's id (and so runs its rendezvous root).
  std::vector<SplitInfo> members;
  for (const auto& s : all)
    if (s.color == color) members.push_back(s);
  const bool leader = color != DFCCL_SPLIT_NOCOLOR && members.front().rank == parent->rank;
  dfcclUniqueId my_id;
  std::memset(&my_id, 0, sizeof(my_id));
  if (leader) my_id = make_unique_id();
  std::vector<dfcclUniqueId> ids(static_cast<size_t>(parent->nranks));
  parent->bootstrap->allgather(&my_id, sizeof(my_id), ids.data());
  if (color == DFCCL_SPLIT_NOCOLOR) return nullptr;
  const dfcclUniqueId id = ids[size_t(members.front().rank)];
  std::stable_sort(members.begin(), members.end(), [](const SplitInfo& a, const SplitInfo& b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  int new_rank = 0;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].rank == parent->rank) new_rank = int(i);
  dfcclConfig_t cfg = config ? resolve_config(config, new_rank) : parent->config;
  if (!config && cfg.executor == dfcclExecutorHost) cfg.device = parent->config.device;
  return comm_init(int(members.size()), id, new_rank, cfg);
}

// True once next, and every point-to-point peer, has consumed every slot this rank sent it: after that no peer writes
// into this rank's regions.
bool peers_caught_up(dfcclComm* c) {
  return credits_returned(c->engine->exec(), c->host_dev.s) && p2p_caught_up(c) && persistent_caught_up(c);
}

// Waits, at most timeout_ms in all, until no submission that passed its liveness check before `alive` went false is
// still on its way into the engine (comm_submit), then until none of the communicator's collectives is pending;
// false if either still was at the end. Such a submission is queued with the communicator's attachment, so that an
// abort drops it and a destroy waits for it, before the memory goes.
bool wait_quiet(dfcclComm* c, int64_t timeout_ms) {
  const uint64_t deadline = host_now_ns() + uint64_t(timeout_ms) * 1000000ull;
  uint64_t now = host_now_ns();
  for (; c->submitting.load() != 0; now = host_now_ns()) {
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return c->engine->wait_comm_idle(c->index, now < deadline ? int64_t((deadline - now) / 1000000ull) : 0);
}

// The abort proper, once `alive` is false: the daemon drops the communicator's collectives; its memory is freed once
// none is pending, else left in place. A submission can be inside a CUDA call held by another thread's implicit
// synchronization until the daemon drops this communicator's collectives: it is waited for only after the abort is
// posted, and only until the timeout.
void abort_attached(dfcclComm* c, dfcclResult_t why = dfcclAborted, const std::string& message = {}) {
  if (!c->engine) return;
  // The peers learn of an abort of this rank's own here; of one that a peer's failure caused, from the peer watch's
  // relay (watch_peers: net_tell_failed).
  if (why == dfcclAborted && c->bootstrap) c->bootstrap->set_state(Bootstrap::kAborted);
  if (why == dfcclAborted) net_tell_aborted(c);
  c->engine->abort_comm(c->index, why, message);
  c->async_error = why;
  if (wait_quiet(c, env_int("DFCCL_ABORT_TIMEOUT_MS"))) {
    // Peers may still write into my region: keep it allocated (host: their mapping keeps it alive anyway). On the
    // GPU nothing is freed now: cudaFree and cudaIpcCloseMemHandle wait for the daemon, which in blocking mode may
    // stay for another communicator's collective while the application waits for this abort.
    release(c, c->engine->executor_kind() == dfcclExecutorHost ? Release::Free : Release::Retire);
  } else {
    // The daemon still holds the communicator's collectives, or one is still being submitted: leave its memory in
    // place, drop only our handles.
    log(LogLevel::Warn, LogSubsys::Abort,
        "dfcclCommAbort: rank {} of {}: {} collectives still pending after {} ms (DFCCL_ABORT_TIMEOUT_MS); they end "
        "when the daemon next runs, and the communicator's memory stays until the process exits",
        c->rank, c->nranks, c->engine->outstanding(c->index), env_int("DFCCL_ABORT_TIMEOUT_MS"));
    mirror_release(c);
    c->board.reset();
    c->bootstrap.reset();
  }
}

// Caller: destroy, once it owns the communicator's end. A mismatch published on the board that PeerWatch had not
// reported yet (a request that the engine failed with it, MatchBoard::settled, can come first) fails the
// communicator as PeerWatch would have, instead of a destroy that waits for peers that have failed; true if so.
bool fail_published_mismatch(dfcclComm* c) {
  const std::string m = c->board ? c->board->published() : std::string();
  if (m.empty() || c->fail_claimed.exchange(true)) return false;
  c->failure = m;
  c->fail_code.store(dfcclInvalidUsage, std::memory_order_release);
  log(LogLevel::Warn, LogSubsys::Abort, "rank {}: {}: the communicator's collectives fail with dfcclInvalidUsage",
      c->rank, m);
  abort_attached(c, dfcclInvalidUsage, m);
  return true;
}

namespace {
void destroy_stages(dfcclComm* c);
}  // namespace

void comm_destroy(dfcclComm* c) {
  destroy_stages(c);
  PeerWatch::remove(c);
  if (!c->alive.exchange(false)) return;  // another thread destroyed or aborted it meanwhile, or a peer died
  if (fail_published_mismatch(c)) return;
  const int64_t timeout = env_int("DFCCL_DESTROY_TIMEOUT_MS");
  if (!c->engine) return;
  if (!wait_quiet(c, timeout)) {
    const uint32_t left = c->engine->outstanding(c->index);
    abort_attached(c);
    throw Error(dfcclTimeout, fmt::format("dfcclCommDestroy: {} collectives of rank {} were still pending after {} ms "
                                          "(DFCCL_DESTROY_TIMEOUT_MS); the communicator was aborted instead",
                                          left, c->rank, timeout));
  }
  c->bootstrap->set_state(Bootstrap::kLeft);  // the peers no longer count on this rank (nor its process)
  mirror_leave(c);                            // nor do those of other hosts, once the message reaches them
  // The last writes a peer makes into my region are the credits for what I sent it: wait for them (not for the
  // peers to call destroy: destroy is local, as in NCCL), then free.
  const uint64_t t0 = host_now_ns();
  bool caught_up = peers_caught_up(c);
  while (!caught_up && host_now_ns() - t0 < uint64_t(timeout) * 1000000ull) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    caught_up = peers_caught_up(c);
  }
  release(c, caught_up ? Release::Free : Release::KeepRegion);
}

void comm_abort(dfcclComm* c) {
  c->user_aborted = true;
  PeerWatch::remove(c);
  const bool was_alive = c->alive.exchange(false);
  if (was_alive) c->async_error = dfcclAborted;
  for (dfcclComm* part : {c->hierarchy.intra, c->hierarchy.inter})  // first, as in fail_once
    if (part) comm_abort(part);
  if (was_alive) abort_attached(c);
}

namespace {
void fail_stages(dfcclComm* c, dfcclResult_t code, const std::string& message, const std::string& logged,
                 const char* outcome, const dfcclComm* from);

// The first failure of a communicator: its message and code stand (they are read without a lock once set), it is
// logged as "<logged>: <outcome>", and the communicator is aborted with it. Later failures are dropped.
// from: a stage communicator of c whose own failure this is (PeerWatch is running its check: not removed here).
void fail_once(dfcclComm* c, dfcclResult_t code, const std::string& message, LogLevel level, const std::string& logged,
               const char* outcome, const dfcclComm* from = nullptr) {
  if (c->fail_claimed.exchange(true)) return;
  c->failure = message;
  c->fail_code.store(code, std::memory_order_release);
  log(level, LogSubsys::Abort, "{}: {}", logged, outcome);
  const bool was_alive = c->alive.exchange(false);
  if (was_alive) c->async_error = code;  // before its requests can end (through the stage communicators')
  // The stage communicators fail first: once c's own collectives end, the application may destroy c, which destroys
  // them, and must find them ended too.
  fail_stages(c, code, message, logged, outcome, from);
  if (was_alive) abort_attached(c, code, message);
}

// c's stage communicators (hierarchy.h) share its failure: each, unless it is `from`, leaves the peer watch (its
// probe reads the board that its abort releases) and fails with code and message.
void fail_stages(dfcclComm* c, dfcclResult_t code, const std::string& message, const std::string& logged,
                 const char* outcome, const dfcclComm* from) {
  for (dfcclComm* part : {c->hierarchy.intra, c->hierarchy.inter}) {
    if (!part) continue;
    if (part != from) PeerWatch::remove(part);
    fail_once(part, code, message, LogLevel::Info, fmt::format("{} (a stage communicator of it)", logged), outcome);
  }
}

// Caller: comm_destroy, before c's own teardown. c's stage communicators go first: destroyed, or, once c has failed,
// failed with it (a peer may be gone, and their destroy would wait for it; the peer watch may still be on its way
// to them).
void destroy_stages(dfcclComm* c) {
  const int code = c->fail_code.load(std::memory_order_acquire);
  if (code == dfcclSuccess) return hierarchy_destroy(c);
  fail_stages(c, dfcclResult_t(code), c->failure, fmt::format("rank {}: {}", c->rank, c->failure), "ended with it",
              nullptr);
}

// The communicator that a failure found on c fails instead: a stage communicator's parent, which then leaves the
// peer watch (its probe reads the board that its abort releases; the caller runs in c's check, not the parent's).
// Null for any other communicator.
dfcclComm* failing_parent(const dfcclComm* c) {
  dfcclComm* parent = c->hierarchy.parent.load();
  if (parent) PeerWatch::remove(parent);
  return parent;
}
}  // namespace

void comm_fail(dfcclComm* c, int rank, const std::string& reason) {
  const dfcclComm* from = nullptr;
  if (dfcclComm* parent = failing_parent(c)) {  // named in the parent's ranks
    from = c;
    rank = c->hierarchy.parent_rank[size_t(rank)];
    c = parent;
  }
  const std::string msg = fmt::format("rank {} of the communicator (size {}; this process is rank {}) {}", rank,
                                      c->nranks, c->rank, reason);
  // A peer's own abort is the application's decision (its watchdog usually aborts every rank): INFO. A death or
  // silence is a failure: WARN.
  const bool aborted = reason == "aborted the communicator";
  fail_once(c, dfcclRemoteError, msg, aborted ? LogLevel::Info : LogLevel::Warn, msg,
            "its collectives fail with dfcclRemoteError", from);
}

void comm_fail_mismatch(dfcclComm* c, const std::string& message) {
  const dfcclComm* from = nullptr;
  if (dfcclComm* parent = failing_parent(c)) {
    from = c;
    c = parent;
  }
  fail_once(c, dfcclInvalidUsage, message, LogLevel::Warn, fmt::format("rank {}: {}", c->rank, message),
            "the communicator's collectives fail with dfcclInvalidUsage", from);
}

namespace {

// A submission under way, from before its liveness check until it is queued or refused: an abort from another
// thread waits for it (wait_quiet). Announced before the check (both sequentially consistent, as is the abort's store
// of `alive`): either the submission sees the abort, or the abort sees the submission and waits until it has queued.
struct Submitting {
  explicit Submitting(dfcclComm* c) : c(c) {
    c->submitting.fetch_add(1);
    if (!c->alive) {
      c->submitting.fetch_sub(1);
      throw_comm_ended(c);
    }
  }
  ~Submitting() { c->submitting.fetch_sub(1); }
  dfcclComm* c;
};

// Under c->mu: posts `signature` on c's board under key (and to the other hosts' boards) and sets d's channels for c.
// Returns the board's mismatch, or "".
std::string post_locked(dfcclComm* c, const MatchKey& key, const core::Desc& signature, core::Desc& d) {
  std::string mismatch = c->board->post(key, signature);
  if (!mismatch.empty()) return mismatch;
  mirror_post(c, key, signature);
  core::set_channels(d, core::data_channels(d.count * core::dtype_size(d.dtype), c->geometry.nchan,
                                            c->engine->params().min_chan_bytes));
  return {};
}

// Under c->mu: sequence key n of c for d: the lane and turn it names, and the board's key.
MatchKey sequence_key(const dfcclComm* c, core::Desc& d, uint64_t n) {
  const uint32_t lanes = c->engine->transport().seq_lanes;
  d.lane = uint16_t(n % lanes);
  d.turn = n / lanes;
  MatchKey key;
  key.n = n;
  return key;
}

// comm_submit's part under the communicator's lock: the match key, the board's check, the queueing. Returns the
// request, or null with *mismatch set when the peers submitted a different collective under this key.
std::shared_ptr<RequestState> submit_locked(dfcclComm* c, core::Desc d, int persistent_id,
                                            const PersistentRef* lane, cudaStream_t stream, std::string* mismatch) {
  std::lock_guard<std::mutex> lk(c->mu);
  Submitting submitting(c);
  MatchKey key;
  if (persistent_id < 0) {
    key = sequence_key(c, d, c->next_key);
  } else {
    key = {persistent_id, c->persistent_turn[persistent_id]};
    d.lane = uint16_t(lane->lane);
    d.turn = c->persistent_turn[persistent_id];
  }
  *mismatch = post_locked(c, key, d, d);
  if (!mismatch->empty()) return nullptr;
  d.cs = persistent_id < 0 ? c->host_dev.s : lane->cs;
  auto req = c->engine->submit(d, c->index, stream);
  if (persistent_id < 0) c->next_key += 1;  // only once queued: a refused submission must not shift the matching
  else c->persistent_turn[persistent_id] += 1;
  return req;
}

// comm_submit_p2p's part under the lock: each transfer's key on its (lane, direction, peer), the board's check, the
// queueing of all. Empty with *mismatch set when a peer's side of a transfer differs.
std::vector<std::shared_ptr<RequestState>> submit_p2p_locked(dfcclComm* c, std::vector<core::Desc>& parts,
                                                             uint32_t lane, cudaStream_t stream,
                                                             std::string* mismatch) {
  std::lock_guard<std::mutex> lk(c->mu);
  Submitting submitting(c);
  P2pConnections& p = c->p2p;
  if (p.nchan == 0)
    throw Error(dfcclInvalidUsage, "this communicator has no point-to-point connections (DFCCL_P2P_CHANNELS=0 or "
                                   "DFCCL_HOST_P2P_CHANNELS=0 at its init)");
  std::vector<int> peers;
  for (const core::Desc& d : parts) peers.push_back(d.root);
  p2p_claim(c, peers);
  std::vector<uint64_t> next = p.next;  // taken only once every part is queued
  const uint32_t min_chan = c->engine->params().min_chan_bytes;
  for (core::Desc& d : parts) {
    const int dir = d.kind == core::Kind::Send ? 0 : 1, peer = d.root;
    d.lane = uint16_t(lane);
    d.turn = next[(size_t(lane) * 2 + size_t(dir)) * size_t(c->nranks) + size_t(peer)]++;
    const P2pKey key{lane, dir == 0 ? c->rank : peer, dir == 0 ? peer : c->rank, d.turn};
    *mismatch = c->board->post_p2p(key, d);
    if (!mismatch->empty()) return {};
    mirror_post_p2p(c, key, d);
    d.cs = p2p_static(c, peer, dir);  // its connection's channels: both sides split the transfer alike
    core::set_channels(d, core::data_channels(d.count * core::dtype_size(d.dtype), d.cs.nchan, min_chan));
  }
  auto reqs = c->engine->submit_many(parts, c->index, stream);
  p.next = std::move(next);
  return reqs;
}

// A submission refused because the peers submitted differently: outside the lock and the submission (the abort waits
// for submissions), and after PeerWatch lets go of c (the abort releases the board and bootstrap its probe reads).
[[noreturn]] void fail_mismatch(dfcclComm* c, const std::string& mismatch) {
  mirror_mismatch(c, mismatch);  // the other hosts' ranks learn it from their proxies
  PeerWatch::remove(c);
  comm_fail_mismatch(c, mismatch);
  throw Error(dfcclInvalidUsage, mismatch);
}

}  // namespace

void comm_prepare(dfcclComm* c, int id) {
  Submitting submitting(c);  // an abort waits for the allocation
  persistent_prepare(c, id);
}

std::shared_ptr<RequestState> comm_submit(dfcclComm* c, core::Desc d, int persistent_id, cudaStream_t stream) {
  if (persistent_id < 0 && hierarchy_routes(c, d)) return hierarchy_submit(c, d, stream);
  std::string mismatch;
  PersistentRef lane{};
  if (persistent_id >= 0) {
    Submitting submitting(c);  // an abort waits for the mapping, which gives up once it sees the abort
    lane = persistent_lane(c, persistent_id);
  }
  auto req = submit_locked(c, d, persistent_id, &lane, stream, &mismatch);
  if (!req) fail_mismatch(c, mismatch);
  return req;
}

std::vector<std::shared_ptr<RequestState>> comm_submit_p2p(dfcclComm* c, std::vector<core::Desc> parts, uint32_t lane,
                                                           cudaStream_t stream) {
  std::string mismatch;
  auto reqs = submit_p2p_locked(c, parts, lane, stream, &mismatch);
  if (!mismatch.empty()) fail_mismatch(c, mismatch);
  return reqs;
}

std::vector<std::shared_ptr<RequestState>> comm_submit_chain(std::vector<ChainPart> parts, cudaStream_t stream) {
  std::vector<dfcclComm*> comms;  // each once, in the order of the parts
  std::vector<uint64_t> keys;     // how many keys each takes: its parts' largest `ahead` + 1
  for (const ChainPart& p : parts) {
    const size_t i = size_t(std::find(comms.begin(), comms.end(), p.comm) - comms.begin());
    if (i == comms.size()) {
      comms.push_back(p.comm);
      keys.push_back(0);
    }
    keys[i] = std::max(keys[i], p.ahead + 1);
  }
  std::string mismatch;
  std::vector<std::shared_ptr<RequestState>> reqs;
  {
    std::vector<std::unique_ptr<Submitting>> submitting;
    std::vector<std::unique_lock<std::mutex>> locks;
    for (dfcclComm* c : comms) {
      locks.emplace_back(c->mu);
      submitting.push_back(std::make_unique<Submitting>(c));
    }
    std::vector<core::Desc> descs;
    std::vector<uint32_t> indices;
    MatchKey called_key;  // the key of the collective the caller called: parts[0]'s
    for (ChainPart& p : parts) {
      const MatchKey key = sequence_key(p.comm, p.d, p.comm->next_key + p.ahead);
      if (&p == &parts.front()) called_key = key;
      else p.comm->board->set_parent_key(key, called_key);
      mismatch = post_locked(p.comm, key, p.signature, p.d);
      if (!mismatch.empty()) break;
      p.d.cs = p.comm->host_dev.s;
      descs.push_back(p.d);
      indices.push_back(p.comm->index);
    }
    if (mismatch.empty()) {
      reqs = parts.front().comm->engine->submit_chain(descs, indices, stream);
      for (size_t i = 0; i < comms.size(); ++i) comms[i]->next_key += keys[i];
    }
  }
  if (!mismatch.empty()) fail_mismatch(parts.front().comm, mismatch);
  return reqs;
}

}  // namespace dfccl
