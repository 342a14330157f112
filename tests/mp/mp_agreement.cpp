// Ranks whose settings differ: communicator init must fail on every rank with a message that names the setting and
// both values (lib/src/comm/comm_init.cpp, check_agreement), and leave nothing behind: a communicator with agreeing
// settings then initialises and runs exactly. Each MPI rank is a process, so each can have an environment of its own
// (the settings are read when an engine is created, here by each init: the failed one's engine goes with it).
//   mpirun -np 2 mp_agreement      (host executor: CI)
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dfccl.h"

namespace {

int g_rank = 0, g_size = 1;
int g_failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", g_rank, what.c_str());
  ++g_failures;
}

// Init of a host-executor communicator over MPI_COMM_WORLD with `mode`; returns the result and the message.
dfcclResult_t init(dfcclComm_t* c, int mode, std::string* message) {
  dfcclUniqueId id;
  if (g_rank == 0 && dfcclGetUniqueId(&id) != dfcclSuccess) fail("dfcclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  cfg.device = g_rank;
  cfg.mode = mode;
  cfg.initTimeoutMs = 20000;
  const dfcclResult_t r = dfcclCommInitRankConfig(c, g_size, id, g_rank, &cfg);
  *message = r == dfcclSuccess ? "" : dfcclGetLastError(nullptr);
  return r;
}

// Rank r runs with `var` = values[r % 2] (mode: the config's mode instead of a variable): init must be refused,
// naming `name` and both values.
void expect_mismatch(const char* var, const char* name, const std::vector<std::string>& values) {
  const std::string mine = values[size_t(g_rank % 2)];
  if (var) setenv(var, mine.c_str(), 1);
  dfcclComm_t c = nullptr;
  std::string msg;
  const dfcclResult_t r = init(&c, var ? dfcclModePreemptive : std::atoi(mine.c_str()), &msg);
  if (var) unsetenv(var);
  const std::string what = std::string("differing ") + name;
  if (r != dfcclInvalidUsage) {
    fail(what + ": init returned " + dfcclGetErrorString(r) + " (" + msg + "), expected dfcclInvalidUsage");
    if (r == dfcclSuccess) dfcclCommDestroy(c);
  } else if (msg.find(name) == std::string::npos ||
             msg.find(name + std::string("=") + values[0]) == std::string::npos ||
             msg.find(name + std::string("=") + values[1]) == std::string::npos) {
    fail(what + ": the message does not name the setting and both values: " + msg);
  } else if (g_rank == 0) {
    std::printf("refused: %s\n", msg.c_str());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// After the refusals: agreeing settings initialise, and an all-reduce is exact (sum of ranks + 1 in every element).
void expect_agreement_runs() {
  dfcclComm_t c = nullptr;
  std::string msg;
  if (init(&c, dfcclModePreemptive, &msg) != dfcclSuccess) {
    fail("agreeing settings: init failed: " + msg);
    return;
  }
  const size_t n = 4099;
  std::vector<int> in(n, g_rank + 1), out(n, -1);
  dfcclRequest_t req = nullptr;
  if (dfcclAllReduce(in.data(), out.data(), n, dfcclInt32, dfcclSum, c, 0, nullptr, &req) != dfcclSuccess ||
      dfcclSynchronize(req, 60000) != dfcclSuccess) {
    fail(std::string("all-reduce after the refusals: ") + dfcclGetLastError(nullptr));
  } else {
    const int want = g_size * (g_size + 1) / 2;
    size_t wrong = 0;
    for (int v : out) wrong += v != want ? 1 : 0;
    if (wrong) fail("all-reduce after the refusals: " + std::to_string(wrong) + " wrong elements");
  }
  if (req) dfcclRequestFree(req);
  if (dfcclCommDestroy(c) != dfcclSuccess) fail(std::string("dfcclCommDestroy: ") + dfcclGetLastError(nullptr));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (g_size < 2) {
    std::fprintf(stderr, "mp_agreement: needs at least 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  expect_mismatch("DFCCL_BLOCKS", "DFCCL_BLOCKS", {"1", "2"});
  expect_mismatch("DFCCL_SLOT_BYTES", "DFCCL_SLOT_BYTES", {"32768", "16384"});
  expect_mismatch("DFCCL_SLOTS", "DFCCL_SLOTS", {"8", "4"});
  expect_mismatch("DFCCL_LANES", "DFCCL_LANES", {"4", "2"});
  expect_mismatch("DFCCL_PERSISTENT_LANES", "DFCCL_PERSISTENT_LANES", {"8", "2"});
  expect_mismatch("DFCCL_MIN_CHAN_BYTES", "DFCCL_MIN_CHAN_BYTES", {"32768", "65536"});
  expect_mismatch(nullptr, "mode", {"0", "1"});
  expect_agreement_runs();
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("%s: %d failure(s) on %d ranks\n", failures ? "FAILED" : "PASSED", failures, g_size);
  MPI_Finalize();
  return failures ? 1 : 0;
}
