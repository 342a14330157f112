#include "comm/comm_init.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "comm/comm_failure.h"
#include "comm/comm_submit.h"
#include "comm/links.h"
#include "comm/peer_watch.h"
#include "comm/shrink_net.h"
#include "match/board_mirror.h"
#include "match/match_board.h"
#include "settings/settings.h"
#include "transport/p2p.h"
#include "transport/p2p_table.h"
#include "transport/persistent.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/log.h"

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
  uint32_t graphs;  // DFCCL_GRAPHS: a graph lane, and captured lanes in the point-to-point connections
  ShrinkEndpoint shrink;  // where its shrink socket listens (family 0: it has none)
};

// What each rank publishes in the two rounds of make_regions: the transports it offers, then its region.
struct RegionInfo {
  uint32_t offer;  // transport_offer: the transports that reach every rank this rank connects with on this host
  uint32_t pad;
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
    // The executor's values (the same executor on every rank from here on). CUDA: the blocks are also bounded by
    // what the GPU holds.
    if (o.nchan != me.nchan) mismatch("DFCCL_BLOCKS", me.nchan, o.nchan);
    if (o.slot_bytes != me.slot_bytes) mismatch("DFCCL_SLOT_BYTES", me.slot_bytes, o.slot_bytes);
    if (o.nslots != me.nslots) mismatch("DFCCL_SLOTS", me.nslots, o.nslots);
    if (o.seq_lanes != me.seq_lanes) mismatch("DFCCL_LANES", me.seq_lanes, o.seq_lanes);
    if (o.persistent_lanes != me.persistent_lanes)
      mismatch("DFCCL_PERSISTENT_LANES", me.persistent_lanes, o.persistent_lanes);
    if (o.min_chan_bytes != me.min_chan_bytes) mismatch("DFCCL_MIN_CHAN_BYTES", me.min_chan_bytes, o.min_chan_bytes);
    if (o.p2p_chan != me.p2p_chan) mismatch("DFCCL_P2P_CHANNELS", me.p2p_chan, o.p2p_chan);
    if (o.net_force != me.net_force) mismatch("DFCCL_NET_FORCE", me.net_force, o.net_force);
    if (o.net_chan != me.net_chan) mismatch("DFCCL_NET_CHANNELS", me.net_chan, o.net_chan);
    if (o.net_slot_bytes != me.net_slot_bytes) mismatch("DFCCL_NET_SLOT_BYTES", me.net_slot_bytes, o.net_slot_bytes);
    if (o.hierarchy != me.hierarchy) mismatch("DFCCL_HIERARCHY", me.hierarchy, o.hierarchy);
    if (o.graphs != me.graphs) mismatch("DFCCL_GRAPHS", me.graphs, o.graphs);
  }
}

// What this rank tells the others at init (comm_init's first round).
RankInfo rank_info(const dfcclComm* c, const dfcclConfig_t& cfg, const Engine& e, const Bootstrap& b, int nranks) {
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
  mine.net_force = c->settings.net_force ? 1 : 0;
  mine.net_chan = c->settings.net_channels;
  mine.net_slot_bytes = c->settings.net_slot_bytes;
  mine.hierarchy = c->settings.hierarchy ? 1 : 0;
  mine.graphs = tp.graph_lane ? 1 : 0;
  if (c->shrink_listener) mine.shrink = c->shrink_listener->endpoint();
  return mine;
}

// How a failure that `reason` describes (a probe's or PeerWatch's text) is recorded in the liveness words.
Bootstrap::Cause cause_of(const std::string& reason) {
  auto starts = [&](const char* p) { return reason.rfind(p, 0) == 0; };
  if (starts("exited")) return Bootstrap::kCauseExited;
  if (starts("aborted the communicator")) return Bootstrap::kCauseAborted;
  if (starts("destroyed its communicator")) return Bootstrap::kCauseLeft;
  if (starts("has not been heard from") || starts("was not heard from") ||
      reason.find("not been heard from") != std::string::npos)
    return Bootstrap::kCauseSilent;
  if (starts("network connection") || starts("failed on the network")) return Bootstrap::kCauseNetwork;
  return Bootstrap::kCauseOther;
}

const char* cause_text(Bootstrap::Cause cause) {
  switch (cause) {
    case Bootstrap::kCauseExited: return "exited";
    case Bootstrap::kCauseSilent: return "has not been heard from (stopped, hung or cut off)";
    case Bootstrap::kCauseAborted: return "aborted the communicator";
    case Bootstrap::kCauseNetwork: return "failed on the network";
    case Bootstrap::kCauseLeft: return "destroyed its communicator before collectives that need it";
    default: return "failed";
  }
}

