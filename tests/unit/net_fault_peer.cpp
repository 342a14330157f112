// net_fault_peer: one rank of the network fault tests (tests/netns/net_faults_test.sh starts one per fake host).
//   net_fault_peer SCENARIO --rank R --nranks N --victim V --dir D [--bound-ms B] [--init-timeout-ms T]
//                  [--late-ms L]
// Rank 0 makes the unique id and writes it (hex) to D/id; the others wait up to 30 s for it. Every rank inits
// (host executor), runs one exact all-reduce so that every network connection is up, checks that its ring goes
// through the network transport, then:
//   kill | stop | cut   the victim writes the time of its fault (CLOCK_MONOTONIC ns) to D/event, then raises SIGKILL,
//                       raises SIGSTOP, or runs $NET_FAULT_CUT (a command that cuts its link) and waits for D/release;
//   remote_abort        the victim writes D/event, calls dfcclCommAbort and stays alive until D/release exists;
//   abort_exit          the same, but the victim's process exits right after its abort (its proxy says goodbye);
//                       in these five the survivors (every other rank) submit an all-reduce that needs the victim and
//                       must see it fail with dfcclRemoteError naming rank V (after an abort: "aborted the
//                       communicator"; after stop or cut: "has not been heard from") within B ms of D/event, the
//                       asynchronous error report it, and dfcclCommDestroy return within 1 s;
//   resume              as stop, and each survivor, once it has checked its error, writes D/detected<R> and keeps
//                       its communicator (its proxy beating) until D/resumed exists; the script then sends the victim
//                       SIGCONT. The resumed victim must not blame its peers for the silence it could not observe
//                       while stopped: within 1 s (10 heartbeats) its communicator fails naming itself (its peers
//                       gave it up: their notices name it), and a new all-reduce is refused so; it then writes
//                       D/resumed and exits without destroying (its peers' communicators have failed);
//   late                the victim sleeps L ms (5000; longer than the network timeout) before its all-reduce:
//                       every rank completes exactly, no error;
//   abort               every rank but the victim submits an all-reduce; 300 ms later each calls dfcclCommAbort (the
//                       victim 600 ms later), which must return within 1 s (the pending collective then ends, not with
//                       dfcclSuccess); a rank whose collective was still pending prints "with a network collective
//                       pending";
//   mismatch            every rank submits an all-reduce, the victim 200 ms after the others and with half the count
//                       (each rank on its own host: only the match board across hosts can compare them): every rank,
//                       the victim too, must see it fail with dfcclInvalidUsage naming argument 'count' and rank V
//                       within B ms of its submission, and dfcclCommDestroy return within 1 s;
//   missing             rank V is never started: init (config.initTimeoutMs = T) must fail with dfcclTimeout naming
//                       "rank V of N" within T + 3 s.
// Environment: NET_FAULT_RANKS_PER_HOST=L (net_faults_test.sh puts L ranks on each host): the victim's host mate may
// hear of a silence relayed, and survivors stay until every survivor has seen the fault (D/detected<R>);
// NET_FAULT_EXPECT_HIERARCHY=L: the communicator's all-reduce must be hierarchical over hosts of L ranks.
// Each rank prints one line "rank R: <outcome> ... ms" with the times it measured. Exit codes: 0 every check held,
// 1 usage or set-up error, 2 a check failed (printed on stderr as "rank R: FAIL ...").
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "peer_files.h"
#include "unique_id_hex.h"

