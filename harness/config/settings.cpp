#include "settings.h"

#include <fmt/format.h>

#include <iterator>

#include "config/workload.h"

namespace dfccl::harness {
namespace {

constexpr Valid at_least(double min) { return {Valid::AtLeast, min}; }
constexpr Valid one_of(Choices choices, const char* noun = nullptr) { return {Valid::OneOf, 0, choices, noun}; }
constexpr Valid kAny{};
constexpr Valid kNotNegative{Valid::NotNegative};
constexpr Valid kPositive{Valid::Positive};
constexpr Valid kProbability{Valid::Probability};

const Setting kSettings[] = {
    {"name", Type::String, "''", kAny, "workload name (default: the file name without .toml)"},
    {"description", Type::String, "''", kAny, "what the workload is"},
    {"source", Type::String, "''", kAny, "where its sizes come from"},
    {"kind", Type::String, "''", one_of(Workload::kKindNames),
     "sweep | mix | step | replay (default: step if [[step]] entries exist, mix if [mix], replay if [sim], else "
     "sweep)"},
    {"run.backend", Type::StringList, "['auto']", one_of(kBackendNames, "backend"),
     "backends to run, in order: dfccl, dfccl-blocking, dfccl-graph (each timing span's collectives and waits "
     "captured into a CUDA graph and replayed), nccl, nccl-graph (the same for NCCL: nccl-tests -G), host, "
     "host-blocking; auto = dfccl,nccl with GPUs, else host"},
    {"run.iterations", Type::Int, "20", at_least(1), "timed iterations per trial (nccl-tests -n)"},
    {"run.warmup", Type::Int, "5", at_least(0), "untimed warm-up iterations per trial (nccl-tests -w)"},
    {"run.trials", Type::Int, "1", at_least(1),
     "trials per case; each trial is watched by the watchdog and may deadlock"},
    {"run.timeout", Type::Float, "60.0", kPositive,
     "seconds without progress on any rank (a program step or a wait returning) before a trial is declared "
     "deadlocked (nccl-tests -T)"},
    {"run.seed", Type::Int, "1", kNotNegative, "seed of the data, the mix and every random decision"},
    {"run.check", Type::Bool, "true", kAny, "run one more, untimed iteration per trial and count wrong elements"},
    {"run.diagnose", Type::Bool, "false", kAny,
     "on a trial the watchdog stops, print each rank's position in its program and its backend's state to stderr"},
    {"run.completion", Type::String, "'stream'", one_of(kCompletionNames),
     "dfccl: how the result becomes usable: stream (dfcclWait on the stream; host executor: dfcclWait) | host "
     "(dfcclSynchronize) | callback (dfcclRequestSetCallback)"},
    {"run.order", Type::String, "'stream'", one_of(kSubmitOrderNames),
     "dfccl on GPUs: how a collective's inputs are ordered: stream (after the work queued on its stream) | host "
     "(DFCCL_NO_STREAM: ready when submitted; no CUDA call at submission; needs run.completion host or callback)"},
    {"run.streams", Type::String, "'single'", one_of(kStreamsNames),
     "GPU backends: single (one stream) | per_group (one per group kind)"},
    {"run.nccl_comms", Type::String, "'auto'", one_of(kNcclCommsNames),
     "nccl backend: blocking | nonblocking communicators; auto: blocking for sweep workloads (NCCL's fast path), "
     "nonblocking otherwise (a deadlock is then recoverable even inside an enqueue)"},
    {"run.in_place", Type::String, "'auto'", one_of(kInPlaceNames),
     "nccl-tests' measurements per case: both (out-of-place, then in-place: input and output share one buffer) | off "
     "(out-of-place only) | only (in-place only); auto: both for sweep workloads, off for mix, step and replay "
     "workloads (their point is disorder, not the buffer layout)"},
    {"run.timing", Type::String, "'iteration'", one_of(kTimingModeNames),
     "iteration (a timing mark before and after every iteration) | batch (nccl-tests' method: marks only around "
     "batches of run.batch timed iterations; each iteration gets its batch's mean)"},
    {"run.batch", Type::Int, "10", at_least(1),
     "batch timing: timed iterations per batch (the last batch may be shorter)"},
    {"run.graph_replays", Type::Int, "1", at_least(1),
     "graph backends (nccl-graph, dfccl-graph): launches of each timing span's graph between its two marks, each "
     "iteration's time the span's divided by this (nccl-tests -G)"},
    {"layout.tp", Type::Int, "1", at_least(1), "tensor-parallel group size"},
    {"layout.dp", Type::Int, "0", at_least(0), "data-parallel group size (0: world size / (tp * pp))"},
    {"layout.pp", Type::Int, "1", at_least(1), "pipeline-parallel group size"},
    {"data.dtype",
     Type::String,
     "'float32'",
     {Valid::DataType},
     "int8 uint8 int32 uint32 int64 uint64 float16 float32 float64 bfloat16 (nccl-tests -d)"},
    {"data.op", Type::String, "'sum'", {Valid::RedOp}, "sum prod max min avg (nccl-tests -o)"},
    {"data.root", Type::Int, "0", at_least(0), "root of broadcast and reduce, a rank of the group (nccl-tests -r)"},
    {"data.priority", Type::Int, "0", kAny, "priority of every collective (dfccl; higher runs first)"},
    {"sizes.begin", Type::Bytes, "33554432", kAny, "smallest size S in bytes, at least 1 (nccl-tests -b)"},
    {"sizes.end", Type::Bytes, "33554432", kAny, "largest size S in bytes (nccl-tests -e)"},
    {"sizes.factor", Type::Float, "2.0", at_least(1),
     "multiplication factor between sizes (nccl-tests -f); must be > 1 when sizes.begin < sizes.end and no "
     "sizes.step is given"},
    {"sizes.step", Type::Bytes, "0", kAny,
     "increment in bytes between sizes (nccl-tests -i): sizes begin, begin+step, ... <= end; 0: sizes.factor "
     "applies (a step > 0 cannot be combined with a sizes.factor other than 1 given explicitly)"},
    {"sweep.collectives",
     Type::StringList,
     "['all_reduce']",
     {Valid::Collective},
     "collectives of the sweep: all_reduce all_gather reduce_scatter broadcast reduce sendrecv all_to_all p2p"},
    {"sweep.group", Type::String, "'world'", {Valid::Group}, "group of the sweep: world tp dp pp"},
    {"mix.count", Type::Int, "8", at_least(1), "collectives per step of a mix"},
    {"mix.collectives",
     Type::Weights,
     "{ all_reduce = 1 }",
     {Valid::Collective},
     "collectives of the mix and their relative weights"},
    {"mix.groups", Type::StringList, "['world']", {Valid::Group}, "groups the mix draws from (uniformly)"},
    {"mix.per_trial", Type::Bool, "true", kAny, "draw a new step for every trial (else one step for the whole run)"},
    {"mix.priority_max", Type::Int, "0", at_least(0), "each collective gets a random priority in [0, priority_max]"},
    {"sim.layout", Type::String, "''", kAny,
     "replay: the simulator's layout (megatron:TPxDPxPP, random:NxKxM[@S], groups:0,1;1,2;...; docs/simulator.md)"},
    {"sim.colls", Type::Int, "10", at_least(1), "replay: collectives per group per trial (dfccl-sim --colls)"},
    {"sim.disorder", Type::Float, "0.0", kProbability,
     "replay: disorder probability of the scenarios (dfccl-sim --disorder)"},
    {"sim.sync", Type::Float, "0.0", kProbability, "replay: sync probability after each submission (dfccl-sim --sync)"},
    {"sim.seed", Type::Int, "1", kNotNegative, "replay: the scenarios' base seed (dfccl-sim --seed)"},
    {"sim.first_trial", Type::Int, "0", at_least(0),
     "replay: harness trial t replays the scenario's trial first_trial + t"},
    {"sim.coll", Type::String, "'all_reduce'", {Valid::Collective}, "replay: the collective every submission posts"},
    {"sim.bytes", Type::Bytes, "64", kAny, "replay: size S in bytes of every replayed collective"},
    {"fault.kill_max_ms", Type::Int, "200", at_least(0),
     "fault: each trial's victim is killed (SIGKILL) 0..kill_max_ms after its first collective completed"},
    {"fault.after", Type::Int, "50", at_least(1),
     "fault: collectives the survivors run on the shrunk communicator after the failure"},
    {"fault.inflight", Type::Int, "4", at_least(1), "fault: collectives each rank submits before it waits for them"},
    {"pipeline.micro_batches", Type::Int, "0", at_least(0),
     "pipeline: micro-batches of a 1F1B schedule over layout.pp stages, which makes the step (0: no pipeline)"},
    {"pipeline.activation_bytes", Type::Bytes, "65536", kAny,
     "pipeline: size of each activation (stage s -> s+1) and gradient (s+1 -> s) transfer, a p2p entry"},
    {"pipeline.tp_per_pass", Type::Int, "2", at_least(0),
     "pipeline: tp all-reduces per forward and per backward pass of a micro-batch (none when layout.tp is 1)"},
    {"pipeline.tp_bytes", Type::Bytes, "16384", kAny, "pipeline: size of each tp all-reduce"},
    {"pipeline.dp_buckets", Type::Int, "2", at_least(0),
     "pipeline: dp gradient all-reduces of each stage after its last backward pass"},
    {"pipeline.dp_bytes", Type::Bytes, "65536", kAny, "pipeline: size of each dp all-reduce"},
    {"order.probability", Type::Float, "0.0", kProbability,
     "per rank and iteration: probability of a random legal order of its submissions (each communicator's "
     "collectives and each pair's transfers keep their order; a step's data dependencies are kept)"},
    {"sync.probability", Type::Float, "0.0", kProbability,
     "probability of a forced cudaDeviceSynchronize at each placement point"},
    {"sync.placement", Type::String, "'between'", one_of(kSyncPlacementNames),
     "between (after a submission, before the next) | before_wait (once after all submissions)"},
    {"host_alloc.probability", Type::Float, "0.0", kProbability,
     "probability of a host allocation after each submission"},
    {"host_alloc.bytes", Type::Bytes, "1048576", kAny, "size of each host allocation"},
    {"host_alloc.kinds", Type::StringList, "['malloc_host', 'free_host', 'host_register']", one_of(kHostAllocKindNames),
     "malloc_host (cudaMallocHost, freed after the step) | free_host (cudaMallocHost + cudaFreeHost) | "
     "host_register (cudaHostRegister + unregister)"},
    {"implicit.cuda_free_probability", Type::Float, "0.0", kProbability,
     "probability of cudaMalloc + cudaFree after a submission"},
    {"implicit.lazy_kernel_probability", Type::Float, "0.0", kProbability,
     "probability of the first launch of a not yet loaded kernel after a submission (lazy module loading)"},
    {"compute.duration_us", Type::Float, "0.0", kNotNegative,
     "duration of a compute kernel between collectives (0: none)"},
    {"compute.probability", Type::Float, "1.0", kProbability, "probability of a compute kernel after each submission"},
};

// Keys of a [[step]] entry. Their defaults refer to other settings, so config/workload.cpp reads them itself.
const Setting kStepSettings[] = {
    {"coll", Type::String, "'all_reduce'", {Valid::Collective}, "collective (required)"},
    {"group", Type::String, "'world'", {Valid::Group}, "group kind"},
    {"bytes", Type::Bytes, "0", kAny, "size S in bytes (required)"},
    {"root", Type::Int, "-1", kAny, "root (default: data.root)"},
    {"src", Type::Int, "0", kAny, "p2p: the sender's rank in the group (modulo its size)"},
    {"dst", Type::Int, "1", kAny, "p2p: the receiver's rank in the group (modulo its size; src: to itself)"},
    {"priority", Type::Int, "-1", kAny, "priority (default: data.priority)"},
    {"repeat", Type::Int, "1", kAny, "how many consecutive copies of this entry"},
    {"label", Type::String, "''", kAny, "what the entry stands for (a layer, a bucket)"},
};

const std::map<std::string, std::string> kAliases = {
    {"backend", "run.backend"},
    {"backends", "run.backend"},
    {"iters", "run.iterations"},
    {"iterations", "run.iterations"},
    {"warmup", "run.warmup"},
    {"trials", "run.trials"},
    {"timeout", "run.timeout"},
    {"seed", "run.seed"},
    {"check", "run.check"},
    {"diagnose", "run.diagnose"},
    {"completion", "run.completion"},
    {"order", "run.order"},
    {"streams", "run.streams"},
    {"nccl_comms", "run.nccl_comms"},
    {"timing", "run.timing"},
    {"in_place", "run.in_place"},
    {"batch", "run.batch"},
    {"graph_replays", "run.graph_replays"},
    {"tp", "layout.tp"},
    {"dp", "layout.dp"},
    {"pp", "layout.pp"},
    {"dtype", "data.dtype"},
    {"op", "data.op"},
    {"root", "data.root"},
    {"priority", "data.priority"},
    {"begin", "sizes.begin"},
    {"end", "sizes.end"},
    {"factor", "sizes.factor"},
    {"collectives", "sweep.collectives"},
    // nccl-tests' letters
    {"b", "sizes.begin"},
    {"e", "sizes.end"},
    {"f", "sizes.factor"},
    {"n", "run.iterations"},
    {"w", "run.warmup"},
    {"d", "data.dtype"},
    {"o", "data.op"},
    {"r", "data.root"},
    {"i", "sizes.step"},
    {"T", "run.timeout"},
    // nccl-tests' long names
    {"minbytes", "sizes.begin"},
    {"maxbytes", "sizes.end"},
    {"stepbytes", "sizes.step"},
    {"stepfactor", "sizes.factor"},
    {"warmup_iters", "run.warmup"},
    {"datatype", "data.dtype"},
};

}  // namespace

std::string_view type_text(Type t) {
  switch (t) {
    case Type::Int: return "an integer";
    case Type::Float: return "a number";
    case Type::Bool: return "true or false";
    case Type::String: return "a string";
    case Type::Bytes: return "a size in bytes (8, 64K, 1M, 1GiB)";
    case Type::StringList: return "a list of strings (or one comma-separated string)";
    case Type::Weights: return "a table of name = weight (or a list of names)";
  }
  return "?";
}

std::span<const Setting> settings() { return kSettings; }
std::span<const Setting> step_settings() { return kStepSettings; }

const Setting* find_setting(std::string_view key) {
  for (const Setting& s : kSettings)
    if (key == s.key) return &s;
  return nullptr;
}

const std::map<std::string, std::string>& setting_aliases() { return kAliases; }

std::string describe_settings() {
  std::string out;
  for (const Setting& s : kSettings) out += fmt::format("  {:<34} {:<22} {}\n", s.key, s.default_toml, s.help);
  out += "  [[step]] entries (file only):\n";
  for (const Setting& s : kStepSettings) out += fmt::format("    {:<32} {:<22} {}\n", s.key, s.default_toml, s.help);
  out += "  aliases: ";
  for (const auto& [a, k] : kAliases) out += fmt::format("{}{}={} ", a.size() == 1 ? "-" : "--", a, k);
  out += "\n";
  return out;
}

}  // namespace dfccl::harness