// The rank to name for a failure found on `rank`: a rank whose communicator ended on another rank's failure
// (kFailed) passes the blame to that rank, along the chain, with *reason the cause it recorded; else `rank` itself
// (*reason unchanged). The chain may end at this rank: its peers gave it up (stopped or cut off longer than their
// timeout), and it says so by naming itself.
int blame(const dfcclComm* c, int rank, std::string* reason) {
  int q = rank;
  for (int steps = 0; steps < c->nranks && c->bootstrap->peer_state(q) == Bootstrap::kFailed; ++steps) {
    const Bootstrap::PeerCause pc = c->bootstrap->peer_cause(q);
    if (pc.origin < 0 || pc.origin >= c->nranks || pc.origin == q) break;
    *reason = fmt::format("{} (found by rank {}, whose communicator failed on it{})", cause_text(pc.cause), q,
                          pc.origin == c->rank ? ": this rank was given up by its peers" : "");
    q = pc.origin;
  }
  return q;
}

// The notices of c's remote peers into this host's liveness words: an abort (kAborted), or the rank whose failure
// ended the peer's communicator (kFailed). A notice naming no rank of c is not believed.
void record_notices(dfcclComm* c) {
  for (const net::Proxy::Notice& n : net_notices(c)) {
    if (n.from < 0 || n.from >= c->nranks || n.from == c->rank || c->bootstrap->local(n.from)) continue;
    if (n.origin < 0) c->bootstrap->set_peer_state(n.from, Bootstrap::kAborted);
    else if (n.origin < c->nranks) c->bootstrap->set_peer_failed(n.from, n.origin, Bootstrap::Cause(n.cause));
  }
}

// A broken network connection of c (a peer that left cleanly is no failure; a proxy whose engine went says so first:
// net/proxy.h), reported at the second probe that finds it, or the tenth for a peer process on this host
// (DFCCL_NET_FORCE=1), so that one that died is named by its pidfd first: a process's sockets close before it has
// finished exiting.
std::string network_failure(const dfcclComm* c, int* rank, int* net_rounds) {
  int broken = -1;
  std::string m = net_failure(c, &broken);
  *net_rounds = m.empty() || c->bootstrap->peer_state(broken) == Bootstrap::kLeft ? 0 : *net_rounds + 1;
  if (*net_rounds > 0 && *net_rounds >= (c->bootstrap->local(broken) ? 10 : 2)) {
    *rank = broken;
    return m;
  }
  return {};
}

// What the liveness words say of peer i: "" (running, or left after every collective this rank called), or why c
// fails, with *rank the rank to name (blame). A peer that is still there but ended on another rank's failure
// (kFailed) is reported only when `relayed` (the caller's patience: this rank's own finding, where it has one, names
// the cause in its own words first); one that is gone (its process or its connections) at once.
std::string peer_end(const dfcclComm* c, int i, int* rank, bool relayed) {
  const uint64_t state = c->bootstrap->peer_state(i);
  *rank = i;
  std::string why;
  if (state == Bootstrap::kAborted) return "aborted the communicator";
  if (state == Bootstrap::kLeft) {
    int q = -1;
    why = departed_early(c, &q);
    return q == i ? why : std::string();
  }
  if (state != Bootstrap::kFailed || !relayed) return {};
  *rank = blame(c, i, &why);
  return why;
}