namespace {

constexpr size_t kCount = 4096;
constexpr double kDestroyBoundMs = 1000, kAbortBoundMs = 1000;

struct Args {
  std::string scenario, dir;
  int rank = -1, nranks = 0, victim = 1, bound_ms = 2000, init_timeout_ms = 3000, late_ms = 5000;
};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

double ms_between(uint64_t a, uint64_t b) { return double(int64_t(b - a)) / 1e6; }

using dfccl::test::id_from_hex;
using dfccl::test::id_to_hex;
using dfccl::test::read_file;
using dfccl::test::write_file;

// Records a failed check of this rank (stderr) and returns false.
bool fail(const Args& a, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL %s\n", a.rank, what.c_str());
  return false;
}

bool check(const Args& a, bool ok, const std::string& what) { return ok || fail(a, what); }

// Rank 0 makes the id and publishes it in D/id; the others read it.
bool get_id(const Args& a, dfcclUniqueId* id) {
  if (a.rank == 0) {
    if (dfcclGetUniqueId(id) != dfcclSuccess)
      return fail(a, std::string("dfcclGetUniqueId: ") + dfcclGetLastError(nullptr));
    write_file(a.dir + "/id", id_to_hex(*id));
    return true;
  }
  return id_from_hex(read_file(a.dir + "/id", 30000), id) || fail(a, "no unique id in " + a.dir + "/id within 30 s");
}

dfcclResult_t init(const Args& a, const dfcclUniqueId& id, dfcclComm_t* comm) {
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  cfg.initTimeoutMs = a.init_timeout_ms;
  return dfcclCommInitRankConfig(comm, a.nranks, id, a.rank, &cfg);
}

// An all-reduce of rank+1 over every rank; *q is its request.
dfcclResult_t submit(dfcclComm_t comm, int rank, std::vector<int32_t>& in, std::vector<int32_t>& out,
                     dfcclRequest_t* q) {
  in.assign(kCount, rank + 1);
  out.assign(kCount, 0);
  return dfcclAllReduce(in.data(), out.data(), kCount, dfcclInt32, dfcclSum, comm, 0, nullptr, q);
}

// One all-reduce that must complete exactly within timeout_ms.
bool exact_allreduce(const Args& a, dfcclComm_t comm, int timeout_ms) {
  std::vector<int32_t> in, out;
  dfcclRequest_t q = nullptr;
  const dfcclResult_t s = submit(comm, a.rank, in, out, &q);
  const dfcclResult_t done = s == dfcclSuccess ? dfcclSynchronize(q, timeout_ms) : s;
  const std::string err = dfcclGetLastError(nullptr);
  if (q) dfcclRequestFree(q);
  if (done != dfcclSuccess) return fail(a, std::string("all-reduce: ") + dfcclGetErrorString(done) + ": " + err);
  const int32_t want = a.nranks * (a.nranks + 1) / 2;
  for (int32_t v : out)
    if (v != want)
      return fail(a, "all-reduce: wrong result " + std::to_string(v) + ", expected " + std::to_string(want));
  return true;
}

// The victim after SIGCONT (scenario resume): its peers kept beating while it was stopped and gave it up; it must
// name itself, never a peer.
bool victim_resumed(const Args& a, dfcclComm_t comm) {
  const uint64_t t0 = now_ns();
  dfcclResult_t async = dfcclSuccess;
  while (async == dfcclSuccess && ms_between(t0, now_ns()) < 1000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (dfcclCommGetAsyncError(comm, &async) != dfcclSuccess) async = dfcclInternalError;
  }
  const double ms = ms_between(t0, now_ns());
  std::vector<int32_t> in, out;
  dfcclRequest_t q = nullptr;
  const dfcclResult_t again = submit(comm, a.rank, in, out, &q);
  const std::string err = again == dfcclSuccess ? std::string() : dfcclGetLastError(nullptr);
  std::printf("rank %d: resumed; %s %.0f ms after SIGCONT: %s\n", a.rank, dfcclGetErrorString(async), ms, err.c_str());
  write_file(a.dir + "/resumed", "1");
  const std::string me = "rank " + std::to_string(a.rank) + " of the communicator";
  bool ok = check(
      a, async == dfcclRemoteError,
      std::string("the resumed victim's async error is ") + dfcclGetErrorString(async) + ", not dfcclRemoteError");
  ok &= check(a, err.find(me) != std::string::npos,
              "the resumed victim does not name itself (its DFCCL WARN line says whom and why): '" + err + "'");
  std::fflush(nullptr);
  _exit(ok ? 0 : 2);  // no destroy: its peers' communicators have failed and are gone or going
}

// The victim's fault; returns only for faults that leave it running (cut, remote_abort).
bool victim_fault(const Args& a, dfcclComm_t comm) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the survivors' all-reduce is pending by then
  const char* cut = std::getenv("NET_FAULT_CUT");
  if (a.scenario == "cut" && !cut) return fail(a, "scenario cut needs NET_FAULT_CUT (the command that cuts the link)");
  write_file(a.dir + "/event", std::to_string(now_ns()));
  if (a.scenario == "kill") raise(SIGKILL);
  if (a.scenario == "stop" || a.scenario == "resume") raise(SIGSTOP);
  if (a.scenario == "resume") return victim_resumed(a, comm);
  if (a.scenario == "cut" && std::system(cut) != 0) return fail(a, std::string("'") + cut + "' failed");
  if (a.scenario == "remote_abort" || a.scenario == "abort_exit") {
    const uint64_t t0 = now_ns();
    const dfcclResult_t r = dfcclCommAbort(comm);
    std::printf("rank %d: aborted the communicator in %.1f ms\n", a.rank, ms_between(t0, now_ns()));
    if (r != dfcclSuccess) return fail(a, std::string("dfcclCommAbort: ") + dfcclGetErrorString(r));
    if (a.scenario == "abort_exit") return true;
  }
  // Alive, so that what the survivors see is the fault and not this process's exit.
  read_file(a.dir + "/release", 60000);
  return true;
}

