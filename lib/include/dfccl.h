/*
 * DFCCL — a deadlock-free GPU collective communication library.
 *
 * The API is shaped like NCCL's so that NCCL users feel at home, with three differences that are the point of the
 * library:
 *   1. every collective returns a request; completion joins a stream only when asked (dfcclWait), so a device
 *      synchronization between submit and wait never waits for peers;
 *   2. collectives of one process and GPU — of any communicator — run inside one persistent daemon that preempts a
 *      collective whose peers are absent and runs another one instead, so disordered invocation cannot deadlock;
 *   3. persistent collectives, prepared once with a user-chosen id, may be started in any order by different ranks,
 *      even inside one communicator.
 *
 * Conventions: every call returns a dfcclResult_t and never throws; on an error, dfcclGetLastError() returns a message
 * naming the offending argument. Calls are thread-safe.
 */
#ifndef DFCCL_H_
#define DFCCL_H_

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h> /* cudaStream_t */

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, written here only: CMake's project version and python/setup.py read these three lines. */
#define DFCCL_MAJOR 0
#define DFCCL_MINOR 2
#define DFCCL_PATCH 0
#define DFCCL_VERSION_CODE (DFCCL_MAJOR * 10000 + DFCCL_MINOR * 100 + DFCCL_PATCH)

/* ------------------------------------------------------------------------------------------------------------------ */
/* Result codes. dfcclInProgress is positive and not an error.                                                        */
typedef enum {
  dfcclSuccess = 0,
  dfcclUnhandledCudaError = 1, /* a CUDA call failed; after a kernel fault, every collective of that device */
  dfcclSystemError = 2,        /* an OS call failed (shared memory, threads, ...) */
  dfcclInternalError = 3,      /* a bug in DFCCL */
  dfcclInvalidArgument = 4,    /* a bad argument: the message names it */
  dfcclInvalidUsage = 5,       /* a call in the wrong state (destroyed communicator, request reuse, ...) */
  dfcclRemoteError = 6,        /* a peer failed or aborted */
  dfcclInProgress = 7,         /* not finished yet (dfcclTest, nonblocking calls) */
  dfcclTimeout = 8,            /* a bounded wait ran out (bootstrap, dfcclSynchronize) */
  dfcclAborted = 9,            /* the collective's communicator was aborted */
  dfcclNoResources = 10,       /* a documented limit was reached; retry after completions (back-pressure) */
  dfcclNotSupported = 11,      /* valid, but not available here (no GPU, no peer access, ...) */
  dfcclNumResults = 12
} dfcclResult_t;

/* Data types and reduction operators: the numbering is NCCL's. */
typedef enum {
  dfcclInt8 = 0,
  dfcclChar = 0,
  dfcclUint8 = 1,
  dfcclInt32 = 2,
  dfcclInt = 2,
  dfcclUint32 = 3,
  dfcclInt64 = 4,
  dfcclUint64 = 5,
  dfcclFloat16 = 6,
  dfcclHalf = 6,
  dfcclFloat32 = 7,
  dfcclFloat = 7,
  dfcclFloat64 = 8,
  dfcclDouble = 8,
  dfcclBfloat16 = 9,
  dfcclNumTypes = 10
} dfcclDataType_t;

typedef enum { dfcclSum = 0, dfcclProd = 1, dfcclMax = 2, dfcclMin = 3, dfcclAvg = 4, dfcclNumOps = 5 } dfcclRedOp_t;

/* ------------------------------------------------------------------------------------------------------------------ */
/* Handles                                                                                                            */
typedef struct dfcclComm* dfcclComm_t;             /* a communicator */
typedef struct dfcclRequest* dfcclRequest_t;       /* one submitted collective; free with dfcclRequestFree */
typedef struct dfcclPersistent* dfcclPersistent_t; /* a prepared persistent collective */

#define DFCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[DFCCL_UNIQUE_ID_BYTES];
} dfcclUniqueId;

/* ------------------------------------------------------------------------------------------------------------------ */
/* Configuration. Fields left at -1 take their value from the environment (docs/environment.md) or the default.      */
typedef enum { dfcclExecutorCuda = 0, dfcclExecutorHost = 1 } dfcclExecutor_t;
typedef enum { dfcclModePreemptive = 0, dfcclModeBlocking = 1 } dfcclMode_t;

typedef struct {
  size_t size;       /* sizeof(dfcclConfig_t) */
  unsigned magic;    /* DFCCL_CONFIG_MAGIC */
  unsigned version;  /* DFCCL_VERSION_CODE */
  int executor;      /* dfcclExecutorCuda (default) or dfcclExecutorHost (the CPU executor) */
  int mode;          /* dfcclModePreemptive (default) or dfcclModeBlocking (no preemption, like NCCL: can hang) */
  int device;        /* CUDA device (default: the current device); host executor: a virtual device id (default: rank) */
  int initTimeoutMs; /* how long init waits for the other ranks (default DFCCL_INIT_TIMEOUT_MS or 60000) */
} dfcclConfig_t;

#define DFCCL_CONFIG_MAGIC 0xdfcc1001u
#define DFCCL_CONFIG_INITIALIZER \
  { sizeof(dfcclConfig_t), DFCCL_CONFIG_MAGIC, DFCCL_VERSION_CODE, -1, -1, -1, -1 }

/* ------------------------------------------------------------------------------------------------------------------ */
/* Errors and version                                                                                                 */
/**
 * @brief The meaning of a result code in words ("unknown result code" for a value that is none).
 * @param[in] result a dfcclResult_t
 */
const char* dfcclGetErrorString(dfcclResult_t result);
/**
 * @brief The message of the last error returned to this thread (names the bad argument); "" if none.
 * @param[in] comm a communicator, or NULL
 */
const char* dfcclGetLastError(dfcclComm_t comm);
/**
 * @brief This library's version.
 * @param[out] version DFCCL_VERSION_CODE of the library that runs (not NULL)
 */
dfcclResult_t dfcclGetVersion(int* version);
#define DFCCL_FEATURE_NETWORK 0x1 /* the network transport (UCX): communicators whose ranks span hosts */
/**
 * @brief What this build of the library supports.
 * @param[out] features an OR of DFCCL_FEATURE_* bits (not NULL)
 */