// Registers c with PeerWatch: a mismatch that any rank published on the match board fails it with
// dfcclInvalidUsage; its peers in other processes fail it when they exit without destroying it, abort it, destroy it
// before collectives that c has called, or fall silent for DFCCL_PEER_TIMEOUT_S (0: never) — on this host through
// their processes (`peers`) and the segment's liveness words, on other hosts through the network connections (their
// state words carry what their messages said: an abort notice sets kAborted, a relayed failure kFailed, a leave
// message kLeft). A peer whose communicator ended on another rank's failure (kFailed) passes the blame on (blame):
// the rank named is the one that failed first (invariant 8). Its probe beats this rank's heartbeat. Ranks that are
// threads of this process share its fate and are watched for mismatches only. The functions read c's bootstrap and
// board, which stay until PeerWatch::remove or the failure they report.
void watch_peers(dfcclComm* c, std::vector<PeerProcess> peers) {
  const uint64_t timeout_ns = c->settings.peer_timeout_ns;
  const bool other_processes = !peers.empty() || !c->bootstrap->all_local();
  PeerChecks checks;
  checks.peers = std::move(peers);
  checks.exited = [c](int rank, std::string* reason) {
    if (c->bootstrap->peer_state(rank) == Bootstrap::kRunning) return rank;  // reason: "exited"
    int named = -1;
    *reason = peer_end(c, rank, &named, true);
    return reason->empty() ? -1 : named;
  };
  auto net_rounds = std::make_shared<int>(0);    // probes in a row that found a network failure
  auto relay_rounds = std::make_shared<int>(0);  // probes that found a peer ended on another rank's failure
  // Silence counts from the start of this watch at the earliest: a peer's last beat may be its claim of the rank,
  // before an init that took longer than the timeout on a busy machine, and its own watch starts with this one.
  const uint64_t started = Bootstrap::now_ns();
  c->bootstrap->beat(started);
  checks.probe = [c, timeout_ns, other_processes, net_rounds, relay_rounds, started](int* rank) -> std::string {
    if (std::string m = c->board->published(); !m.empty()) {
      *rank = c->rank;
      return m;
    }
    if (!other_processes) return {};
    const uint64_t now = Bootstrap::now_ns();
    c->bootstrap->beat(now);
    record_notices(c);
    // Patience with a peer that ended on another rank's failure (peer_end), none when that rank is this one: its
    // peers gave it up, and it has no finding of its own to wait for.
    bool relayed = false, me = false;
    for (int i = 0; i < c->nranks; ++i) {
      if (i == c->rank || c->bootstrap->peer_state(i) != Bootstrap::kFailed) continue;
      relayed = true;
      me = me || c->bootstrap->peer_cause(i).origin == c->rank;
    }
    relayed = me || (relayed && ++*relay_rounds >= 5);
    for (int i = 0; i < c->nranks; ++i) {
      if (i == c->rank) continue;
      if (std::string why = peer_end(c, i, rank, relayed); !why.empty()) return why;
      if (c->bootstrap->peer_state(i) != Bootstrap::kRunning || !c->bootstrap->local(i)) continue;
      *rank = i;  // its heartbeat is in this host's segment (a remote one's is the network's: net_failure)
      const uint64_t last = std::max(c->bootstrap->peer_heartbeat(i), started);
      if (timeout_ns && now > last && now - last > timeout_ns)
        return fmt::format("has not been heard from for {} s (stopped or hung; DFCCL_PEER_TIMEOUT_S)",
                           (now - last) / 1000000000ull);
    }
    // Last, as its cause may be one found above; a broken connection to a rank that recorded another's failure
    // passes the blame on too.
    std::string m = network_failure(c, rank, net_rounds.get());
    if (!m.empty()) *rank = blame(c, *rank, &m);
    return m;
  };
  checks.on_failure = [c](int rank, const std::string& reason) {
    if (std::string m = c->board->published(); !m.empty()) return comm_fail_mismatch(c, m);
    const Bootstrap::Cause cause = cause_of(reason);
    net_tell_failed(c, rank, cause);  // ranks that only this rank's connections reach learn of it too
    comm_fail(c, rank, reason, cause);
  };
  PeerWatch::add(c, std::move(checks));
}

// L when hosts holds H >= 2 hosts of L >= 2 ranks each, host after host (each host's ranks consecutive); else 0.
int ranks_per_host(const std::vector<uint64_t>& hosts) {
  const size_t n = hosts.size();
  size_t l = 1;
  while (l < n && hosts[l] == hosts[0]) ++l;
  if (l < 2 || n % l != 0 || n / l < 2) return 0;
  for (size_t r = 0; r < n; ++r) {
    if (hosts[r] != hosts[r - r % l]) return 0;  // a host's ranks are not consecutive
    for (size_t b = 0; b < r - r % l; b += l)
      if (hosts[b] == hosts[r]) return 0;  // a host that came before
  }
  return int(l);
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
  const CommSettings env = CommSettings::read();
  if (c.executor < 0) c.executor = env.executor_host ? dfcclExecutorHost : dfcclExecutorCuda;
  if (c.executor != dfcclExecutorCuda && c.executor != dfcclExecutorHost)
    throw Error(dfcclInvalidArgument,
                fmt::format("argument 'config->executor' = {} is not a dfcclExecutor_t", c.executor));
  if (c.mode < 0) c.mode = env.mode_blocking ? dfcclModeBlocking : dfcclModePreemptive;
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
  if (c.initTimeoutMs < 0) c.initTimeoutMs = int(env.init_timeout_ms);
  return c;
}