// A survivor: its pending all-reduce must fail with dfcclRemoteError naming the victim within the bound.
// NET_FAULT_RANKS_PER_HOST (net_faults_test.sh): ranks per host, 1 unless set.
int ranks_per_host() {
  const char* per = std::getenv("NET_FAULT_RANKS_PER_HOST");
  return per ? std::max(1, std::atoi(per)) : 1;
}

bool survivor(const Args& a, dfcclComm_t comm) {
  std::vector<int32_t> in, out;
  dfcclRequest_t q = nullptr;
  if (submit(comm, a.rank, in, out, &q) != dfcclSuccess)
    return fail(a, std::string("dfcclAllReduce: ") + dfcclGetLastError(nullptr));
  const dfcclResult_t st = dfcclSynchronize(q, a.bound_ms + 5000);
  const uint64_t t_err = now_ns();
  const std::string err = dfcclGetLastError(nullptr);
  const std::string event = read_file(a.dir + "/event", 1000);
  const double ms = event.empty() ? -1 : ms_between(std::strtoull(event.c_str(), nullptr, 10), t_err);
  dfcclResult_t async = dfcclSuccess;
  dfcclCommGetAsyncError(comm, &async);
  if (q) dfcclRequestFree(q);
  if (a.scenario == "resume") {  // keep beating until the victim, continued, has checked that it blames nobody
    write_file(a.dir + "/detected" + std::to_string(a.rank), "1");
    read_file(a.dir + "/resumed", 60000);
  } else if (ranks_per_host() > 1) {  // a survivor's exit would be the next failure its host mate sees: stay until
    write_file(a.dir + "/detected" + std::to_string(a.rank), "1");  // every survivor has seen the victim's
    for (int r = 0; r < a.nranks; ++r)
      if (r != a.victim) read_file(a.dir + "/detected" + std::to_string(r), 10000);
  }
  const uint64_t t0 = now_ns();
  const dfcclResult_t d = dfcclCommDestroy(comm);
  const double destroy_ms = ms_between(t0, now_ns());
  std::printf("rank %d: %s %.0f ms after the fault (bound %d ms), destroy %.1f ms: %s\n", a.rank,
              dfcclGetErrorString(st), ms, a.bound_ms, destroy_ms, err.c_str());
  const std::string who = "rank " + std::to_string(a.victim) + " of the communicator";
  bool ok = check(a, st == dfcclRemoteError, std::string("the collective ended with ") + dfcclGetErrorString(st));
  ok &= check(a, err.find(who) != std::string::npos, "the error does not name " + who + ": '" + err + "'");
  // A rank with no connection to the victim (DFCCL_P2P_CHANNELS=0) hears of the abort from one that has.
  if (a.scenario == "remote_abort" || a.scenario == "abort_exit")
    ok &= check(a, err.find("aborted the communicator") != std::string::npos, "the error does not say 'aborted'");
  // Found by this rank ("has not been heard from") or by another that told it ("was not heard from ... found by
  // rank q"): the victim's host mate (NET_FAULT_RANKS_PER_HOST > 1) watches it by its heartbeat in shared memory,
  // whose timeout (DFCCL_PEER_TIMEOUT_S) is longer, and hears of the silence from a rank of another host.
  if (a.scenario == "stop" || a.scenario == "cut" || a.scenario == "resume")
    ok &= check(a, err.find("heard from") != std::string::npos, "the error does not name the silence");
  ok &= check(a, ms >= 0 && ms <= a.bound_ms, "detected " + std::to_string(ms) + " ms after the fault");
  ok &= check(a, async == dfcclRemoteError, std::string("async error ") + dfcclGetErrorString(async));
  ok &= check(a, d == dfcclSuccess, std::string("dfcclCommDestroy: ") + dfcclGetErrorString(d));
  return check(a, destroy_ms < kDestroyBoundMs, "dfcclCommDestroy took " + std::to_string(destroy_ms) + " ms") && ok;
}

