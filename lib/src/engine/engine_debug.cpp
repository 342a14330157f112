// The engine's diagnostics: its statistics (dfcclGetStats) and dfcclDebugDump, which shows what the host knows, what
// pinned memory shows (the blocks' heartbeats), and the device's side read through the control stream on a helper
// thread. Nothing here waits without bound: a dump is asked for exactly when something hangs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <iterator>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_name.h"

namespace dfccl {

using core::kMaxRings;
using core::kMaxSlots;

std::string Engine::heartbeats_text() const {
  const uint32_t nb = cfg_.params.nblocks;
  uint64_t newest = 0;
  for (uint32_t b = 0; b < nb; ++b) newest = std::max(newest, h_->heartbeat[b].now_ns);
  std::string out = fmt::format("  heartbeats (executor clock, newest {} ns):", newest);
  for (uint32_t b = 0; b < nb; ++b) {
    const core::Heartbeat& hb = h_->heartbeat[b];
    out += fmt::format(" b{}:e{}/age {} us/passes {}/active {}/first {}", b, hb.epoch, (newest - hb.now_ns) / 1000,
                       hb.passes, hb.nactive, int(hb.first_slot));
  }
  return out + "\n";
}

// debug_dump's host part, under the engine lock: the engine's counters, the blocks' heartbeats and the pending
// collectives as the host sees them (pinned memory: no CUDA call).
std::string Engine::host_state_text_locked() {
  std::string out = fmt::format(
      "engine device {}: daemon {} (epoch {}, launches {}, idle exits {}, stuck exits {}), submitted {}, completed "
      "{}, outstanding {}, stream waits listed {} (keeping the daemon {}; barrier probes issued {}, run {}), exit "
      "reason {}\n",
      exec_->device(), running_ ? "running" : "stopped", epoch_, launches_, exits_idle_, exits_stuck_, submitted_,
      completed_, slots_.outstanding(), __atomic_load_n(&h_->nwaits, __ATOMIC_ACQUIRE), waits_holding_locked(), probes_,
      __atomic_load_n(&h_->probe_done, __ATOMIC_ACQUIRE), __atomic_load_n(&h_->exit_reason, __ATOMIC_ACQUIRE));
  out += heartbeats_text();
  for (uint32_t s = 0; s < kMaxSlots; ++s) {
    const SlotTable::Use& use = slots_.use(s);
    if (!use.req) continue;
    const core::Desc& d = h_->desc[s];
    out += fmt::format("  host slot {}: seq {} comm {} lane {} turn {} kind {} count {} priority {} ring {}{}{}\n", s,
                       d.seq, d.comm, d.lane, d.turn, int(d.kind), d.count, d.priority, use.ring,
                       use.waited    ? " (stream-waited)"
                       : use.standin ? " (stream-waited, may stand in)"
                                     : "",
                       arrivals_text(use.comm, d));
  }
  for (uint32_t r = 0; r < kMaxRings; ++r)
    if (const SlotTable::Ring& ring = slots_.ring(r); ring.used)
      out += fmt::format("  ring {}: next position {}, outstanding {}\n", r, ring.next_pos, ring.outstanding);
  return out;
}

// What device_state_text needs, copied under the engine lock: the pending slots, the rings in use, the
// communicators' device addresses and attachment numbers.
Engine::DeviceSnapshot Engine::device_snapshot_locked() {
  DeviceSnapshot snap;
  for (uint32_t s = 0; s < kMaxSlots; ++s)
    if (slots_.use(s).req) {
      snap.slots.push_back({s, h_->desc[s].seq});
      snap.comm_pending[slots_.use(s).comm] = true;
    }
  for (uint32_t r = 0; r < kMaxRings; ++r)
    if (const SlotTable::Ring& ring = slots_.ring(r); ring.used && ring.next_pos != 0)
      snap.rings.push_back({r, ring.next_pos});
  for (uint32_t i = 0; i < core::kMaxComms; ++i) {
    snap.comm_dev[i] = __atomic_load_n(&comm_dev_[i], __ATOMIC_ACQUIRE);
    snap.comm_gen[i] = __atomic_load_n(&comm_gen_[i], __ATOMIC_RELAXED);
  }
  return snap;
}

// Reads device state through the control stream while the daemon may be running: a snapshot, not atomic.
void Engine::debug_dump(std::FILE* f, bool device_state) {
  // The engine lock may be held by a thread whose CUDA call is held by another thread's implicit synchronization:
  // wait for it at most a second, then print what pinned memory says (no lock, no CUDA call) and stop.
  std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
  if (!lock_within(lk, kLockWaitMs)) {
    std::string out = fmt::format(
        "engine device {}: engine lock busy for {} ms (a thread inside a CUDA call?); pinned memory: stream waits "
        "listed {}, barrier probes run {}, exit reason {}\n",
        exec_->device(), kLockWaitMs, __atomic_load_n(&h_->nwaits, __ATOMIC_ACQUIRE),
        __atomic_load_n(&h_->probe_done, __ATOMIC_ACQUIRE), __atomic_load_n(&h_->exit_reason, __ATOMIC_ACQUIRE));
    out += heartbeats_text();
    std::fwrite(out.data(), 1, out.size(), f);
    std::fflush(f);
    return;
  }
  std::string out = host_state_text_locked();
  std::fwrite(out.data(), 1, out.size(), f);
  std::fflush(f);
  out.clear();
  if (!device_state) return;
  // The device's side is read through the control stream, which an implicit synchronization pending in this process
  // (cudaFree, a lazy module load) holds until the daemon leaves, and a dump is asked for exactly when something
  // hangs. So: snapshot under the lock what the reads need, read on a helper thread that keeps the engine alive, and
  // wait for it at most kDumpDeviceWaitMs; past that, say so and return (the helper finishes whenever the stream
  // moves).
  DeviceSnapshot snap = device_snapshot_locked();
  lk.unlock();
  auto text = std::make_shared<std::promise<std::string>>();
  std::future<std::string> done = text->get_future();
  std::thread([self = shared_from_this(), snap = std::move(snap), text]() {
    name_this_thread("dump");
    try {
      text->set_value(self->device_state_text(snap));
    } catch (const std::exception& e) {
      text->set_value(fmt::format("engine device {}: device state not read: {}\n", self->exec_->device(), e.what()));
    }
  }).detach();
  if (done.wait_for(std::chrono::milliseconds(kDumpDeviceWaitMs)) == std::future_status::ready) {
    out = done.get();
  } else {
    out =
        fmt::format("engine device {}: device state not read within {} ms: the control stream is held (an implicit "
                    "synchronization of this process, such as cudaFree or a lazy module load, waits for the daemon)\n",
                    exec_->device(), kDumpDeviceWaitMs);
  }
  std::fwrite(out.data(), 1, out.size(), f);
  std::fflush(f);
}

// The device-state part of debug_dump, from a snapshot taken under the lock (no engine state is read here but
// through the executor). Blocks while the control stream is held.
std::string Engine::device_state_text(const DeviceSnapshot& snap) {
  const uint32_t nb = cfg_.params.nblocks;
  std::string out = fmt::format("engine device {}: device state\n", exec_->device());
  // Who runs the scheduler (scheduler/owner.h): the owner word's tag, leaving mark and blocks; waits counted.
  uint64_t owner = 0, waiters = 0;
  exec_->copy_from_device(&owner, &g_->owner, sizeof(owner));
  exec_->copy_from_device(&waiters, &g_->graph_waiters, sizeof(waiters));
  out += fmt::format("  owner: {} (tag {:#x}{}, {} blocks); waits that may stand in, running: {}\n",
                     owner == 0                                 ? "none"
                     : core::is_standin(core::owner_tag(owner)) ? "a stand-in"
                                                                : "a host launch",
                     core::owner_tag(owner), (owner & core::kOwnerLeaving) != 0 ? ", leaving" : "",
                     owner & core::kOwnerMembers, waiters);
  std::vector<core::ChanCtx> cx(nb);
  for (const auto& [s, seq] : snap.slots) {
    uint64_t complete = 0;
    exec_->copy_from_device(&complete, &g_->complete[s], sizeof(complete));
    exec_->copy_from_device(cx.data(), ctx_ + size_t(s) * nb, sizeof(core::ChanCtx) * nb);
    out += fmt::format("  slot {}: seq {} complete word {}; blocks:", s, seq, complete);
    // Blocks grouped by what they hold for this slot: (seq seen, state, next primitive).
    for (uint32_t b = 0; b < nb;) {
      uint32_t e = b + 1;
      auto same = [&](uint32_t j) {
        return cx[j].desc.seq == cx[b].desc.seq && cx[j].state == cx[b].state && cx[j].op == cx[b].op;
      };
      while (e < nb && same(e)) ++e;
      out += fmt::format(" [{}-{}: seq {} state {} op {} preempted {}]", b, e - 1, cx[b].desc.seq, cx[b].state,
                         cx[b].op, cx[b].preemptions);
      b = e;
    }
    out += "\n";
  }
  // Doorbells: how far each ring's stream writes have reached on the device (they run in stream order).
  for (const auto& [r, next] : snap.rings) {
    std::array<uint64_t, core::kRingEntries> ring{};
    exec_->copy_from_device(ring.data(), g_->ring[r], sizeof(ring));
    const uint64_t lo = next > core::kRingEntries ? next - core::kRingEntries : 0;
    uint64_t rung = lo;  // one past the newest position whose doorbell the device holds
    for (uint64_t p = next; p > lo; --p)
      if ((ring[(p - 1) % core::kRingEntries] >> 16) == p) {
        rung = p;
        break;
      }
    out += fmt::format("  ring {}: doorbells on the device up to position {} of {}{}\n", r, rung, next,
                       rung < next ? " (the rest not rung yet: held in their streams)" : "");
  }
  for (uint32_t i = 0; i < core::kMaxComms; ++i)
    if (snap.comm_pending[i] && snap.comm_dev[i]) out += comm_lanes_text(snap, i);
  return out;
}

// device_state_text's line for communicator i (pending work, attached): whether it is aborted on the host and on the
// device, and its lanes' turn (next instance allowed), slots sent and received on channel 0.
std::string Engine::comm_lanes_text(const DeviceSnapshot& snap, uint32_t i) {
  core::CommDev c{};
  exec_->copy_from_device(&c, snap.comm_dev[i], sizeof(c));
  uint64_t device_gen = 0;  // the daemon's copy of the abort table (EngineGlobal::abort_gen)
  exec_->copy_from_device(&device_gen, &g_->abort_gen[i], sizeof(device_gen));
  const bool host_aborted = __atomic_load_n(&h_->abort_gen[i], __ATOMIC_ACQUIRE) == snap.comm_gen[i];
  std::vector<core::LaneState> lanes(c.s.nlanes);
  exec_->copy_from_device(lanes.data(), c.s.lanes, sizeof(core::LaneState) * c.s.nlanes);
  const char* aborted = !host_aborted                    ? "no"
                        : device_gen == snap.comm_gen[i] ? "yes"
                                                         : "yes (not seen by the daemon yet)";
  std::string out = fmt::format("  comm {}: rank {} of {}, aborted {}; channel 0 lanes (turn/sent/recvd):", i, c.s.rank,
                                c.s.nranks, aborted);
  for (uint32_t l = 0; l < c.s.nlanes; ++l)
    if (lanes[l].turn || lanes[l].sent || lanes[l].recvd)
      out += fmt::format(" {}:{}/{}/{}", l, lanes[l].turn, lanes[l].sent, lanes[l].recvd);
  return out + "\n";
}

// The core's phases are dfccl.h's, in its order: profileNs[k] is core phase k.
constexpr bool same_phase(core::Phase core, dfcclProfilePhase_t api) { return int(core) == int(api); }
static_assert(int(core::kNumPhases) == int(dfcclNumProfilePhases) && same_phase(core::kPhaseCheck, dfcclProfileCheck) &&
              same_phase(core::kPhaseMove, dfcclProfileMove) && same_phase(core::kPhasePost, dfcclProfilePost) &&
              same_phase(core::kPhaseProgram, dfcclProfileProgram) && same_phase(core::kPhasePoll, dfcclProfilePoll) &&
              same_phase(core::kPhaseExit, dfcclProfileExit) && same_phase(core::kPhaseLaunch, dfcclProfileLaunch));

dfcclStats_t Engine::stats() {
  dfcclStats_t s{};
  std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
  if (!lock_within(lk, kLockWaitMs))
    throw Error(dfcclTimeout, fmt::format("dfcclGetStats: the engine of device {} was busy for {} ms (a thread inside "
                                          "a CUDA call that an implicit synchronization holds?)",
                                          exec_->device(), kLockWaitMs));
  s.submitted = submitted_;
  s.completed = completed_;
  double cycles[core::kNumPhases] = {}, ns = 0;
  for (uint32_t b = 0; b < cfg_.params.nblocks; ++b) {
    s.preemptions += h_->stats[b].preemptions;
    s.contextSwitches += h_->stats[b].switches;
    s.primitives += h_->stats[b].primitives;
    for (uint32_t k = 0; k < core::kNumPhases; ++k) cycles[k] += double(h_->stats[b].prof[k]);
    ns += double(h_->stats[b].prof_ns);
  }
  s.descPrefetched = h_->stats[0].prefetched;  // block 0: every small collective's data channel
  // Phase profile: cycles of the blocks' clocks, converted with the launches' own cycles per nanosecond.
  if (cycles[core::kPhaseLaunch] > 0)
    for (uint32_t k = 0; k < core::kNumPhases; ++k)
      s.profileNs[k] = uint64_t(cycles[k] * ns / cycles[core::kPhaseLaunch]);
  s.daemonLaunches = launches_;
  s.daemonExitsIdle = exits_idle_;
  s.daemonExitsStuck = exits_stuck_;
  s.lateDoorbells = late_doorbells_;
  s.outstanding = slots_.outstanding();
  s.streamWaited = waits_holding_locked();
  s.daemonRunning = running_ ? 1 : 0;
  s.standbyLaunches = standby_launches_;
  s.standinRuns = standin_runs();
  return s;
}

void Engine::log_graph_trace() {
  if constexpr (!core::kProfile) return;
  if (!log_enabled(LogLevel::Info, LogSubsys::Engine)) return;
  using T = uint64_t[core::kGraphStamps];
  std::vector<T> t(core::kGraphTraceN);
  exec_->copy_from_device(t.data(), g_->graph_trace, sizeof(T) * core::kGraphTraceN);
  // Phases: the start node's own work, its post to block 0's pick-up, the core, the wait's block 0 entry after the
  // post, its sight of the completion, and the next instance's start node after it (the wait's end and the launch
  // of the next node), each where both stamps exist.
  const char* names[] = {"start node",         "post to pick-up",   "pick-up to done",
                         "post to wait entry", "done to wait seen", "wait seen to next start"};
  constexpr size_t kPhases = std::size(names);
  std::vector<double> ph[kPhases];
  auto add = [&](int k, uint64_t from, uint64_t to) {
    if (from != 0 && to >= from) ph[k].push_back(double(to - from));
  };
  size_t traced = 0, stood_in = 0;
  for (uint32_t i = 0; i < core::kGraphTraceN; ++i) {
    const T& a = t[i];
    const T& n = t[(i + 1) % core::kGraphTraceN];
    if (a[core::kStampStart] == 0 || a[core::kStampWaitSeen] == 0) continue;
    ++traced;
    stood_in += a[core::kStampStoodIn];
    add(0, a[core::kStampStart], a[core::kStampPosted]);
    add(1, a[core::kStampPosted], a[core::kStampPicked]);
    add(2, a[core::kStampPicked], a[core::kStampDone]);
    add(3, a[core::kStampPosted], a[core::kStampWaitIn]);
    add(4, a[core::kStampDone], a[core::kStampWaitSeen]);
    if (n[core::kStampStart] < a[core::kStampWaitSeen] + 1000000) add(5, a[core::kStampWaitSeen], n[core::kStampStart]);
  }
  if (traced == 0) return;
  std::string out = fmt::format("graph path of device {}, {} captured instances traced ({} waits stood in), median ns:",
                                exec_->device(), traced, stood_in);
  for (size_t k = 0; k < kPhases; ++k) {
    std::vector<double>& v = ph[k];
    if (v.empty()) continue;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    out += fmt::format(" {} {:.0f} (n {});", names[k], v[v.size() / 2], v.size());
  }
  log(LogLevel::Info, LogSubsys::Engine, "{}", out);
  log_slow_instances(t);
}

// kProfile builds: the first instances (at most 3) that took more than 50 us from their start node's entry to their
// wait's sight of the completion, each with every stamp and launch (core::LaunchStamp) from 100 us before its start to
// its end, in time order, relative to its start.
void Engine::log_slow_instances(const std::vector<uint64_t[core::kGraphStamps]>& t) {
  std::vector<core::LaunchStamp> launches(core::kLaunchTraceN);
  exec_->copy_from_device(launches.data(), g_->launch_trace, sizeof(core::LaunchStamp) * core::kLaunchTraceN);
  const char* stamp_names[] = {"start", "posted", "picked", "done", "wait in", "wait seen"};
  int shown = 0;
  for (uint32_t i = 0; i < core::kGraphTraceN && shown < 3; ++i) {
    const uint64_t t0 = t[i][core::kStampStart], t1 = t[i][core::kStampWaitSeen];
    if (t0 == 0 || t1 < t0 + 50000) continue;
    ++shown;
    std::vector<std::pair<uint64_t, std::string>> ev;
    const auto add = [&](uint64_t at, std::string what) {
      if (at != 0 && at + 100000 >= t0 && at <= t1) ev.emplace_back(at, std::move(what));
    };
    for (uint32_t j = 0; j < core::kGraphTraceN; ++j)
      for (uint32_t k = 0; k < std::size(stamp_names); ++k)
        add(t[j][k], fmt::format("#{} {}{}", j, stamp_names[k],
                                 k == core::kStampWaitSeen && t[j][core::kStampStoodIn] ? " (stood in)" : ""));
    for (const core::LaunchStamp& l : launches) {
      // A stand-in's tag holds its instance's sequence number (core::standin_tag); a captured one is named by its
      // trace index, as its stamps are.
      const uint64_t seq = l.tag & (core::kStandInCaptured - 1);
      std::string who = fmt::format("daemon {}", l.tag);
      if (core::is_standin(l.tag))
        who = (l.tag & core::kStandInCaptured) != 0 ? fmt::format("stand-in for #{}", (seq - 1) % core::kGraphTraceN)
                                                    : fmt::format("stand-in for eager {}", seq);
      add(l.entry, who + " entered");
      add(l.decided, who + (l.runs ? " owns the engine" : " yields"));
      add(l.left, who + " left");
    }
    std::sort(ev.begin(), ev.end());
    std::string out = fmt::format("slow captured instance #{} ({} us):", i, (t1 - t0) / 1000);
    for (const auto& [at, what] : ev) out += fmt::format(" {:+.1f} {};", (double(at) - double(t0)) / 1000, what);
    log(LogLevel::Info, LogSubsys::Engine, "{}", out);
  }
}

}  // namespace dfccl