dfcclResult_t dfcclGetFeatures(int* features);

/* ------------------------------------------------------------------------------------------------------------------ */
/* Communicators. Bootstrap as in NCCL: one rank calls dfcclGetUniqueId and distributes the id out of band (the      */
/* harness uses MPI_Bcast); every rank then calls dfcclCommInitRank. Init waits for the other ranks for at most       */
/* initTimeoutMs and then returns dfcclTimeout. The id carries the address of a rendezvous service that               */
/* dfcclGetUniqueId starts in its process; that process must stay until every rank has initialised, and while the    */
/* communicator lives when its ranks span hosts (their later rounds go through it). Ranks on other hosts need a      */
/* build with the network transport (dfcclNotSupported otherwise; dfcclGetFeatures tells). The service is a thread:  */
/* a process that forks ranks should let a child make the id (a child forked beside running threads can inherit a    */
/* lock that one of them held).                                                                                       */
/* nranks (ndev) is 1..DFCCL_MAX_RANKS; a larger one is refused (dfcclInvalidArgument naming it) before anything is   */
/* made. A rank's init maps a shared-memory segment in /dev/shm named by the id; the ranks remove its name once all   */
/* have it mapped, a failed init removes it too, and one left by processes that were killed during their init is      */
/* removed by the next init on the host (that finds every process that claimed a rank in it gone). The same holds    */
/* for the connection regions in /dev/shm (host executor; GPUs without peer access): one whose creator was killed    */
/* before its peers mapped it is removed by the next communicator's connections on the host.                        */
#define DFCCL_MAX_RANKS 65536
/**
 * @brief Makes the id of a new communicator and starts its rendezvous service in this process (see above).
 * @param[out] uniqueId the id, to be given to every rank (not NULL)
 */
dfcclResult_t dfcclGetUniqueId(dfcclUniqueId* uniqueId);
/**
 * @brief Makes this rank's communicator: dfcclCommInitRankConfig with the defaults.
 */
dfcclResult_t dfcclCommInitRank(dfcclComm_t* comm, int nranks, dfcclUniqueId commId, int rank);
/**
 * @brief Makes this rank's communicator; waits for the other ranks (at most initTimeoutMs, then dfcclTimeout).
 * @param[out] comm the communicator (not NULL)
 * @param[in] nranks the ranks of the communicator, 1..DFCCL_MAX_RANKS
 * @param[in] commId the id that one rank's dfcclGetUniqueId made
 * @param[in] rank this rank, 0..nranks-1, each claimed by one caller
 * @param[in] config initialised with DFCCL_CONFIG_INITIALIZER; NULL: the defaults
 */
dfcclResult_t dfcclCommInitRankConfig(dfcclComm_t* comm, int nranks, dfcclUniqueId commId, int rank,
                                      const dfcclConfig_t* config);
/**
 * @brief One process, ndev ranks: dfcclCommInitAllConfig with the defaults.
 */
dfcclResult_t dfcclCommInitAll(dfcclComm_t* comms, int ndev, const int* devlist);
/**
 * @brief One process, ndev ranks: comms[i] is rank i on device devlist[i].
 * @param[out] comms ndev communicators (not NULL)
 * @param[in] ndev the ranks, 1..DFCCL_MAX_RANKS
 * @param[in] devlist ndev devices; NULL: devices 0..ndev-1
 * @param[in] config initialised with DFCCL_CONFIG_INITIALIZER; NULL: the defaults
 */
dfcclResult_t dfcclCommInitAllConfig(dfcclComm_t* comms, int ndev, const int* devlist, const dfcclConfig_t* config);
#define DFCCL_SPLIT_NOCOLOR (-1)
/**
 * @brief Collective over comm: ranks with the same color form a new communicator, ordered by key then parent rank.
 * @param[in] comm the parent
 * @param[in] color >= 0, or DFCCL_SPLIT_NOCOLOR: this rank joins none (*newcomm = NULL)
 * @param[in] key the order of the ranks of one color (ties: parent rank)
 * @param[out] newcomm the new communicator (not NULL)
 * @param[in] config NULL inherits the parent's
 */
dfcclResult_t dfcclCommSplit(dfcclComm_t comm, int color, int key, dfcclComm_t* newcomm, const dfcclConfig_t* config);
/**
 * @brief Collective over the ranks of comm that go on after a failure (as MPIX_Comm_shrink, ncclCommShrink): *newcomm
 * is a communicator of the ranks of comm that are not excluded, renumbered in comm's order, on the same executor and
 * transports.
 *
 * comm may have failed (dfcclRemoteError) or be alive. excludeRanks: nExclude ranks of comm to leave out (the same list
 * on every caller); NULL (nExclude 0): the ranks this rank's communicator found failed (the rank its dfcclRemoteError
 * named, and every peer whose process has exited). The survivors agree on one excluded set before the new communicator
 * is made (docs/design.md, "Shrink"): the union of the lists or found sets of the ranks it keeps, plus every rank whose
 * process exits before it calls dfcclCommShrink; a rank that exits while the new communicator is being made is excluded
 * too (the survivors agree again). Every caller that the set keeps returns the same communicator; a caller that the set
 * excludes (or that excludes itself) gets *newcomm = NULL and dfcclSuccess. The other ranks must call it within
 * initTimeoutMs (config's, else comm's), else dfcclTimeout names them; a rank that another rank's list excludes should
 * not call it (it may wait for that timeout). A rank that exits after the call returns is a failure of the new
 * communicator, reported as any other (dfcclRemoteError), and a shrink of it goes on. When the set is not empty, comm
 * fails with dfcclRemoteError naming its lowest rank ("... was excluded by dfcclCommShrink") unless it had failed
 * already: its pending collectives end with that status, their buffers and requests stay valid, and
 * dfcclCommDestroy(comm) returns without waiting for the excluded ranks; with an empty set comm is left as it was.
 * config NULL inherits comm's. A replacement process joins through a fresh id: one survivor calls dfcclGetUniqueId, the
 * id reaches the others (a dfcclBroadcast on *newcomm) and the newcomer, and all call dfcclCommInitRank with the new
 * size. Host and CUDA executors alike (the new communicator on comm's device), on one host or across hosts: where
 * comm's connections use the network (ranks on several hosts, or DFCCL_NET_FORCE=1) the survivors agree over TCP
 * sockets that every rank opened at init, and the new communicator's rendezvous runs in a survivor's process, so the
 * process that made comm's unique id may be among the dead. dfcclNotSupported: comm has more than 4096 ranks.
 * @param[in] comm the communicator, failed or alive
 * @param[in] excludeRanks nExclude ranks of comm to leave out, the same list on every caller; NULL: the ranks this rank
 *   found failed
 * @param[in] nExclude 0..nranks (0 with excludeRanks NULL)
 * @param[out] newcomm the survivors' communicator, or NULL on an excluded caller (not NULL)
 * @param[in] config NULL inherits comm's
 */
