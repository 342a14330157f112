// The fault workload's DFCCL rank (fault.h): a child process of one MPI rank, started per trial. It joins the trial's
// communicator, runs exact collectives until one fails (a peer was killed), shrinks with the other survivors
// (dfcclCommShrink, excludeRanks NULL: the ranks it found failed), agrees with them on the first collective to run
// again (an all-reduce MIN on the shrunk communicator: its first collective) and runs `after` more from there.
// Every result is checked against the inputs, which depend only on (collective, rank of its communicator, element).
#include <cuda_runtime_api.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dfccl.h"
#include "fault/fault.h"

namespace dfccl::harness::fault {
namespace {

// Element i of rank r's input to collective k: small, so that sums over any group stay exact in int32.
int32_t input(int64_t k, int r, size_t i) { return int32_t((uint64_t(k) * 131 + uint64_t(r) * 17 + i) % 1024) - 512; }

// n int32 elements the executor reads and writes: host memory, or managed memory on the CUDA executor.
struct Buffer {
  int32_t* p = nullptr;
  bool managed = false;
  Buffer(size_t n, bool cuda) : managed(cuda) {
    if (cuda) {
      if (cudaMallocManaged(reinterpret_cast<void**>(&p), n * sizeof(int32_t)) != cudaSuccess) p = nullptr;
    } else {
      p = static_cast<int32_t*>(std::malloc(n * sizeof(int32_t)));
    }
  }
  ~Buffer() {
    if (managed) cudaFree(p);
    else std::free(p);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

enum class Kind { AllReduce, AllGather, ReduceScatter, Broadcast };

// Collective k of the trial on a communicator of n ranks, submitted by rank r: its buffers and its expected output.
struct Coll {
  int64_t k = 0;
  Kind kind = Kind::AllReduce;
  size_t count = 1;  // the call's count (all-gather: per rank; reduce-scatter: the output's)
  int root = 0;
  std::unique_ptr<Buffer> in, out;
  size_t in_n = 0, out_n = 0;
  dfcclRequest_t req = nullptr;
  std::string refused;  // why its submission was refused (req NULL), on the old communicator
};

class Rank {
 public:
  Rank(const Plan& p, int report_fd) : p_(p), fd_(report_fd), cuda_(p.executor == dfcclExecutorCuda) {}

  Report run() {
    dfcclUniqueId id;
    std::memcpy(id.internal, p_.id, sizeof(id.internal));
    dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
    cfg.executor = p_.executor;
    cfg.device = p_.device;
    dfcclComm_t comm = nullptr;
    if (dfcclCommInitRankConfig(&comm, p_.nranks, id, p_.rank, &cfg) != dfcclSuccess)
      return fail(std::string("init: ") + dfcclGetLastError(nullptr));
    // Until a collective fails: a survivor's peer was killed (the victim runs here until its kill).
    int64_t k = 0, first_failed = -1;
    while (first_failed < 0) {
      if (!batch(comm, p_.rank, p_.nranks, k, p_.inflight, true, &first_failed)) return r_;
      k += p_.inflight;
      if (!ready_sent_) {
        const char ready = 'R';
        if (write(fd_, &ready, 1) != 1) return fail("the ready byte could not be written");
        ready_sent_ = true;
      }
    }
    dfcclComm_t nc = nullptr;
    if (dfcclCommShrink(comm, nullptr, 0, &nc, nullptr) != dfcclSuccess || !nc)
      return fail(std::string("dfcclCommShrink: ") + (nc ? "" : "no communicator: ") + dfcclGetLastError(nullptr));
    r_.shrunk_ns = mono_ns();
    dfcclCommCount(nc, &r_.new_size);
    dfcclCommUserRank(nc, &r_.new_rank);
    if (r_.new_size != p_.nranks - 1)
      return fail("the shrunk communicator has " + std::to_string(r_.new_size) + " ranks, not " +
                  std::to_string(p_.nranks - 1));
    // Its first collective: where to go on, the first collective that failed on any survivor.
    Buffer at(1, cuda_), resume(1, cuda_);
    at.p[0] = int32_t(first_failed);
    dfcclRequest_t q = nullptr;
    dfcclResult_t st = dfcclAllReduce(at.p, resume.p, 1, dfcclInt32, dfcclMin, nc, 0, nullptr, &q);
    if (st == dfcclSuccess) st = dfcclSynchronize(q, p_.timeout_ms);
    if (q) dfcclRequestFree(q);
    if (st != dfcclSuccess)
      return fail(std::string("the shrunk communicator's first collective: ") + dfcclGetLastError(nullptr));
    r_.first_ns = mono_ns();
    r_.completed_new = 1;
    r_.resumed_at = resume.p[0];
    for (int64_t j = r_.resumed_at; j < r_.resumed_at + p_.after; j += p_.inflight) {
      const int n = int(std::min<int64_t>(p_.inflight, r_.resumed_at + p_.after - j));
      if (!batch(nc, r_.new_rank, r_.new_size, j, n, false, nullptr)) return r_;
    }
    if (dfcclCommDestroy(comm) != dfcclSuccess)
      return fail(std::string("destroying the old communicator: ") + dfcclGetLastError(nullptr));
    if (dfcclCommDestroy(nc) != dfcclSuccess)
      return fail(std::string("destroying the shrunk communicator: ") + dfcclGetLastError(nullptr));
    r_.ok = r_.wrong == 0;
    if (!r_.ok) return fail(std::to_string(r_.wrong) + " wrong elements");
    return r_;
  }

 private:
  Report fail(const std::string& why) {
    r_.ok = 0;
    std::snprintf(r_.message, sizeof(r_.message), "rank %d: %s", p_.rank, why.c_str());
    return r_;
  }

  // Submits collectives k..k+n-1 on comm (rank r of size ranks), then waits for each and checks it. On the old
  // communicator (old) a collective that ends with dfcclRemoteError is lost and *first_failed becomes the lowest
  // such k; anywhere else a failure ends the run. False when it ended (r_ says why).
  bool batch(dfcclComm_t comm, int r, int size, int64_t k, int n, bool old, int64_t* first_failed) {
    std::vector<Coll> cs(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j)
      if (!submit(comm, r, size, k + j, old, cs[size_t(j)])) return false;
    for (Coll& c : cs) {
      // A submission refused because the communicator had already failed is lost like one that failed in flight.
      dfcclResult_t st = c.req ? dfcclSynchronize(c.req, p_.timeout_ms) : dfcclRemoteError;
      const std::string err = st == dfcclSuccess ? "" : c.req ? dfcclGetLastError(nullptr) : c.refused;
      if (c.req) dfcclRequestFree(c.req);
      if (st == dfcclSuccess) {
        r_.wrong += check(c, r, size);
        (old ? r_.completed_old : r_.completed_new)++;
        continue;
      }
      if (!old || st != dfcclRemoteError) {
        fail("collective #" + std::to_string(c.k) + ": " + dfcclGetErrorString(st) + ": " + err);
        return false;
      }
      if (*first_failed < 0) {
        *first_failed = c.k;
        r_.detect_ns = mono_ns();
      }
      r_.lost++;
    }
    return true;
  }

  // Submits collective k (c). On the old communicator (old) a submission that fails with dfcclRemoteError (the
  // communicator failed first) leaves c.req NULL and c.refused set: batch counts it lost. False on anything else.
  bool submit(dfcclComm_t comm, int r, int size, int64_t k, bool old, Coll& c) {
    const uint64_t h = mix(p_.seed ^ mix(uint64_t(k)));
    c.k = k;
    c.kind = Kind(h % 4);
    const size_t elems = std::max<size_t>(1, p_.sizes[(h >> 8) % uint64_t(p_.nsizes)] / sizeof(int32_t));
    const size_t per_rank = std::max<size_t>(1, elems / size_t(size));
    c.count = c.kind == Kind::AllGather || c.kind == Kind::ReduceScatter ? per_rank : elems;
    c.in_n = c.kind == Kind::ReduceScatter ? c.count * size_t(size) : c.count;
    c.out_n = c.kind == Kind::AllGather ? c.count * size_t(size) : c.count;
    c.root = int((h >> 32) % uint64_t(size));
    c.in = std::make_unique<Buffer>(c.in_n, cuda_);
    c.out = std::make_unique<Buffer>(c.out_n, cuda_);
    if (!c.in->p || !c.out->p) {
      fail("no memory for collective #" + std::to_string(k));
      return false;
    }
    for (size_t i = 0; i < c.in_n; ++i) c.in->p[i] = input(k, r, i);
    for (size_t i = 0; i < c.out_n; ++i) c.out->p[i] = int32_t(0xA5A5A5A5);
    dfcclResult_t st = dfcclSuccess;
    switch (c.kind) {
      case Kind::AllReduce:
        st = dfcclAllReduce(c.in->p, c.out->p, c.count, dfcclInt32, dfcclSum, comm, 0, nullptr, &c.req);
        break;
      case Kind::AllGather:
        st = dfcclAllGather(c.in->p, c.out->p, c.count, dfcclInt32, comm, 0, nullptr, &c.req);
        break;
      case Kind::ReduceScatter:
        st = dfcclReduceScatter(c.in->p, c.out->p, c.count, dfcclInt32, dfcclSum, comm, 0, nullptr, &c.req);
        break;
      case Kind::Broadcast:
        st = dfcclBroadcast(c.in->p, c.out->p, c.count, dfcclInt32, c.root, comm, 0, nullptr, &c.req);
        break;
    }
    if (st == dfcclSuccess) return true;
    if (old && st == dfcclRemoteError) {
      c.req = nullptr;
      c.refused = dfcclGetLastError(nullptr);
      return true;
    }
    fail("submitting collective #" + std::to_string(k) + ": " + dfcclGetLastError(nullptr));
    return false;
  }

  // Wrong elements of c's output on rank r of size ranks.
  static int64_t check(const Coll& c, int r, int size) {
    int64_t wrong = 0;
    for (size_t i = 0; i < c.out_n; ++i) {
      int32_t want = 0;
      switch (c.kind) {
        case Kind::AllReduce:
          for (int q = 0; q < size; ++q) want += input(c.k, q, i);
          break;
        case Kind::AllGather: want = input(c.k, int(i / c.count), i % c.count); break;
        case Kind::ReduceScatter:
          for (int q = 0; q < size; ++q) want += input(c.k, q, size_t(r) * c.count + i);
          break;
        case Kind::Broadcast: want = input(c.k, c.root, i); break;
      }
      wrong += c.out->p[i] != want;
    }
    return wrong;
  }

  const Plan p_;
  const int fd_;
  const bool cuda_;
  bool ready_sent_ = false;
  Report r_;
};

}  // namespace

int child_main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "dfccl-harness --fault-child: expects the plan's and the report's file descriptors\n");
    return 2;
  }
  const int plan_fd = std::atoi(argv[0]), report_fd = std::atoi(argv[1]);
  Plan plan;
  pollfd pf{plan_fd, POLLIN, 0};
  if (poll(&pf, 1, 30000) != 1 || read(plan_fd, &plan, sizeof(plan)) != ssize_t(sizeof(plan))) {
    std::fprintf(stderr, "dfccl-harness --fault-child: no plan within 30 s\n");
    return 2;
  }
  close(plan_fd);
  if (plan.nsizes <= 0) return 2;
  const Report r = Rank(plan, report_fd).run();
  const bool sent = write(report_fd, &r, sizeof(r)) == ssize_t(sizeof(r));
  close(report_fd);
  return sent && r.ok ? 0 : 1;
}

}  // namespace dfccl::harness::fault