std::string fmt_late(int ms) { return " (the late rank, " + std::to_string(ms) + " ms late)"; }

bool run_late(const Args& a, dfcclComm_t comm) {
  if (a.rank == a.victim) std::this_thread::sleep_for(std::chrono::milliseconds(a.late_ms));
  const uint64_t t0 = now_ns();
  bool ok = exact_allreduce(a, comm, 60000);
  std::printf("rank %d: all-reduce %s after %.0f ms%s\n", a.rank, ok ? "exact" : "FAILED", ms_between(t0, now_ns()),
              a.rank == a.victim ? fmt_late(a.late_ms).c_str() : "");
  return check(a, dfcclCommDestroy(comm) == dfcclSuccess, "dfcclCommDestroy failed") && ok;
}

bool run_abort(const Args& a, dfcclComm_t comm) {
  std::vector<int32_t> in, out;
  dfcclRequest_t q = nullptr;
  if (a.rank != a.victim && submit(comm, a.rank, in, out, &q) != dfcclSuccess)
    return fail(a, std::string("dfcclAllReduce: ") + dfcclGetLastError(nullptr));
  // The victim, which has no collective, aborts last: the others' collectives are still pending when they abort.
  std::this_thread::sleep_for(std::chrono::milliseconds(a.rank == a.victim ? 600 : 300));
  int done = 0;
  if (q) dfcclTest(q, &done);
  const uint64_t t0 = now_ns();
  const dfcclResult_t r = dfcclCommAbort(comm);
  const double ms = ms_between(t0, now_ns());
  const dfcclResult_t st = q ? dfcclSynchronize(q, 1000) : dfcclAborted;
  if (q) dfcclRequestFree(q);
  std::printf("rank %d: dfcclCommAbort returned in %.1f ms (bound %.0f ms)%s; the collective ended with %s\n", a.rank,
              ms, kAbortBoundMs, q && !done ? " with a network collective pending" : "", dfcclGetErrorString(st));
  bool ok = check(a, r == dfcclSuccess, std::string("dfcclCommAbort: ") + dfcclGetErrorString(r));
  ok &= check(a, st != dfcclSuccess && st != dfcclTimeout,
              "the pending collective ended with " + std::string(dfcclGetErrorString(st)));
  return check(a, ms < kAbortBoundMs, "dfcclCommAbort took " + std::to_string(ms) + " ms") && ok;
}

bool run_mismatch(const Args& a, dfcclComm_t comm) {
  if (a.rank == a.victim) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<int32_t> in(kCount, a.rank + 1), out(kCount, 0);
  const size_t count = a.rank == a.victim ? kCount / 2 : kCount;
  dfcclRequest_t q = nullptr;
  const uint64_t t0 = now_ns();
  dfcclResult_t st = dfcclAllReduce(in.data(), out.data(), count, dfcclInt32, dfcclSum, comm, 0, nullptr, &q);
  if (st == dfcclSuccess) st = dfcclSynchronize(q, a.bound_ms + 5000);
  const double ms = ms_between(t0, now_ns());
  const std::string err = dfcclGetLastError(nullptr);
  dfcclResult_t async = dfcclSuccess;
  dfcclCommGetAsyncError(comm, &async);
  if (q) dfcclRequestFree(q);
  const uint64_t t1 = now_ns();
  const dfcclResult_t d = dfcclCommDestroy(comm);
  const double destroy_ms = ms_between(t1, now_ns());
  std::printf("rank %d: %s %.0f ms after its submission (bound %d ms), destroy %.1f ms: %s\n", a.rank,
              dfcclGetErrorString(st), ms, a.bound_ms, destroy_ms, err.c_str());
  const std::string who = "rank " + std::to_string(a.victim);
  bool ok = check(a, st == dfcclInvalidUsage, std::string("the collective ended with ") + dfcclGetErrorString(st));
  ok &= check(a, err.find("argument 'count'") != std::string::npos && err.find(who) != std::string::npos,
              "the error does not name argument 'count' and " + who + ": '" + err + "'");
  ok &= check(a, ms <= a.bound_ms, "detected " + std::to_string(ms) + " ms after the submission");
  ok &= check(a, async == dfcclInvalidUsage, std::string("async error ") + dfcclGetErrorString(async));
  ok &= check(a, d == dfcclSuccess, std::string("dfcclCommDestroy: ") + dfcclGetErrorString(d));
  return check(a, destroy_ms < kDestroyBoundMs, "dfcclCommDestroy took " + std::to_string(destroy_ms) + " ms") && ok;
}