dfcclResult_t dfcclCommShrink(dfcclComm_t comm, const int* excludeRanks, int nExclude, dfcclComm_t* newcomm,
                              const dfcclConfig_t* config);
/**
 * @brief Waits (bounded) for the communicator's outstanding collectives, then frees it.
 *
 * Requests stay valid. A handle is a number, never an address: once destroyed or aborted it is refused
 * (dfcclInvalidUsage naming comm; a second dfcclCommAbort does nothing), also after a newer communicator took its
 * place, and nothing of the communicator stays allocated (one still in use by another thread's call goes when that call
 * returns). dfcclCommGetAsyncError still reports how it ended (dfcclAborted after an abort) at least until a
 * communicator created after it ends. Destroy is local, as in NCCL, but the peers learn how many collectives this rank
 * called: a peer's collective that this rank never called fails with dfcclRemoteError naming it ("rank 3 of the
 * communicator ... destroyed its communicator after 5 collectives ..."), on this host and across hosts, whether the
 * process stays or exits; a destroy that waits for such a collective returns at once with it failed so.
 * @param[in] comm a live communicator
 */
dfcclResult_t dfcclCommDestroy(dfcclComm_t comm);
/**
 * @brief Fails every outstanding collective of comm with dfcclAborted, releases streams waiting on them, frees comm.
 *
 * Reaches the daemon through pinned memory and makes no CUDA call, so it returns within DFCCL_ABORT_TIMEOUT_MS (1 s)
 * even while peers are absent or another thread of the process is inside an implicit synchronization (cudaFree,
 * cudaMallocHost, a lazy module load) that waits for the daemon; that synchronization then returns once the daemon has
 * dropped what kept it. The communicator's device memory is freed with its engine (when the last communicator of the
 * process on that device goes). dfcclCommDestroy after an abort returns dfcclInvalidUsage. An abort whose collectives
 * were still pending at its timeout (a WARN says so) leaves the communicator's memory in place, for the daemon that
 * still holds them, until the process exits.
 * @param[in] comm a live communicator
 */
dfcclResult_t dfcclCommAbort(dfcclComm_t comm);
/**
 * @brief How the communicator failed or ended, if it did.
 *
 * dfcclRemoteError: a peer died, stopped (DFCCL_PEER_TIMEOUT_S, DFCCL_NET_TIMEOUT_MS), aborted, or destroyed the
 * communicator before collectives that need it; the message (dfcclGetLastError after a failed call or request) names
 * the rank that failed first, never a rank that left after seeing the failure; a rank whose peers gave it up (stopped
 * or cut off longer than their timeout) names itself.
 * @param[in] comm a communicator, also one that was ended (see dfcclCommDestroy)
 * @param[out] asyncError dfcclSuccess, or how it failed or ended (not NULL)
 */
dfcclResult_t dfcclCommGetAsyncError(dfcclComm_t comm, dfcclResult_t* asyncError);
/**
 * @brief The number of ranks of comm.
 * @param[in] comm a live communicator
 * @param[out] count its nranks (not NULL)
 */
dfcclResult_t dfcclCommCount(dfcclComm_t comm, int* count);
/**
 * @brief This rank of comm.
 * @param[in] comm a live communicator
 * @param[out] rank 0..nranks-1 (not NULL)
 */
dfcclResult_t dfcclCommUserRank(dfcclComm_t comm, int* rank);
/**
 * @brief The device of comm: a CUDA device, or the host executor's virtual device id.
 * @param[in] comm a live communicator
 * @param[out] device the device (not NULL)
 */
dfcclResult_t dfcclCommDevice(dfcclComm_t comm, int* device);
/* The structs that the library fills (dfcclCommInfo_t, dfcclRequestInfo_t, dfcclStats_t) begin with their size,    */
/* which the caller sets with the struct's initializer (DFCCL_COMM_INFO_INITIALIZER, ...): a library refuses a size   */
/* it does not fill (dfcclInvalidArgument naming the argument), so that a program built against another version of   */
/* this header never has a struct filled past its end. The library leaves the size as it was.                        */

