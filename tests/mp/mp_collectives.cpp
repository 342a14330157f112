// One rank per MPI process (mpirun): bootstrap over MPI_Bcast of the unique id, the collective matrix on a subset
// of sizes, the point-to-point matrix (send/recv around the ring and to itself, all-to-all), and the disorder stress
// over 3 communicators (world, and two splits) with point-to-point transfers and device synchronizations.
//   mpirun -np 4 mp_collectives host      (CI: host executor, ranks are processes over shared memory)
//   mpirun -np 2 mp_collectives cuda      (GPU machine: one GPU per process, CUDA IPC; exit 77 without GPUs)
//   mpirun -np 2 mp_collectives cuda-shared
//                                         (ranks share the GPUs there are, rank r on GPU r % n: two ranks on one GPU,
//                                          under MPS so that both daemons run at once;
//                                          scripts/device/ranks_on_one_gpu.sh)
// MP_EXPECT_HIERARCHY=L: the world communicator must have the hierarchical all-reduce over hosts of L ranks
// (DFCCL_HIERARCHY=1; dfcclCommInfo_t.hierarchyRanksPerHost), else the run fails.
// MP_MATRIX=rotated: the matrices with one data type per case instead of all of them, for runs whose point is the
// path the bytes take (network transport, proxies, hosts, hierarchy stages) rather than the reductions, which the run
// with the full matrices covers: every collective, operator, count and placement once, its type rotating so that
// each collective meets every type (and those with an operator every element size at the largest count); every
// point-to-point count with two types, every type once.
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dfccl.h"
#include "gpu_check.h"
#include "reference.h"

using namespace dfccl::test;

namespace {

int g_rank = 0, g_size = 1;
bool g_cuda = false;
bool g_rotated = false;  // MP_MATRIX=rotated

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, what.c_str(), dfcclGetLastError(nullptr));
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

void ok(dfcclResult_t r, const char* what) {
  if (r != dfcclSuccess) die(std::string(what) + ": " + dfcclGetErrorString(r));
}