bool run_missing(const Args& a, const dfcclUniqueId& id) {
  dfcclComm_t comm = nullptr;
  const uint64_t t0 = now_ns();
  const dfcclResult_t r = init(a, id, &comm);
  const double ms = ms_between(t0, now_ns());
  const std::string err = dfcclGetLastError(nullptr);
  std::printf("rank %d: init %s after %.0f ms (timeout %d ms): %s\n", a.rank, dfcclGetErrorString(r), ms,
              a.init_timeout_ms, err.c_str());
  if (r == dfcclSuccess) dfcclCommDestroy(comm);
  const std::string who = "rank " + std::to_string(a.victim) + " of " + std::to_string(a.nranks);
  bool ok = check(a, r == dfcclTimeout, std::string("init returned ") + dfcclGetErrorString(r));
  ok &= check(a, err.find(who) != std::string::npos && err.find("never arrived") != std::string::npos,
              "the error does not say that " + who + " never arrived");
  return check(a, ms < a.init_timeout_ms + 3000, "init took " + std::to_string(ms) + " ms") && ok;
}

bool run(const Args& a) {
  dfcclUniqueId id;
  if (!get_id(a, &id)) return false;
  if (a.scenario == "missing") return run_missing(a, id);
  dfcclComm_t comm = nullptr;
  if (init(a, id, &comm) != dfcclSuccess) return fail(a, std::string("init: ") + dfcclGetLastError(nullptr));
  if (!exact_allreduce(a, comm, 30000)) return false;
  dfcclCommInfo_t info = DFCCL_COMM_INFO_INITIALIZER;
  if (dfcclCommGetInfo(comm, &info) != dfcclSuccess || info.transport != dfcclTransportNetwork)
    return fail(a, "the communicator's ring does not go through the network transport");
  if (const char* e = std::getenv("NET_FAULT_EXPECT_HIERARCHY"); e && info.hierarchyRanksPerHost != std::atoi(e))
    return fail(a, "its all-reduce is not hierarchical over hosts of " + std::string(e) + " ranks");
  if (a.scenario == "late") return run_late(a, comm);
  if (a.scenario == "abort") return run_abort(a, comm);
  if (a.scenario == "mismatch") return run_mismatch(a, comm);
  return a.rank == a.victim ? victim_fault(a, comm) : survivor(a, comm);
}

bool parse(int argc, char** argv, Args* a) {
  if (argc < 2) return false;
  a->scenario = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--rank") a->rank = std::atoi(v.c_str());
    else if (k == "--nranks") a->nranks = std::atoi(v.c_str());
    else if (k == "--victim") a->victim = std::atoi(v.c_str());
    else if (k == "--dir") a->dir = v;
    else if (k == "--bound-ms") a->bound_ms = std::atoi(v.c_str());
    else if (k == "--init-timeout-ms") a->init_timeout_ms = std::atoi(v.c_str());
    else if (k == "--late-ms") a->late_ms = std::atoi(v.c_str());
    else return false;
  }
  const std::string known = " kill stop resume cut remote_abort abort_exit late abort mismatch missing ";
  return known.find(" " + a->scenario + " ") != std::string::npos && a->rank >= 0 && a->rank < a->nranks &&
         a->victim > 0 && a->victim < a->nranks && !a->dir.empty();
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, &a)) {
    std::fprintf(
        stderr,
        "usage: net_fault_peer kill|stop|resume|cut|remote_abort|abort_exit|late|abort|mismatch|missing --rank R "
        "--nranks N --victim V (1..N-1) --dir D [--bound-ms B] [--init-timeout-ms T] [--late-ms L]\n");
    return 1;
  }
  const bool ok = run(a);
  std::fflush(nullptr);
  return ok ? 0 : 2;
}