/* What a communicator runs with, as init resolved it (for run records and diagnostics).                              */
typedef enum {
  dfcclTransportPeerMemory = 0, /* receive buffers in the GPUs' memory, written by the neighbours (CUDA IPC / peers) */
  dfcclTransportHostMemory = 1, /* CUDA executor without peer access: shared host memory registered with CUDA         */
  dfcclTransportSharedMemory = 2, /* host executor: POSIX shared memory                                               */
  dfcclTransportNetwork = 3 /* a neighbour on another host (or DFCCL_NET_FORCE=1): the network transport's proxy        */
} dfcclTransport_t;
typedef struct {
  size_t size;                   /* sizeof(dfcclCommInfo_t), set by DFCCL_COMM_INFO_INITIALIZER */
  int executor, mode, device;    /* as resolved (dfcclExecutor_t, dfcclMode_t) */
  int nranks, rank, prev, next;  /* the ring: this rank's neighbours */
  int blocks, threadsPerBlock;   /* daemon blocks (= channels per collective) and their threads */
  int slots, lanes, persistentLanes;
  size_t slotBytes;
  size_t connectionBytes;        /* this rank's connection memory for this communicator (docs/design.md formula) */
  int transport;                 /* dfcclTransport_t: dfcclTransportNetwork if either ring hop is, else theirs */
  int p2pChannels;               /* channels of a full point-to-point connection (DFCCL_P2P_CHANNELS; 0: none) */
  size_t p2pBytes;               /* this rank's point-to-point connection memory (its arena and lane states) */
  int transportPrev;             /* dfcclTransport_t of the ring hop from prev to this rank */
  int transportNext;             /* dfcclTransport_t of the ring hop from this rank to next */
  int p2pConnections;            /* ranks (itself included) this rank has a point-to-point connection with so far */
  int hierarchyRanksPerHost;     /* DFCCL_HIERARCHY: ranks per host of its hierarchical all-reduce (0: the ring only) */
} dfcclCommInfo_t;
#define DFCCL_COMM_INFO_INITIALIZER /* one value per member: no warning for a missing one */ \
  { sizeof(dfcclCommInfo_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
/**
 * @brief What comm runs with, as init resolved it.
 * @param[in] comm a live communicator
 * @param[in,out] info initialised with DFCCL_COMM_INFO_INITIALIZER (its size is checked)
 */
dfcclResult_t dfcclCommGetInfo(dfcclComm_t comm, dfcclCommInfo_t* info);

/* ------------------------------------------------------------------------------------------------------------------ */
/* Collectives. Arguments as in NCCL, plus:                                                                           */
/*   priority: higher runs first when several collectives are runnable (default 0);                                   */
/*   stream:   inputs are stream-ordered — the collective starts only after the work queued on stream before it;      */
/*             the call returns at once. The host executor ignores streams.                                           */
/*             DFCCL_NO_STREAM: host-ordered — the inputs must be ready, i.e. visible to the device, when the call    */
/*             is made; nothing is queued on any stream and the call makes no CUDA call, so nothing can hold the      */
/*             submission and the call is shorter. Complete it with dfcclTest, dfcclSynchronize or a callback, or     */
/*             join a stream with dfcclWait. Ready: the work that wrote them was waited for on the host               */
/*             (cudaStreamSynchronize of its stream, cudaEventSynchronize, cudaDeviceSynchronize), or a cudaMemcpy    */
/*             from pinned host memory wrote them, or collectives this host has seen complete. NOT ready: right after */
/*             a cudaMemcpy from pageable host memory or a cudaMemset, which may return before the data reaches       */
/*             device memory; the collective may then read stale inputs. For example:                                 */
/*               cudaMemcpy(in, host_vector, bytes, cudaMemcpyHostToDevice);   (pageable: may still be in flight)     */
/*               cudaStreamSynchronize(0);                                      (now visible to the device)           */
/*               dfcclAllReduce(in, out, n, dfcclFloat32, dfcclSum, comm, 0, DFCCL_NO_STREAM, &req);                  */
/*             DFCCL_CHECK_HOST_ORDER=1 (debugging) makes each such call synchronize the calling thread's default     */
/*             streams first: a result right with it and wrong without it means inputs were not ready.                */
/*             A stream that is capturing a CUDA graph captures the call: see "CUDA graphs" below.                   */
/*   request:  out; NULL for fire-and-forget (then completion is observable only through the stream order of later   */
/*             dfcclWait calls on other requests, or dfcclCommDestroy). Under capture NULL means NCCL's form: the     */
/*             stream's later work waits for the collective.                                                          */
/* Collectives of one communicator are matched across ranks by their order of submission (as in NCCL); collectives   */
/* of different communicators may be submitted in any order on different ranks. Matched collectives that differ in  */
/* kind, datatype, count, op or root fail on every rank with dfcclInvalidUsage and a message naming the field, both */
/* values and the ranks (a rank whose part needed nothing from the others, e.g. a broadcast's root, may finish with  */
/* its data right and learn it from dfcclCommGetAsyncError and its next call).                                       */
/* In place: AllGather sendbuff == recvbuff + rank*sendcount; ReduceScatter recvbuff == sendbuff + rank*recvcount;    */
/* AllReduce, Broadcast (root) and Reduce (root) sendbuff == recvbuff. Buffers that overlap in any other way are      */
/* refused (dfcclInvalidArgument naming sendbuff and recvbuff), as are dfcclStart's.                                  */
#define DFCCL_NO_STREAM ((cudaStream_t)(intptr_t)-1)
/**
 * @brief Every rank receives the reduction (op) of all ranks' count elements.
 * @param[in] sendbuff count elements of datatype
 * @param[out] recvbuff count elements (== sendbuff: in place)
 * @param[in] count elements per rank, < 2^48
 * @param[in] datatype a dfcclDataType_t
 * @param[in] op a dfcclRedOp_t
 * @param[in] comm a live communicator
 * @param[in] priority higher runs first when several collectives are runnable
 * @param[in] stream a stream, DFCCL_NO_STREAM or a capturing stream (see above)
 * @param[out] request the request of the collective, or NULL (see above)
 */
dfcclResult_t dfcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, dfcclDataType_t datatype,
                             dfcclRedOp_t op, dfcclComm_t comm, int priority, cudaStream_t stream,
                             dfcclRequest_t* request);
/**
 * @brief Every rank receives every rank's sendcount elements, in rank order.
 * @param[in] sendbuff sendcount elements (recvbuff + rank*sendcount: in place)
 * @param[out] recvbuff nranks*sendcount elements
 * @param[in] sendcount elements per rank
 * @param[in] datatype a dfcclDataType_t
 * @param[in] comm a live communicator
 * @param[in] priority higher runs first when several collectives are runnable
 * @param[in] stream a stream, DFCCL_NO_STREAM or a capturing stream (see above)
 * @param[out] request the request of the collective, or NULL (see above)
 */
dfcclResult_t dfcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, dfcclDataType_t datatype,
                             dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request);
/**
 * @brief Rank r receives block r of the reduction (op) of all ranks' nranks*recvcount elements.
 * @param[in] sendbuff nranks*recvcount elements
 * @param[out] recvbuff recvcount elements (sendbuff + rank*recvcount: in place)
 * @param[in] recvcount elements each rank receives
 * @param[in] datatype a dfcclDataType_t
 * @param[in] op a dfcclRedOp_t
 * @param[in] comm a live communicator
 * @param[in] priority higher runs first when several collectives are runnable
 * @param[in] stream a stream, DFCCL_NO_STREAM or a capturing stream (see above)
 * @param[out] request the request of the collective, or NULL (see above)
 */