dfcclComm_t make_comm(MPI_Comm mpi, dfcclExecutor_t ex) {
  int rank = 0, size = 0;
  MPI_Comm_rank(mpi, &rank);
  MPI_Comm_size(mpi, &size);
  dfcclUniqueId id;
  if (rank == 0) ok(dfcclGetUniqueId(&id), "dfcclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi);
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = ex;
  cfg.device = g_cuda ? -1 : g_rank;  // CUDA: the current device (set in main); host: one engine per process
  dfcclComm_t c = nullptr;
  ok(dfcclCommInitRankConfig(&c, size, id, rank, &cfg), "dfcclCommInitRankConfig");
  return c;
}

// Moves a host-side buffer to the executor's memory and back.
struct Mem {
  size_t bytes = 0;
  void* p = nullptr;
  explicit Mem(size_t b) : bytes(std::max<size_t>(b, 1)) {
    if (g_cuda) cudaMalloc(&p, bytes);
    else p = std::malloc(bytes);
  }
  ~Mem() {
    if (g_cuda) cudaFree(p);
    else std::free(p);
  }
  void put(const void* src, size_t b) {
    if (g_cuda) cudaMemcpy(p, src, b, cudaMemcpyHostToDevice);
    else std::memcpy(p, src, b);
  }
  void get(void* dst, size_t b) const {
    if (g_cuda) cudaMemcpy(dst, p, b, cudaMemcpyDeviceToHost);
    else std::memcpy(dst, p, b);
  }
};

long matrix(dfcclComm_t comm) {
  const size_t counts[] = {0, 1, 17, 1009, 262144};
  const dfcclRedOp_t ops[] = {dfcclSum, dfcclProd, dfcclMax, dfcclMin, dfcclAvg};
  long wrong = 0, cases = 0;
  for (int coll = 0; coll < 5; ++coll)
    for (int t = 0; t < dfcclNumTypes; ++t)
      for (int o = 0; o < 5; ++o) {
        const dfcclRedOp_t op = ops[o];
        if ((coll == int(Coll::AllGather) || coll == int(Coll::Broadcast)) && op != dfcclSum) continue;
        for (int n = 0; n < 5; ++n)
          for (bool in_place : {false, true}) {
            // MP_MATRIX=rotated: one type per case (int8 for the out-of-place sum all-reduce of the largest count).
            if (g_rotated && t != (coll + 3 * o + 2 * n + int(in_place) + 2) % dfcclNumTypes) continue;
            const size_t count = counts[n];
            const Case c{Coll(coll), dfcclDataType_t(t), op, count, int(count % size_t(g_size)), in_place};
            Buffers b(c, g_size);
            auto& rs = b.recv_storage(g_rank);
            Mem recv(rs.size());
            recv.put(rs.data(), rs.size());
            Mem send(in_place ? 1 : b.send_storage(g_rank).size());
            if (!in_place) send.put(b.send_storage(g_rank).data(), b.send_storage(g_rank).size());
            const void* sb = static_cast<const char*>(in_place ? recv.p : send.p) + b.send_offset(g_rank);
            void* rb = static_cast<char*>(recv.p) + b.recv_offset(g_rank);
            dfcclRequest_t q = nullptr;
            dfcclResult_t r = dfcclSuccess;
            switch (c.coll) {
              case Coll::AllReduce: r = dfcclAllReduce(sb, rb, count, c.type, op, comm, 0, nullptr, &q); break;
              case Coll::AllGather: r = dfcclAllGather(sb, rb, count, c.type, comm, 0, nullptr, &q); break;
              case Coll::ReduceScatter: r = dfcclReduceScatter(sb, rb, count, c.type, op, comm, 0, nullptr, &q); break;
              case Coll::Broadcast: r = dfcclBroadcast(sb, rb, count, c.type, c.root, comm, 0, nullptr, &q); break;
              case Coll::Reduce: r = dfcclReduce(sb, rb, count, c.type, op, c.root, comm, 0, nullptr, &q); break;
            }
            ok(r, describe(c, g_size).c_str());
            ok(dfcclSynchronize(q, 120000), describe(c, g_size).c_str());
            dfcclRequestFree(q);
            recv.get(rs.data(), rs.size());
            const size_t bad = b.wrong(g_rank);
            if (bad) std::fprintf(stderr, "rank %d: %s: %zu wrong\n", g_rank, describe(c, g_size).c_str(), bad);
            wrong += long(bad);
            ++cases;
          }
      }
  if (g_rank == 0) std::printf("matrix: %ld cases per rank\n", cases);
  return wrong;
}

// Every type and count: each rank sends to rank + 1 and to itself and receives from rank - 1 and from itself, the
// four calls in a random order of its own, then an all-to-all; exact against the senders' inputs.
long p2p_matrix(dfcclComm_t comm) {
  const size_t counts[] = {0, 1, 17, 1009, 262144};
  long wrong = 0, cases = 0;
  std::mt19937 rng(uint32_t(g_rank) + 1);
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  for (int t = 0; t < dfcclNumTypes; ++t)
    for (int n = 0; n < 5; ++n) {
      if (g_rotated && (t + n) % 5 != 0) continue;
      const size_t count = counts[n];
      const dfcclDataType_t type = dfcclDataType_t(t);
      const size_t bytes = count * type_size(type), tag = count * 16 + size_t(t);
      auto input = [&](int rank, size_t elems, uint64_t first) {
        std::vector<uint8_t> v(elems * type_size(type));
        fill_input(v.data(), elems, dfcclMax, type, rank, first);
        return v;
      };
      const std::vector<uint8_t> mine = input(g_rank, count, tag);
      Mem send(bytes), from_prev(bytes), from_self(bytes);
      send.put(mine.data(), bytes);
      int order[4] = {0, 1, 2, 3};
      std::shuffle(order, order + 4, rng);
      std::vector<dfcclRequest_t> reqs(4);
      for (int k = 0; k < 4; ++k) {
        dfcclResult_t r = dfcclSuccess;
        dfcclRequest_t* q = &reqs[size_t(k)];
        if (order[k] == 0) r = dfcclSend(send.p, count, type, next, comm, 0, nullptr, q);
        if (order[k] == 1) r = dfcclSend(send.p, count, type, g_rank, comm, 0, nullptr, q);
        if (order[k] == 2) r = dfcclRecv(from_prev.p, count, type, prev, comm, 0, nullptr, q);
        if (order[k] == 3) r = dfcclRecv(from_self.p, count, type, g_rank, comm, 0, nullptr, q);
        ok(r, "p2p matrix submit");
      }
      // All-to-all: block p of this rank's input goes to rank p.
      const std::vector<uint8_t> a2a_in = input(g_rank, count * size_t(g_size), tag * 7);
      Mem a2a_send(a2a_in.size()), a2a_recv(a2a_in.size());
      a2a_send.put(a2a_in.data(), a2a_in.size());
      dfcclRequest_t a2a = nullptr;
      ok(dfcclAllToAll(a2a_send.p, a2a_recv.p, count, type, comm, 0, nullptr, &a2a), "dfcclAllToAll");
      reqs.push_back(a2a);
      for (auto q : reqs) {
        ok(dfcclSynchronize(q, 120000), "p2p matrix wait");
        dfcclRequestFree(q);
      }
      std::vector<uint8_t> got(bytes), got_a2a(a2a_in.size());
      from_prev.get(got.data(), bytes);
      wrong += got != input(prev, count, tag);
      from_self.get(got.data(), bytes);
      wrong += got != mine;
      a2a_recv.get(got_a2a.data(), got_a2a.size());
      for (int p = 0; p < g_size; ++p) {
        const std::vector<uint8_t> theirs = input(p, count * size_t(g_size), tag * 7);
        wrong += std::memcmp(got_a2a.data() + size_t(p) * bytes, theirs.data() + size_t(g_rank) * bytes, bytes) != 0;
      }
      if (wrong) std::fprintf(stderr, "rank %d: p2p %s x %zu: wrong\n", g_rank, type_name(type), count);
      cases += 3;
    }
  if (g_rank == 0) std::printf("p2p matrix: %ld cases per rank\n", cases);
  return wrong;
}

// The stress: world + two splits; per trial each rank submits 2 collectives per communicator in a random
// interleaving (order kept inside each communicator), plus a send to rank + 1 + t and a receive from rank - 1 - t on
// the world communicator, each at a random place, with device synchronizations in between.
long stress(dfcclComm_t comms[3], int trials) {
  long wrong = 0;
  const size_t n = 50000;
  std::vector<Mem*> in, out;
  for (int k = 0; k < 7; ++k) {  // 6 collectives, then the transfer
    in.push_back(new Mem(n * 4));
    out.push_back(new Mem(n * 4));
  }
  int members[3] = {g_size, 0, 0};
  for (int g = 1; g < 3; ++g) dfcclCommCount(comms[g], &members[g]);
  std::vector<int32_t> host(n);
  for (int t = 0; t < trials; ++t) {
    std::mt19937_64 rng(uint64_t(t) * 7919 + uint64_t(g_rank));
    std::vector<int> order, head(3, 0);
    while (order.size() < 6) {
      const int g = int(rng() % 3);
      if (head[size_t(g)] < 2) order.push_back(g * 2 + head[size_t(g)]++);
    }
    order.insert(order.begin() + long(rng() % (order.size() + 1)), 6);  // the send
    order.insert(order.begin() + long(rng() % (order.size() + 1)), 7);  // the receive
    const int to = (g_rank + 1 + t) % g_size, from = ((g_rank - 1 - t) % g_size + g_size) % g_size;
    std::vector<dfcclRequest_t> reqs;
    for (int k : order) {
      dfcclRequest_t q = nullptr;
      if (k == 7) {
        ok(dfcclRecv(out[6]->p, n, dfcclInt32, from, comms[0], 0, nullptr, &q), "stress receive");
      } else {
        for (size_t i = 0; i < n; ++i) host[i] = int32_t(t * 31 + k * 7 + int(i % 97) + g_rank);
        in[size_t(k)]->put(host.data(), n * 4);
        if (k == 6) ok(dfcclSend(in[6]->p, n, dfcclInt32, to, comms[0], 0, nullptr, &q), "stress send");
        else
          ok(dfcclAllReduce(in[size_t(k)]->p, out[size_t(k)]->p, n, dfcclInt32, dfcclSum, comms[k / 2], 0, nullptr, &q),
             "stress all-reduce");
      }
      reqs.push_back(q);
      if (rng() % 100 < 30) ok(dfcclDeviceSynchronize(comms[0]), "dfcclDeviceSynchronize");
    }
    for (auto q : reqs) {
      ok(dfcclSynchronize(q, 120000), "stress wait");
      dfcclRequestFree(q);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Expected: sum over the members of the group; the members' ranks in world are known from the split rule.
    for (int k = 0; k < 6; ++k) {
      out[size_t(k)]->get(host.data(), n * 4);
      const int g = k / 2;
      std::vector<int> ranks;
      for (int r = 0; r < g_size; ++r)
        if (g == 0 || (g == 1 && r / 2 == g_rank / 2) || (g == 2 && r % 2 == g_rank % 2)) ranks.push_back(r);
      for (size_t i = 0; i < n; ++i) {
        int32_t want = 0;
        for (int r : ranks) want += int32_t(t * 31 + k * 7 + int(i % 97) + r);
        wrong += host[i] != want;
      }
    }
    out[6]->get(host.data(), n * 4);
    for (size_t i = 0; i < n; ++i) wrong += host[i] != int32_t(t * 31 + 6 * 7 + int(i % 97) + from);
  }
  for (auto* m : in) delete m;
  for (auto* m : out) delete m;
  if (g_rank == 0) std::printf("stress: %d trials over 3 communicators with point-to-point transfers\n", trials);
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const std::string mode = argc > 1 ? argv[1] : "host";
  const bool share = mode == "cuda-shared";
  g_cuda = mode == "cuda" || share;
  if (!g_cuda && mode != "host") {
    if (g_rank == 0)
      std::fprintf(stderr, "mp_collectives: mode '%s': expected host, cuda or cuda-shared\n", mode.c_str());
    MPI_Finalize();
    return 2;
  }
  if (g_cuda) {
    if (const int rc = dfccl::test::gpus_or_skip(share ? 1 : g_size, g_rank != 0)) {
      MPI_Finalize();
      return rc;
    }
    int n = 0;
    cudaGetDeviceCount(&n);
    cudaSetDevice(g_rank % n);
  }
  if (const char* m = std::getenv("MP_MATRIX")) {
    g_rotated = std::string(m) == "rotated";
    if (!g_rotated && std::string(m) != "full") {
      if (g_rank == 0) std::fprintf(stderr, "mp_collectives: MP_MATRIX '%s': expected full or rotated\n", m);
      MPI_Finalize();
      return 2;
    }
  }
  const dfcclExecutor_t ex = g_cuda ? dfcclExecutorCuda : dfcclExecutorHost;
  dfcclComm_t world = make_comm(MPI_COMM_WORLD, ex);
  if (const char* expect = std::getenv("MP_EXPECT_HIERARCHY")) {  // the ranks per host its all-reduces must run on
    dfcclCommInfo_t info = DFCCL_COMM_INFO_INITIALIZER;
    ok(dfcclCommGetInfo(world, &info), "dfcclCommGetInfo");
    if (info.hierarchyRanksPerHost != std::atoi(expect))
      die("the world's hierarchical all-reduce has " + std::to_string(info.hierarchyRanksPerHost) +
          " ranks per host, MP_EXPECT_HIERARCHY " + expect);
  }
  long wrong = matrix(world);
  wrong += p2p_matrix(world);
  MPI_Comm pairs, strided;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank / 2, g_rank, &pairs);
  MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &strided);
  dfcclComm_t comms[3] = {world, make_comm(pairs, ex), make_comm(strided, ex)};
  wrong += stress(comms, argc > 2 ? std::atoi(argv[2]) : 100);
  for (int g = 2; g >= 0; --g) ok(dfcclCommDestroy(comms[g]), "dfcclCommDestroy");
  long total = 0;
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("%s: %d ranks, %ld wrong elements\n", total ? "FAILED" : "PASSED", g_size, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
