// The C API's library and communicator calls: errors, version, features, unique ids, init, split, shrink, destroy,
// abort and the communicator's queries. No exception leaves an entry point (guard in util/error.h).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "api/argcheck.h"
#include "bootstrap/bootstrap.h"
#include "comm/comm.h"
#include "comm/comm_info.h"
#include "net/transport.h"
#include "util/error.h"
#include "util/thread_name.h"

using namespace dfccl;
using namespace dfccl::api;

namespace {

// Caller: dfcclCommDestroy and dfcclCommAbort, once the handle's communicator was checked: ends the handle when the
// call returns, also by an exception (a destroy that gave up waiting aborted the communicator instead).
struct EndHandle {
  dfcclComm_t handle;
  ~EndHandle() { comm_handle_end(handle); }
};

}  // namespace

extern "C" {

const char* dfcclGetErrorString(dfcclResult_t r) {
  switch (r) {
    case dfcclSuccess: return "no error";
    case dfcclUnhandledCudaError: return "unhandled CUDA error";
    case dfcclSystemError: return "system error";
    case dfcclInternalError: return "internal error";
    case dfcclInvalidArgument: return "invalid argument";
    case dfcclInvalidUsage: return "invalid usage";
    case dfcclRemoteError: return "remote process exited or there was a network error";
    case dfcclInProgress: return "operation in progress";
    case dfcclTimeout: return "timed out";
    case dfcclAborted: return "aborted";
    case dfcclNoResources: return "limit reached (retry after completions)";
    case dfcclNotSupported: return "not supported here";
    default: return "unknown result code";
  }
}

const char* dfcclGetLastError(dfcclComm_t) { return last_error(); }

dfcclResult_t dfcclGetVersion(int* version) {
  return guard([&] {
    if (!version) bad("dfcclGetVersion", "argument 'version' is NULL");
    *version = DFCCL_VERSION_CODE;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclGetFeatures(int* features) {
  return guard([&] {
    if (!features) bad("dfcclGetFeatures", "argument 'features' is NULL");
    *features = net::transport_available() ? DFCCL_FEATURE_NETWORK : 0;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclGetUniqueId(dfcclUniqueId* id) {
  return guard([&] {
    if (!id) bad("dfcclGetUniqueId", "argument 'uniqueId' is NULL");
    *id = make_unique_id();
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommInitRankConfig(dfcclComm_t* comm, int nranks, dfcclUniqueId commId, int rank,
                                      const dfcclConfig_t* config) {
  return guard([&] {
    const char* fn = "dfcclCommInitRank";
    if (!comm) bad(fn, "argument 'comm' is NULL");
    *comm = nullptr;
    if (nranks < 1 || nranks > DFCCL_MAX_RANKS)
      bad(fn, fmt::format("argument 'nranks' = {} is outside 1..{} (DFCCL_MAX_RANKS)", nranks, DFCCL_MAX_RANKS));
    if (rank < 0 || rank >= nranks) bad(fn, fmt::format("argument 'rank' = {} is outside 0..{}", rank, nranks - 1));
    parse_unique_id(commId);
    const dfcclConfig_t cfg = resolve_config(config, rank);
    *comm = comm_handle_new(comm_init(nranks, commId, rank, cfg));
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommInitRank(dfcclComm_t* comm, int nranks, dfcclUniqueId commId, int rank) {
  return dfcclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

dfcclResult_t dfcclCommInitAllConfig(dfcclComm_t* comms, int ndev, const int* devlist, const dfcclConfig_t* config) {
  return guard([&] {
    const char* fn = "dfcclCommInitAll";
    if (!comms) bad(fn, "argument 'comms' is NULL");
    if (ndev < 1 || ndev > DFCCL_MAX_RANKS)
      bad(fn, fmt::format("argument 'ndev' = {} is outside 1..{} (DFCCL_MAX_RANKS)", ndev, DFCCL_MAX_RANKS));
    for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
    const dfcclUniqueId id = make_unique_id();
    std::vector<dfcclConfig_t> cfgs;
    for (int i = 0; i < ndev; ++i) {
      dfcclConfig_t c = resolve_config(config, i);
      if (devlist) {
        if (devlist[i] < 0) bad(fn, fmt::format("argument 'devlist[{}]' = {} is not a device", i, devlist[i]));
        c.device = devlist[i];
      } else if (!config || config->device < 0) {
        c.device = i;
      }
      cfgs.push_back(c);
    }
    std::vector<dfcclResult_t> results(size_t(ndev), dfcclSuccess);
    std::vector<std::string> messages(static_cast<size_t>(ndev));
    std::vector<dfcclComm*> made(static_cast<size_t>(ndev), nullptr);
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      threads.emplace_back([&, i] {
        name_this_thread("init", unsigned(i));
        results[size_t(i)] = guard([&] {
          made[size_t(i)] = comm_init(ndev, id, i, cfgs[size_t(i)]);
          return dfcclSuccess;
        });
        if (results[size_t(i)] != dfcclSuccess) messages[size_t(i)] = last_error();
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (results[size_t(i)] != dfcclSuccess) {
        for (dfcclComm* c : made)
          if (c) {
            comm_abort(c);
            comm_free(c);
          }
        throw Error(results[size_t(i)], fmt::format("{}: rank {}: {}", fn, i, messages[size_t(i)]));
      }
    }
    for (int i = 0; i < ndev; ++i) comms[i] = comm_handle_new(made[size_t(i)]);
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommInitAll(dfcclComm_t* comms, int ndev, const int* devlist) {
  return dfcclCommInitAllConfig(comms, ndev, devlist, nullptr);
}

dfcclResult_t dfcclCommSplit(dfcclComm_t comm, int color, int key, dfcclComm_t* newcomm, const dfcclConfig_t* config) {
  return guard([&] {
    const char* fn = "dfcclCommSplit";
    const CommRef held = check_comm(comm, fn);
    dfcclComm* c = held.get();
    if (!newcomm) bad(fn, "argument 'newcomm' is NULL");
    if (color < DFCCL_SPLIT_NOCOLOR) bad(fn, fmt::format("argument 'color' = {} is negative", color));
    dfcclComm* made = comm_split(c, color, key, config);
    *newcomm = made ? comm_handle_new(made) : nullptr;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommShrink(dfcclComm_t comm, const int* excludeRanks, int nExclude, dfcclComm_t* newcomm,
                              const dfcclConfig_t* config) {
  return guard([&] {
    const char* fn = "dfcclCommShrink";
    if (!comm) bad(fn, "argument 'comm' is NULL");
    if (!newcomm) bad(fn, "argument 'newcomm' is NULL");
    *newcomm = nullptr;
    // A communicator that a failure ended is what a shrink is for; one that the application ended is refused.
    const CommLookup l = comm_lookup(comm);
    const bool failed = l.comm && l.comm->fail_code.load() != dfcclSuccess && !l.comm->user_aborted;
    const CommRef held = failed ? l.comm : check_comm(comm, fn);
    dfcclComm* c = held.get();
    if (!excludeRanks && nExclude != 0)
      bad(fn, fmt::format("argument 'nExclude' = {} with 'excludeRanks' NULL (NULL takes the failed ranks: pass 0)",
                          nExclude));
    if (nExclude < 0 || nExclude > c->nranks)
      bad(fn, fmt::format("argument 'nExclude' = {} is outside 0..{}", nExclude, c->nranks));
    for (int i = 0; i < nExclude; ++i)
      if (excludeRanks[i] < 0 || excludeRanks[i] >= c->nranks)
        bad(fn, fmt::format("argument 'excludeRanks[{}]' = {} is outside 0..{}", i, excludeRanks[i], c->nranks - 1));
    dfcclComm* made = comm_shrink(c, excludeRanks, nExclude, config);
    *newcomm = made ? comm_handle_new(made) : nullptr;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommDestroy(dfcclComm_t comm) {
  return guard([&] {
    // After a failure (a peer's death, a mismatch) the communicator was already aborted and released: nothing is
    // left to wait for.
    const CommLookup l = comm_lookup(comm);
    const bool failed = l.comm && l.comm->fail_code.load() != dfcclSuccess && !l.comm->user_aborted;
    const CommRef c = failed ? l.comm : check_comm(comm, "dfcclCommDestroy");
    const EndHandle end{comm};  // later use of the handle is refused, never undefined
    comm_destroy(c.get());
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommAbort(dfcclComm_t comm) {
  return guard([&] {
    const char* fn = "dfcclCommAbort";
    if (!comm) bad(fn, "argument 'comm' is NULL");
    const CommLookup l = comm_lookup(comm);
    if (l.ended) return dfcclSuccess;  // a second abort, or one after destroy, does nothing
    if (!l.comm) bad(fn, "argument 'comm' is not a communicator");
    const EndHandle end{comm};
    comm_abort(l.comm.get());
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommGetAsyncError(dfcclComm_t comm, dfcclResult_t* asyncError) {
  return guard([&] {
    const char* fn = "dfcclCommGetAsyncError";
    const CommLookup l = comm_lookup(comm);
    if (!l.comm && !l.ended) bad(fn, "argument 'comm' is not a communicator");
    if (!asyncError) bad(fn, "argument 'asyncError' is NULL");
    if (l.comm) *asyncError = dfcclResult_t(l.comm->async_error.load());
    else if (l.ended_known) *asyncError = dfcclResult_t(l.ended_async);
    else comm_gone(fn);
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommCount(dfcclComm_t comm, int* count) {
  return guard([&] {
    const CommRef held = check_comm(comm, "dfcclCommCount");
    dfcclComm* c = held.get();
    if (!count) bad("dfcclCommCount", "argument 'count' is NULL");
    *count = c->nranks;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommUserRank(dfcclComm_t comm, int* rank) {
  return guard([&] {
    const CommRef held = check_comm(comm, "dfcclCommUserRank");
    dfcclComm* c = held.get();
    if (!rank) bad("dfcclCommUserRank", "argument 'rank' is NULL");
    *rank = c->rank;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommDevice(dfcclComm_t comm, int* device) {
  return guard([&] {
    const CommRef held = check_comm(comm, "dfcclCommDevice");
    dfcclComm* c = held.get();
    if (!device) bad("dfcclCommDevice", "argument 'device' is NULL");
    *device = c->config.device;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommGetInfo(dfcclComm_t comm, dfcclCommInfo_t* info) {
  return guard([&] {
    const char* fn = "dfcclCommGetInfo";
    const CommRef held = check_comm(comm, fn);
    dfcclComm* c = held.get();
    check_out_struct(info, "info", "dfcclCommInfo_t", fn);
    std::shared_ptr<Engine> e = live_engine(c, fn);
    copy_out(info, comm_info(c, *e));
    return dfcclSuccess;
  });
}

}  // extern "C"