dfcclResult_t dfcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, dfcclDataType_t datatype,
                                 dfcclRedOp_t op, dfcclComm_t comm, int priority, cudaStream_t stream,
                                 dfcclRequest_t* request);
/**
 * @brief Every rank receives root's count elements.
 * @param[in] sendbuff count elements, read on root only
 * @param[out] recvbuff count elements (== sendbuff on root: in place)
 * @param[in] count elements
 * @param[in] datatype a dfcclDataType_t
 * @param[in] root 0..nranks-1
 * @param[in] comm a live communicator
 * @param[in] priority higher runs first when several collectives are runnable
 * @param[in] stream a stream, DFCCL_NO_STREAM or a capturing stream (see above)
 * @param[out] request the request of the collective, or NULL (see above)
 */
dfcclResult_t dfcclBroadcast(const void* sendbuff, void* recvbuff, size_t count, dfcclDataType_t datatype, int root,
                             dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request);
/**
 * @brief Root receives the reduction (op) of all ranks' count elements.
 * @param[in] sendbuff count elements
 * @param[out] recvbuff count elements, written on root only (== sendbuff on root: in place)
 * @param[in] count elements
 * @param[in] datatype a dfcclDataType_t
 * @param[in] op a dfcclRedOp_t
 * @param[in] root 0..nranks-1
 * @param[in] comm a live communicator
 * @param[in] priority higher runs first when several collectives are runnable
 * @param[in] stream a stream, DFCCL_NO_STREAM or a capturing stream (see above)
 * @param[out] request the request of the collective, or NULL (see above)
 */
dfcclResult_t dfcclReduce(const void* sendbuff, void* recvbuff, size_t count, dfcclDataType_t datatype, dfcclRedOp_t op,
                          int root, dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request);

/* ------------------------------------------------------------------------------------------------------------------ */
/* CUDA graphs. A collective (the five above), a dfcclSend or dfcclRecv, or an all-to-all called on a stream that is  */
/*   capturing (any capture mode) records a start into the graph (an all-to-all: one per transfer), and each replay   */
/*   of the graph runs a NEW instance of it, preemptible like any other: ranks that replay graphs whose calls of      */
/*   different communicators come in different orders, that each send before they receive, or that synchronize the    */
/*   device between replays, do not deadlock. The communicator needs its graph lanes, made at init when               */
/*   DFCCL_GRAPHS=1 is set on every rank (init refuses ranks that differ; one lane more of connection memory, and     */
/*   point-to-point connections of twice the lanes: docs/design.md); without them, and for communicators across       */
/*   hosts, capture is refused (dfcclNotSupported naming the call), as it is for dfcclStart. Buffers and counts are   */
/*   fixed in the graph, as in NCCL.                                                                                  */
/*   Matching: the collectives a communicator captures are matched across ranks by their capture order, and its       */
/*   captured transfers by their capture order per (sender, receiver), an all-to-all's apart from                     */
/*   dfcclSend/dfcclRecv's (a mismatch fails at capture, naming the field); each replay takes their next turns in     */
/*   that order: every rank replays the graphs that use a communicator the same number of times and in the same       */
/*   order. A communicator's captured calls form orders apart from its eager ones: a rank cannot replay what another  */
/*   calls eagerly, and eager calls and replays on one rank never match each other (each keeps its own order).        */
/*   request NULL: the stream waits for the call right after it (NCCL's idiom: later work on the stream reads         */
/*   recvbuff). A rank's two calls captured in opposite orders each with its wait right after it is a cycle in the    */
/*   programs' own stream order, which no library can break; capture the starts first, then the waits.                */
/*   request non-NULL: a handle of the captured call (not of an instance): dfcclWait(request, stream) on a stream     */
/*   capturing the same graph records where the stream waits for the replay's instance (an all-to-all's: for each     */
/*   transfer), after the call in the graph even if the stream joined the capture before it; it may be called on     */
/*   several streams. dfcclRequestFree frees it; other calls refuse it (dfcclInvalidUsage). A call whose wait is not  */
/*   captured still completes, and the next replay's start waits for it. dfcclWait of a request made outside the      */
/*   capture is refused.                                                                                              */
/*   A graph holds one of its engine's 1024 collective slots per captured collective or transfer until CUDA destroys  */
/*   the graph; capture is refused (dfcclNoResources) where fewer than 64 would remain. Destroy graphs before their   */
/*   communicators, and instantiate a captured graph once (replays of two instantiations must not overlap).           */
/*   dfcclCommAbort releases a stream waiting in a replay. A device-wide synchronization (cudaFree, a lazy kernel's   */
/*   first launch, cudaDeviceSynchronize) right after a graph launch is safe: a captured wait runs the collectives    */
/*   itself when no daemon runs (docs/design.md, "CUDA graphs").                                                      */

/* ------------------------------------------------------------------------------------------------------------------ */
/* Point-to-point and all-to-all. Arguments as in NCCL, plus priority, stream and request as above.                   */
/* dfcclSend / dfcclRecv: count elements to / from rank `peer` (0..nranks-1; the rank itself is allowed). The k-th    */
/*   send from rank a to rank b matches the k-th receive at b from a, per communicator; this order is independent of */
/*   the communicator's collectives and of other pairs. Both sides must give the same count and datatype; a pair   */
/*   that differs fails the communicator on every rank with dfcclInvalidUsage naming the field, both values and the */
/*   ranks, and nothing is written past either buffer.                                                               */
/*   No call needs grouping, and none waits for its peer: a send whose receiver has not arrived is preempted like   */
/*   any collective, so two ranks that each post [send, recv] to the other, in any order, always complete.          */
/* Each rank's memory for its connections is reserved at init (dfcclCommInfo_t.p2pBytes, DFCCL_P2P_ARENA_BYTES); a   */
/* connection with a rank is carved from it by the first call with that rank, without waiting for it.             */
/* DFCCL_P2P_CHANNELS=0 makes none, and these calls then return dfcclInvalidUsage.                                  */
/**
 * @brief Sends count elements to rank peer (see above).
 * @param[in] sendbuff count elements of datatype
 * @param[in] count elements, the same as the receive's
 * @param[in] datatype a dfcclDataType_t, the same as the receive's
 * @param[in] peer 0..nranks-1; the rank itself is allowed
 * @param[in] comm a live communicator with point-to-point connections
 * @param[in] priority as for collectives
 * @param[in] stream a stream, DFCCL_NO_STREAM or a capturing stream (as for collectives)
 * @param[out] request the request, or NULL
 */
