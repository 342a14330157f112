// The C API's library and communicator calls: errors, version, features, unique ids, init, split, destroy, abort
// and the communicator's queries. No exception leaves an entry point (guard in util/error.h).
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
    if (nranks < 1) bad(fn, fmt::format("argument 'nranks' = {} must be at least 1", nranks));
    if (rank < 0 || rank >= nranks) bad(fn, fmt::format("argument 'rank' = {} is outside 0..{}", rank, nranks - 1));
    parse_unique_id(commId);
    const dfcclConfig_t cfg = resolve_config(config, rank);
    *comm = comm_init(nranks, commId, rank, cfg);
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
    if (ndev < 1) bad(fn, fmt::format("argument 'ndev' = {} must be at least 1", ndev));
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
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      threads.emplace_back([&, i] {
        name_this_thread("init", unsigned(i));
        results[size_t(i)] = guard([&] {
          comms[i] = comm_init(ndev, id, i, cfgs[size_t(i)]);
          return dfcclSuccess;
        });
        if (results[size_t(i)] != dfcclSuccess) messages[size_t(i)] = last_error();
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (results[size_t(i)] != dfcclSuccess) {
        for (int j = 0; j < ndev; ++j)
          if (comms[j]) {
            comm_abort(comms[j]);
            comms[j] = nullptr;
          }
        throw Error(results[size_t(i)], fmt::format("{}: rank {}: {}", fn, i, messages[size_t(i)]));
      }
    }
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommInitAll(dfcclComm_t* comms, int ndev, const int* devlist) {
  return dfcclCommInitAllConfig(comms, ndev, devlist, nullptr);
}

dfcclResult_t dfcclCommSplit(dfcclComm_t comm, int color, int key, dfcclComm_t* newcomm, const dfcclConfig_t* config) {
  return guard([&] {
    const char* fn = "dfcclCommSplit";
    dfcclComm* c = check_comm(comm, fn);
    if (!newcomm) bad(fn, "argument 'newcomm' is NULL");
    if (color < DFCCL_SPLIT_NOCOLOR) bad(fn, fmt::format("argument 'color' = {} is negative", color));
    *newcomm = comm_split(c, color, key, config);
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommDestroy(dfcclComm_t comm) {
  return guard([&] {
    const char* fn = "dfcclCommDestroy";
    // After a failure (a peer's death, a mismatch) the communicator was already aborted and released: nothing is
    // left to wait for, and the first destroy succeeds; a second is refused, as for any communicator.
    if (comm && comm->magic == dfcclComm::kMagic && comm->fail_code.load() != dfcclSuccess && !comm->user_aborted) {
      if (comm->destroyed.exchange(true))
        throw Error(dfcclInvalidUsage, fmt::format("{}: argument 'comm' was destroyed already", fn));
      comm_destroy(comm);
      return dfcclSuccess;
    }
    dfcclComm* c = check_comm(comm, fn);
    c->destroyed = true;
    comm_destroy(c);  // the handle stays allocated, marked dead, so later use is reported rather than undefined
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommAbort(dfcclComm_t comm) {
  return guard([&] {
    const char* fn = "dfcclCommAbort";
    if (!comm) bad(fn, "argument 'comm' is NULL");
    if (comm->magic != dfcclComm::kMagic) bad(fn, "argument 'comm' is not a communicator");
    comm_abort(comm);  // a second abort, or one after destroy, does nothing
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommGetAsyncError(dfcclComm_t comm, dfcclResult_t* asyncError) {
  return guard([&] {
    const char* fn = "dfcclCommGetAsyncError";
    if (!comm || comm->magic != dfcclComm::kMagic) bad(fn, "argument 'comm' is not a communicator");
    if (!asyncError) bad(fn, "argument 'asyncError' is NULL");
    *asyncError = dfcclResult_t(comm->async_error.load());
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommCount(dfcclComm_t comm, int* count) {
  return guard([&] {
    dfcclComm* c = check_comm(comm, "dfcclCommCount");
    if (!count) bad("dfcclCommCount", "argument 'count' is NULL");
    *count = c->nranks;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommUserRank(dfcclComm_t comm, int* rank) {
  return guard([&] {
    dfcclComm* c = check_comm(comm, "dfcclCommUserRank");
    if (!rank) bad("dfcclCommUserRank", "argument 'rank' is NULL");
    *rank = c->rank;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommDevice(dfcclComm_t comm, int* device) {
  return guard([&] {
    dfcclComm* c = check_comm(comm, "dfcclCommDevice");
    if (!device) bad("dfcclCommDevice", "argument 'device' is NULL");
    *device = c->config.device;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommGetInfo(dfcclComm_t comm, dfcclCommInfo_t* info) {
  return guard([&] {
    const char* fn = "dfcclCommGetInfo";
    dfcclComm* c = check_comm(comm, fn);
    if (!info) bad(fn, "argument 'info' is NULL");
    std::shared_ptr<Engine> e = live_engine(c, fn);
    *info = comm_info(c, *e);
    return dfcclSuccess;
  });
}

}  // extern "C"