namespace {

// comm_init, step 1: every rank's RankInfo (transport settings, device, host, process), checked to agree; the
// network plan (which ranks are remote) and the connections' shape follow from them. *hosts: every rank's host hash.
std::vector<RankInfo> agree_on_transport(dfcclComm* c, const dfcclConfig_t& cfg, std::vector<uint64_t>* hosts) {
  const RankInfo mine = rank_info(c, cfg, *c->engine, *c->bootstrap, c->nranks);
  std::vector<RankInfo> all(static_cast<size_t>(c->nranks));
  c->bootstrap->allgather(&mine, sizeof(mine), all.data());
  c->bootstrap->unlink();  // everybody has the segment mapped
  check_agreement(all, c->rank);
  for (const RankInfo& r : all) hosts->push_back(r.host_hash);
  if (c->shrink_listener)
    for (const RankInfo& r : all) c->shrink_listener->endpoints.push_back(r.shrink);
  net_plan(c, *hosts);
  c->geometry = net_geometry(c, c->engine->transport());
  return all;
}

// comm_init, step 2: the communicator's transport (transport.h: the best one that every rank offers; its regions in
// host memory when some rank is remote, as the network proxy writes into them, comm/links.h), this rank's region, the
// ring neighbours' regions mapped (a remote neighbour's: a shadow of this rank's), and the point-to-point connections.
void make_regions(dfcclComm* c, const std::vector<RankInfo>& all, uint32_t nlanes) {
  Executor& ex = c->engine->exec();
  const TransportParams& tp = c->engine->transport();
  const TransportParams& g = c->geometry;
  const int nranks = c->nranks, next = (c->rank + 1) % nranks, prev = (c->rank - 1 + nranks) % nranks;
  std::vector<int> devices;  // of the ranks of this host that this rank connects with (itself included)
  for (int q = 0; q < nranks; ++q)
    if (!c->net.remote[size_t(q)] && (tp.p2p_chan > 0 || q == next || q == prev))
      devices.push_back(all[size_t(q)].device);
  RegionInfo my_region{};
  my_region.offer = transport_offer(ex, devices, {.host_memory = c->net.any, .peer_memory = !c->settings.p2p_disable});
  std::vector<RegionInfo> regions(static_cast<size_t>(nranks));
  c->bootstrap->allgather(&my_region, sizeof(my_region), regions.data());
  std::vector<uint32_t> offers;
  for (const RegionInfo& r : regions) offers.push_back(r.offer);
  c->transport = choose_transport(ex, offers);
  Transport& t = *c->transport;
  const uint64_t region_bytes = core::region_bytes(g.nchan, nlanes, g.nslots, g.slot_bytes);
  c->region = t.alloc_region(region_bytes);
  my_region.region = c->region;
  c->bootstrap->allgather(&my_region, sizeof(my_region), regions.data());
  auto neighbour = [&](int q, RegionBlob& blob) {
    if (c->net.remote[size_t(q)]) return net_shadow(c, region_bytes, true);
    blob = regions[size_t(q)].region;
    return t.map_region(blob);
  };
  c->next_ptr = neighbour(next, c->next_blob);
  c->prev_ptr = (prev == next) ? c->next_ptr : neighbour(prev, c->prev_blob);
  c->bootstrap->barrier();
  t.mapped_by_all(c->region);
  p2p_connect(c);
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

dfcclComm* comm_init(int nranks, const dfcclUniqueId& id, int rank, const dfcclConfig_t& cfg,
                     std::function<std::string(int)> gone, const std::function<std::string()>& root_gone) {
  auto c = std::make_unique<dfcclComm>();
  c->config = cfg;
  c->rank = rank;
  c->nranks = nranks;
  try {
    // Every setting is checked here, also those that only a later call (abort, destroy, a wait) uses.
    check_all_settings();
    c->settings = CommSettings::read();
    c->engine = Engine::acquire(dfcclExecutor_t(cfg.executor), cfg.device, dfcclMode_t(cfg.mode));
    c->bootstrap = std::make_shared<Bootstrap>(
        id, rank, nranks, cfg.initTimeoutMs,
        Bootstrap::Areas{MatchBoard::bytes(nranks), p2p_table::p2p_table_bytes(nranks)}, root_gone);
    if (gone) c->bootstrap->set_watch(std::move(gone));
    c->token = c->bootstrap->token();
    c->one_host = c->bootstrap->all_local();
    if (!c->one_host || c->settings.net_force)  // the shrink's agreement then runs over TCP (comm/shrink_net.h)
      c->shrink_listener = make_shrink_listener(id);
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
    if (tp.graph_lane && !c->net.any) {  // before any capture: a capture may not allocate (comm/comm_graph.h)
      comm_prepare(c.get(), int(core::kGraphLaneId));
      const PersistentRef lane = persistent_lane(c.get(), int(core::kGraphLaneId));
      c->graph_cs = lane.cs;
      c->graph_lane = lane.lane;
      c->graph_ready = true;
    }
    c->bootstrap->set_watch({});  // the init's rounds only: later rounds (a split) wait as any init does
    log(LogLevel::Info, LogSubsys::Init,
        "communicator {}: rank {} of {} on device {} ({} executor, {} mode); to ranks {} and {} through {}", c->index,
        rank, nranks, cfg.device, cfg.executor == dfcclExecutorHost ? "host" : "CUDA",
        cfg.mode == dfcclModeBlocking ? "blocking" : "preemptive", c->host_dev.s.prev, c->host_dev.s.next,
        c->transport->name());
  } catch (...) {
    release(c.get(), Release::Free);
    throw;
  }
  return c.release();
}

dfcclComm* comm_split(dfcclComm* parent, int color, int key, const dfcclConfig_t* config) {
  // Each rank's color and key, and the outcome of its local checks (its config, the settings): a rank whose checks
  // fail is named with its reason on the other ranks of its color, which then fail at once instead of waiting for
  // it until the new communicator's init times out.
  struct SplitInfo {
    int32_t color, key, rank, code;
    char reason[240];
  };
  SplitInfo mine{color, key, parent->rank, dfcclSuccess, {}};
  std::exception_ptr local_failure;
  if (color != DFCCL_SPLIT_NOCOLOR) {
    try {
      check_all_settings();
      if (config) resolve_config(config, parent->rank);  // again below with the new rank, which the check ignores
    } catch (const Error& e) {
      local_failure = std::current_exception();
      mine.code = e.code();
      std::snprintf(mine.reason, sizeof(mine.reason), "%s", e.what());
    }
  }
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
  if (local_failure) std::rethrow_exception(local_failure);
  for (const SplitInfo& s : members)
    if (s.code != dfcclSuccess)
      throw Error(dfcclInvalidUsage,
                  fmt::format("dfcclCommSplit: rank {} of the parent communicator cannot join color {}: {}", s.rank,
                              color, std::string(s.reason, strnlen(s.reason, sizeof(s.reason)))));
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

void hierarchy_init(dfcclComm* c, const std::vector<uint64_t>& hosts) {
  if (!c->settings.hierarchy) return;
  const int l = ranks_per_host(hosts);
  if (l == 0) {
    const bool shared_host = std::set<uint64_t>(hosts.begin(), hosts.end()).size() < hosts.size();
    if (shared_host && hosts.front() != hosts.back() && c->rank == 0)
      log(LogLevel::Info, LogSubsys::Init,
          "DFCCL_HIERARCHY=1: the {} ranks are not hosts of equal rank counts, host after host: all-reduces take the "
          "ring",
          c->nranks);
    return;
  }
  dfcclComm::Hierarchy& h = c->hierarchy;
  h.local_size = l;
  h.local_rank = c->rank % l;
  try {
    h.intra = comm_split(c, c->rank / l, c->rank, nullptr);
    h.inter = comm_split(c, c->rank % l, c->rank, nullptr);
  } catch (...) {
    if (h.intra) comm_abort(h.intra);
    h.intra = h.inter = nullptr;
    h.local_size = 0;
    throw;
  }
  for (int i = 0; i < l; ++i) h.intra->hierarchy.parent_rank.push_back(c->rank - h.local_rank + i);
  for (int i = 0; i < c->nranks / l; ++i) h.inter->hierarchy.parent_rank.push_back(i * l + h.local_rank);
  for (dfcclComm* part : {h.intra, h.inter})
    part->board->set_names({part->hierarchy.parent_rank, c->nranks, uint64_t(l),
                            part == h.intra ? "of the hierarchical all-reduces' stages within the host"
                                            : "of the hierarchical all-reduces' stage across hosts",
                            c->board});
  h.intra->hierarchy.parent.store(c);
  h.inter->hierarchy.parent.store(c);
  c->bootstrap->barrier();  // no rank posts on a stage board (nor mirrors a post into one) before its names are set
  if (c->rank == 0)
    log(LogLevel::Info, LogSubsys::Init, "communicator {}: hierarchical all-reduce over {} hosts of {} ranks", c->index,
        c->nranks / l, l);
}

}  // namespace dfccl