dfcclResult_t dfcclSend(const void* sendbuff, size_t count, dfcclDataType_t datatype, int peer, dfcclComm_t comm,
                        int priority, cudaStream_t stream, dfcclRequest_t* request);
/**
 * @brief Receives count elements from rank peer (see above).
 * @param[out] recvbuff count elements of datatype
 * @param[in] count elements, the same as the send's
 * @param[in] datatype a dfcclDataType_t, the same as the send's
 * @param[in] peer 0..nranks-1; the rank itself is allowed
 * @param[in] comm a live communicator with point-to-point connections
 * @param[in] priority as for collectives
 * @param[in] stream a stream, DFCCL_NO_STREAM or a capturing stream (as for collectives)
 * @param[out] request the request, or NULL
 */
dfcclResult_t dfcclRecv(void* recvbuff, size_t count, dfcclDataType_t datatype, int peer, dfcclComm_t comm,
                        int priority, cudaStream_t stream, dfcclRequest_t* request);
/**
 * @brief Rank r sends sendbuff + p*count to rank p and receives rank p's block into recvbuff + p*count.
 * @param[in] sendbuff nranks*count elements
 * @param[out] recvbuff nranks*count elements, not overlapping sendbuff
 * @param[in] count elements per rank pair
 * @param[in] datatype a dfcclDataType_t
 * @param[in] comm a live communicator with point-to-point connections
 * @param[in] priority as for collectives
 * @param[in] stream a stream, DFCCL_NO_STREAM or a capturing stream (as for collectives)
 * @param[out] request the request, or NULL
 */
dfcclResult_t dfcclAllToAll(const void* sendbuff, void* recvbuff, size_t count, dfcclDataType_t datatype,
                            dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request);
/**
 * @brief As MPI_Alltoallv, counts and displacements in elements: sendcounts[p] elements from sendbuff + sdispls[p] go
 * to rank p, which receives them as its recvcounts[r] at recvbuff + rdispls[r].
 *
 * The arrays are read during the call only. All-to-alls are collectives: every rank calls them in the same order on a
 * communicator; their transfers never match a dfcclSend or dfcclRecv. Not in place (sendbuff and recvbuff must not
 * overlap), as in NCCL. The request completes when every transfer of the call has. Receive blocks must not overlap one
 * another (no element is written twice); send blocks may. The library knows no buffer's size: it refuses blocks that
 * overlap, and a block whose displacement plus count passes 2^48 elements or the address space (dfcclInvalidArgument
 * naming both arrays), but a block past the end of its buffer is the caller's error.
 * @param[in] sendbuff the send blocks
 * @param[in] sendcounts nranks counts, in elements
 * @param[in] sdispls nranks displacements from sendbuff, in elements
 * @param[out] recvbuff the receive blocks, not overlapping sendbuff
 * @param[in] recvcounts nranks counts, in elements
 * @param[in] rdispls nranks displacements from recvbuff, in elements
 * @param[in] datatype a dfcclDataType_t
 * @param[in] comm a live communicator with point-to-point connections
 * @param[in] priority as for collectives
 * @param[in] stream a stream, DFCCL_NO_STREAM or a capturing stream (as for collectives)
 * @param[out] request the request, or NULL
 */
dfcclResult_t dfcclAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                             const size_t* recvcounts, const size_t* rdispls, dfcclDataType_t datatype,
                             dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request);

/* ------------------------------------------------------------------------------------------------------------------ */
/* Persistent collectives: prepared once with an id (0 <= id < DFCCL_MAX_PERSISTENT_IDS, unique in the communicator)  */
/* (DFCCL_PERSISTENT_LANES, at most DFCCL_MAX_PERSISTENT_IDS, lowers the limit) by every rank, in any order; each    */
/* dfcclStart of the same id matches the same-numbered start on the other ranks, and starts of different ids may   */
/* come in any order on different ranks — even inside one communicator. An id's memory (one lane: the formula of    */
/* docs/design.md) is allocated by its first prepare on this rank, which does not wait for the others; its first   */
/* dfcclStart maps the ring neighbours' and waits, at most the init timeout, until they have prepared the id        */
/* (dfcclTimeout naming the rank that has not, with nothing queued). Prepare every id before the first start of any */
/* when one thread drives several ranks.                                                                             */
#define DFCCL_MAX_PERSISTENT_IDS 8
/**
 * @brief Prepares an all-reduce of count elements with id (see above); dfcclStart runs it.
 * @param[in] count elements
 * @param[in] datatype a dfcclDataType_t
 * @param[in] op a dfcclRedOp_t
 * @param[in] comm a live communicator
 * @param[in] id 0..DFCCL_MAX_PERSISTENT_IDS-1 (or DFCCL_PERSISTENT_LANES-1), unique in the communicator
 * @param[out] coll the prepared collective (not NULL)
 */
dfcclResult_t dfcclPrepareAllReduce(size_t count, dfcclDataType_t datatype, dfcclRedOp_t op, dfcclComm_t comm, int id,
                                    dfcclPersistent_t* coll);
/**
 * @brief Prepares an all-gather of sendcount elements per rank with id.
 * @param[in] sendcount elements per rank
 * @param[in] datatype a dfcclDataType_t
 * @param[in] comm a live communicator
 * @param[in] id 0..DFCCL_MAX_PERSISTENT_IDS-1 (or DFCCL_PERSISTENT_LANES-1), unique in the communicator
 * @param[out] coll the prepared collective (not NULL)
 */
dfcclResult_t dfcclPrepareAllGather(size_t sendcount, dfcclDataType_t datatype, dfcclComm_t comm, int id,
                                    dfcclPersistent_t* coll);
/**
 * @brief Prepares a reduce-scatter of recvcount elements per rank with id.
 * @param[in] recvcount elements each rank receives
 * @param[in] datatype a dfcclDataType_t
 * @param[in] op a dfcclRedOp_t
 * @param[in] comm a live communicator
 * @param[in] id 0..DFCCL_MAX_PERSISTENT_IDS-1 (or DFCCL_PERSISTENT_LANES-1), unique in the communicator
 * @param[out] coll the prepared collective (not NULL)
 */
dfcclResult_t dfcclPrepareReduceScatter(size_t recvcount, dfcclDataType_t datatype, dfcclRedOp_t op, dfcclComm_t comm,
                                        int id, dfcclPersistent_t* coll);
/**
 * @brief Prepares a broadcast of count elements from root with id.
 * @param[in] count elements
 * @param[in] datatype a dfcclDataType_t
 * @param[in] root 0..nranks-1
 * @param[in] comm a live communicator
 * @param[in] id 0..DFCCL_MAX_PERSISTENT_IDS-1 (or DFCCL_PERSISTENT_LANES-1), unique in the communicator
 * @param[out] coll the prepared collective (not NULL)
 */
dfcclResult_t dfcclPrepareBroadcast(size_t count, dfcclDataType_t datatype, int root, dfcclComm_t comm, int id,
                                    dfcclPersistent_t* coll);
/**
 * @brief Prepares a reduce of count elements to root with id.
 * @param[in] count elements
 * @param[in] datatype a dfcclDataType_t
 * @param[in] op a dfcclRedOp_t
 * @param[in] root 0..nranks-1
 * @param[in] comm a live communicator
 * @param[in] id 0..DFCCL_MAX_PERSISTENT_IDS-1 (or DFCCL_PERSISTENT_LANES-1), unique in the communicator
 * @param[out] coll the prepared collective (not NULL)
 */
dfcclResult_t dfcclPrepareReduce(size_t count, dfcclDataType_t datatype, dfcclRedOp_t op, int root, dfcclComm_t comm,
                                 int id, dfcclPersistent_t* coll);
/**
 * @brief Starts the next instance of a prepared collective on these buffers (buffers as its collective's, in place as
 * there).
 * @param[in] coll a prepared collective
 * @param[in] sendbuff its input
 * @param[out] recvbuff its output
 * @param[in] priority as for collectives
 * @param[in] stream a stream or DFCCL_NO_STREAM (as for collectives; a capturing stream is refused)
 * @param[out] request the request of this instance, or NULL
 */
dfcclResult_t dfcclStart(dfcclPersistent_t coll, const void* sendbuff, void* recvbuff, int priority,
                         cudaStream_t stream, dfcclRequest_t* request);
/**
 * @brief Frees a prepared collective; its started instances and their requests stay valid.
 * @param[in] coll a prepared collective
 */
dfcclResult_t dfcclPersistentFree(dfcclPersistent_t coll);

/* ------------------------------------------------------------------------------------------------------------------ */
/* Completion. A request stays valid until dfcclRequestFree, also after its communicator is destroyed.                */
/**
 * @brief Joins a stream to the collective or, where the wait is on the host, waits for it.
 *
 * Stream waits on the GPU for the collective (a one-thread polling kernel, or a stream memory wait with
 * DFCCL_WAIT_KERNEL=0); returns at once. Host executor: blocks the calling thread until the collective is done (at most
 * DFCCL_HOST_WAIT_TIMEOUT_MS, then dfcclTimeout) and returns its status. A device synchronization after dfcclWait waits
 * for peers again: wait as late as possible. On a capturing stream: see "CUDA graphs". Under serialized launches
 * (CUDA_LAUNCH_BLOCKING=1, compute-sanitizer) the wait holds the calling thread or every later kernel until the
 * collective completes, so ranks that wait in different orders can hang there; the engine warns at creation, and
 * dfcclCommAbort still ends such a hang. Prefer host completion while debugging. On a GPU shared through CUDA MPS,
 * streams waiting on the GPU can hang the MPS clients, so there dfcclWait blocks the calling thread as on the host
 * executor (the stream's later work, queued after it returns, still follows the collective); DFCCL_MPS_WAIT=stream
 * restores the GPU-side wait and the hazard. The engine warns.
 * @param[in] request a request, not freed
 * @param[in] stream the stream that waits (ignored where the wait is on the host)
 */
dfcclResult_t dfcclWait(dfcclRequest_t request, cudaStream_t stream);
/**
 * @brief Whether the collective finished, without waiting.
 *
 * *done = 1 when finished; the return value is then the collective's status (dfcclSuccess, dfcclAborted, ...).
 * @param[in] request a request, not freed
 * @param[out] done 1 when finished, else 0 (not NULL)
 */
dfcclResult_t dfcclTest(dfcclRequest_t request, int* done);
/**
 * @brief Waits on the host for the collective and returns its status.
 *
 * Blocks up to timeoutMs (>= 0) milliseconds; dfcclTimeout if not finished by then.
 * @param[in] request a request, not freed
 * @param[in] timeoutMs >= 0
 */
dfcclResult_t dfcclSynchronize(dfcclRequest_t request, int timeoutMs);
typedef void (*dfcclCallback_t)(dfcclRequest_t request, dfcclResult_t status, void* userArg);
/**
 * @brief Calls fn once, on a DFCCL host thread, when the collective finishes (at once, on this thread, if it has).
 *
 * One callback per request: a second call returns dfcclInvalidUsage and leaves the first in place.
 * @param[in] request a request, not freed
 * @param[in] fn the callback (not NULL)
 * @param[in] userArg passed to fn
 */
dfcclResult_t dfcclRequestSetCallback(dfcclRequest_t request, dfcclCallback_t fn, void* userArg);

typedef struct {
  size_t size;          /* sizeof(dfcclRequestInfo_t), set by DFCCL_REQUEST_INFO_INITIALIZER */
  dfcclResult_t status; /* dfcclInProgress until finished */
  uint64_t submitNs;    /* host clock (CLOCK_MONOTONIC) at submission */
  uint64_t completeNs;  /* host clock when the host saw the completion (0 until then) */
  uint64_t coreStartNs; /* executor clock when the first block started the collective */
  uint64_t coreEndNs;   /* executor clock when the last block finished it (core time = end - start) */
  uint32_t preemptions; /* times a block of this collective was preempted */
  uint32_t waitUs;      /* the longest time one of its channels spent waiting for peers (spin phases), us */
} dfcclRequestInfo_t;
#define DFCCL_REQUEST_INFO_INITIALIZER \
  { sizeof(dfcclRequestInfo_t), dfcclInProgress, 0, 0, 0, 0, 0, 0 }
/**
 * @brief The collective's status, times and preemptions so far.
 * @param[in] request a request, not freed, not a captured collective's
 * @param[in,out] info initialised with DFCCL_REQUEST_INFO_INITIALIZER (its size is checked)
 */
dfcclResult_t dfcclRequestGetInfo(dfcclRequest_t request, dfcclRequestInfo_t* info);
/**
 * @brief The ranks of the request's communicator that have not called its collective yet (a dfcclSend or dfcclRecv: its
 * peer, while the peer has not posted the other side; an all-to-all: every peer missing for any of its transfers), in
 * increasing order: up to `capacity` into ranks, their number into *count (which may exceed capacity).
 *
 * *count is 0 once every rank has called it, and after it finished. For watchdogs: a collective pending for long with
 * ranks missing waits for them; with none missing, it waits for the GPU or for a peer that has not run it yet.
 * @param[in] request a request, not freed
 * @param[out] ranks capacity ints (NULL when capacity is 0)
 * @param[in] capacity >= 0
 * @param[out] count the number of missing ranks (not NULL)
 */
dfcclResult_t dfcclRequestGetMissingRanks(dfcclRequest_t request, int* ranks, int capacity, int* count);
/**
 * @brief Frees the request.
 *
 * After it returns, the request's callback is not running and never will (a running one is waited for, unless
 * dfcclRequestFree is called from that callback itself): its userArg may be released.
 * @param[in] request a request, not freed
 */
dfcclResult_t dfcclRequestFree(dfcclRequest_t request);

/* ------------------------------------------------------------------------------------------------------------------ */
/* Engine (one per process and device, shared by all its communicators): statistics and device synchronization.      */
/* The daemon's phases that builds with -DDFCCL_PROFILE=1 time: the index of dfcclStats_t.profileNs.                */
typedef enum {
  dfcclProfileCheck = 0,   /* primitives' condition checks (spin phase + barrier) */
  dfcclProfileMove = 1,    /* data movement */
  dfcclProfilePost = 2,    /* posts (fence + flags) */
  dfcclProfileProgram = 3, /* program set-up and step arithmetic */
  dfcclProfilePoll = 4,    /* submission polling */
  dfcclProfileExit = 5,    /* exit decisions */
  dfcclProfileLaunch = 6,  /* whole launches (the rest is the scheduler's own bookkeeping) */
  dfcclNumProfilePhases = 7
} dfcclProfilePhase_t;
typedef struct {
  size_t size;               /* sizeof(dfcclStats_t), set by DFCCL_STATS_INITIALIZER */
  uint64_t submitted;        /* collectives submitted */
  uint64_t completed;        /* collectives completed (including aborted ones) */
  uint64_t preemptions;      /* attempts that ended because a primitive's spin budget ran out */
  uint64_t contextSwitches;  /* times a block switched from one collective to a different one */
  uint64_t daemonLaunches;   /* daemon kernel launches (first launch and relaunches) */
  uint64_t daemonExitsIdle;  /* voluntary exits: nothing to run */
  uint64_t daemonExitsStuck; /* voluntary exits: every collective stuck on absent peers */
  uint64_t lateDoorbells;    /* relaunches made because submitted work was not seen yet */
  uint64_t outstanding;      /* now: collectives submitted and not yet seen complete by the host */
  uint64_t streamWaited;     /* now: pending collectives that some stream waits on (dfcclWait) */
  int daemonRunning;         /* now: 1 while a daemon kernel is launched and has not been seen to exit */
  uint64_t standbyLaunches;  /* launches by dfcclWait queued behind a running daemon (it was leaving, or a     */
                             /* device-wide barrier such as a lazy module load was pending)                   */
  uint64_t primitives;       /* primitives (slot handshakes) run by the blocks of the daemon launches that exited */
  uint64_t descPrefetched;   /* collectives whose descriptor block 0 found already copied into device memory by  */
                             /* the prefetcher when it picked them up (daemon launches that exited)              */
  /* builds with -DDFCCL_PROFILE=1 only, else 0: the time thread 0 of the blocks spent in each dfcclProfilePhase_t,  */
  /* summed over blocks and exited launches                                                                          */
  uint64_t profileNs[dfcclNumProfilePhases];
  uint64_t standinRuns; /* waits that ran the scheduler themselves because no daemon ran when they came: a graph's */
                        /* wait nodes, and eager dfcclWait once graphs are captured (each places its blocks and     */
                        /* sets the scheduler up for one collective, where a running daemon picks it up at once)    */
} dfcclStats_t;
#define DFCCL_STATS_INITIALIZER \
  { sizeof(dfcclStats_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}, 0 }
/**
 * @brief The counters of comm's engine.
 *
 * dfcclTimeout if the engine stays busy for 1 s (a thread of the process inside a CUDA call that an implicit
 * synchronization holds); nothing waits longer.
 * @param[in] comm a live communicator
 * @param[in,out] stats initialised with DFCCL_STATS_INITIALIZER (its size is checked)
 */
dfcclResult_t dfcclGetStats(dfcclComm_t comm, dfcclStats_t* stats);
/**
 * @brief Writes the state of comm's engine to stderr, for diagnosing a hang: daemon, heartbeats of its blocks, rings
 * and pending collectives (host memory only), each with the ranks of its communicator that have not called it yet; with
 * deviceState != 0 also what each block holds for each pending collective, the doorbells and the lanes of the
 * communicators involved (device memory, read on a helper thread: while an implicit synchronization of another thread
 * holds the device, the call says so after 2 s and returns).
 *
 * Then comm's point-to-point arena and the channels and slot size of each connection made so far.
 * @param[in] comm a live communicator
 * @param[in] deviceState non-zero: also the device memory's state
 */
dfcclResult_t dfcclDebugDump(dfcclComm_t comm, int deviceState);

/**
 * @brief Synchronizes comm's device: cudaDeviceSynchronize for the CUDA executor; for the host executor, an emulation
 * that waits for the running daemon to exit (in blocking mode that can hang, exactly like NCCL).
 * @param[in] comm a live communicator
 */
dfcclResult_t dfcclDeviceSynchronize(dfcclComm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* DFCCL_H_ */
