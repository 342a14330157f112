// Workload files: parsing, defaults, command-line overrides, and errors that name the bad key.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/memory_check.h"
#include "config/settings.h"
#include "config/workload.h"
#include "output/layout_check.h"
#include "workload_error.h"

using namespace dfccl::harness;
using dfccl::harness::test::error_of;

TEST(Workload, DefaultsOfAnEmptyFileAreASweep) {
  Workload w = parse_workload("", "empty.toml", {});
  EXPECT_EQ(w.name, "empty");
  EXPECT_EQ(w.kind, Workload::Kind::Sweep);
  EXPECT_EQ(w.iterations, 20);
  EXPECT_EQ(w.warmup, 5);
  EXPECT_EQ(w.begin, 32u << 20);
  ASSERT_EQ(w.sweep_collectives.size(), 1u);
  EXPECT_EQ(w.sweep_collectives[0]->name, "all_reduce");
  EXPECT_EQ(w.backends, std::vector<std::string>{"auto"});
  EXPECT_NE(w.resolved_toml.find("iterations = 20"), std::string::npos);
}

TEST(Workload, SweepSizesAndUnits) {
  Workload w = parse_workload("[sizes]\nbegin = '8'\nend = '1K'\nfactor = 2\n", "s.toml", {});
  std::vector<uint64_t> want = {8, 16, 32, 64, 128, 256, 512, 1024};
  EXPECT_EQ(w.sizes(), want);
  EXPECT_EQ(parse_bytes("1GiB", "k"), 1ull << 30);
  EXPECT_EQ(parse_bytes("64K", "k"), 64ull << 10);
  EXPECT_EQ(parse_bytes("3MB", "k"), 3ull << 20);
  EXPECT_THROW(parse_bytes("12Q", "k"), WorkloadError);
  EXPECT_THROW(parse_bytes("M", "k"), WorkloadError);
}

// nccl-tests' -i: sizes grow by a step in bytes; a step with an explicit factor other than 1 is refused.
TEST(Workload, SweepByStep) {
  Workload w = parse_workload("", "s.toml", {{"b", "1K"}, {"e", "4K"}, {"i", "1K"}});
  EXPECT_EQ(w.sizes(), (std::vector<uint64_t>{1024, 2048, 3072, 4096}));
  EXPECT_EQ(w.factor, 1.0);
  w = parse_workload("", "s.toml", {{"b", "10"}, {"e", "35"}, {"stepbytes", "10"}, {"f", "1"}});
  EXPECT_EQ(w.sizes(), (std::vector<uint64_t>{10, 20, 30}));
}

// Sweeps that cannot run are refused at once, naming the setting (a sweep from 0 bytes used to loop forever).
TEST(Workload, DegenerateSweepsAreRefused) {
  auto has = [](const std::string& msg, const char* part) { return msg.find(part) != std::string::npos; };
  EXPECT_TRUE(has(error_of("", {{"b", "0"}}), "'sizes.begin': must be at least 1 byte")) << error_of("", {{"b", "0"}});
  EXPECT_TRUE(has(error_of("", {{"b", "1M"}, {"e", "1K"}}), "'sizes.begin': 1048576 is larger than sizes.end"));
  EXPECT_TRUE(has(error_of("", {{"b", "8"}, {"e", "1M"}, {"f", "1"}}), "'sizes.factor': 1 never grows"));
  EXPECT_TRUE(has(error_of("[sizes]\nfactor = 3\n", {{"i", "8"}}), "'sizes.step': cannot be combined"));
  EXPECT_TRUE(has(error_of("", {{"b", "1"}, {"e", "1G"}, {"i", "1"}}), "'sizes.step': gives 1073741824 sizes"));
  EXPECT_TRUE(has(error_of("", {{"b", "1"}, {"e", "1T"}, {"f", "1.00001"}}), "'sizes.factor': gives"));
  EXPECT_TRUE(has(error_of("", {{"n", "-1"}}), "'run.iterations': -1 is less than 1"));
  EXPECT_TRUE(has(error_of("", {{"e", "-8"}}), "'sizes.end': '-8' is not a size in bytes"));
  EXPECT_EQ(error_of("", {{"b", "8"}, {"e", "8"}, {"f", "1"}}), "");  // one size: no growth needed
  Workload w;
  w.begin = 0, w.end = 8, w.factor = 2;
  EXPECT_TRUE(w.sizes().empty());  // never loops, even unvalidated
}

TEST(Workload, OverridesWinOverTheFileAndAliasesWork) {
  std::string text = "[run]\niterations = 7\nbackend = 'host'\n[data]\ndtype = 'float32'\n";
  Workload w = parse_workload(text, "o.toml",
                              {{"run.iterations", "3"},
                               {"dtype", "bf16"},
                               {"b", "1K"},
                               {"e", "4K"},
                               {"backend", "host,host-blocking"},
                               {"run.check", "false"},
                               {"sync.probability", "0.5"}});
  EXPECT_EQ(w.iterations, 3);
  EXPECT_EQ(w.dtype, DataType::Bfloat16);
  EXPECT_EQ(w.begin, 1024u);
  EXPECT_EQ(w.end, 4096u);
  EXPECT_EQ(w.backends, (std::vector<std::string>{"host", "host-blocking"}));
  EXPECT_FALSE(w.check);
  EXPECT_DOUBLE_EQ(w.sync_probability, 0.5);
  // The resolved configuration shows the overridden values.
  EXPECT_NE(w.resolved_toml.find("iterations = 3"), std::string::npos);
  EXPECT_NE(w.resolved_toml.find("'bf16'"), std::string::npos);
}

TEST(Workload, StepEntriesAndRepeat) {
  std::string text = R"(
[layout]
tp = 2
[[step]]
coll = "all_reduce"
group = "dp"
bytes = "1M"
repeat = 3
label = "bucket"
[[step]]
coll = "broadcast"
group = "tp"
bytes = 4096
root = 1
priority = 2
)";
  Workload w = parse_workload(text, "step.toml", {});
  EXPECT_EQ(w.kind, Workload::Kind::Step);
  ASSERT_EQ(w.step.size(), 4u);
  EXPECT_EQ(w.step[0].group, GroupKind::Dp);
  EXPECT_EQ(w.step[2].bytes, 1u << 20);
  EXPECT_EQ(w.step[2].label, "bucket");
  EXPECT_EQ(w.step[3].coll->kind, CollKind::Broadcast);
  EXPECT_EQ(w.step[3].root, 1);
  EXPECT_EQ(w.step[3].priority, 2);
  EXPECT_EQ(w.tp, 2);
}

TEST(Workload, MixIsInferredFromItsSection) {
  Workload w = parse_workload("[mix]\ncount = 5\ncollectives = { all_reduce = 2, all_gather = 1 }\n"
                              "groups = ['tp', 'dp', 'world']\n",
                              "mix.toml", {});
  EXPECT_EQ(w.kind, Workload::Kind::Mix);
  EXPECT_EQ(w.mix_count, 5);
  ASSERT_EQ(w.mix_weights.size(), 2u);
  EXPECT_EQ(w.mix_groups.size(), 3u);
  Workload o = parse_workload("[mix]\ncount = 5\n", "mix.toml", {{"mix.collectives", "reduce=1,broadcast=3"}});
  ASSERT_EQ(o.mix_weights.size(), 2u);
  for (const auto& [c, weight] : o.mix_weights)
    EXPECT_DOUBLE_EQ(weight, c->kind == CollKind::Broadcast ? 3.0 : 1.0) << c->name;
}

// nccl-graph captures its timed iterations into CUDA graphs: a synchronization, an allocation or a nonblocking
// communicator's call cannot be captured, so a workload that asks for one with it is refused, naming the key.
TEST(Workload, NcclGraphRefusesWhatAGraphCannotCapture) {
  const Overrides graph = {{"backend", "dfccl,nccl-graph"}};
  EXPECT_EQ(parse_workload("", "g.toml", graph).backends, (std::vector<std::string>{"dfccl", "nccl-graph"}));
  EXPECT_NO_THROW(parse_workload("[compute]\nduration_us = 5.0\n", "g.toml", graph));  // a kernel: captured
  for (const char* key : {"sync.probability", "host_alloc.probability", "implicit.cuda_free_probability",
                          "implicit.lazy_kernel_probability"}) {
    const std::string e = error_of("", {{"backend", "dfccl,nccl-graph"}, {key, "0.1"}});
    EXPECT_NE(e.find(key), std::string::npos) << e;
    EXPECT_NE(e.find("nccl-graph"), std::string::npos) << e;
    EXPECT_NO_THROW(parse_workload("", "g.toml", {{"backend", "dfccl,nccl"}, {key, "0.1"}})) << key;  // plain nccl
  }
  EXPECT_NE(error_of("", {{"backend", "nccl-graph"}, {"run.nccl_comms", "nonblocking"}}).find("run.nccl_comms"),
            std::string::npos);
}

// run.graph_replays (nccl-tests -G): the graph backends' launches per span; refused where neither graph backend runs.
TEST(Workload, GraphReplaysNeedAGraphBackend) {
  EXPECT_EQ(parse_workload("", "g.toml", {}).graph_replays, 1);
  EXPECT_EQ(parse_workload("", "g.toml", {{"backend", "dfccl-graph"}, {"run.graph_replays", "20"}}).graph_replays, 20);
  EXPECT_EQ(parse_workload("", "g.toml", {{"backend", "nccl,nccl-graph"}, {"graph_replays", "3"}}).graph_replays, 3);
  const std::string e = error_of("", {{"backend", "dfccl,nccl"}, {"run.graph_replays", "4"}});
  EXPECT_NE(e.find("run.graph_replays"), std::string::npos) << e;
  EXPECT_NE(e.find("neither"), std::string::npos) << e;
  EXPECT_NE(error_of("", {{"run.graph_replays", "0"}}).find("run.graph_replays"), std::string::npos);
}

// dfccl-graph captures its waits too: stream completion and order only, what a graph cannot capture refused as for
// nccl-graph; transfers and all-to-alls are captured as the collectives are.
TEST(Workload, DfcclGraphRefusesWhatItCannotCapture) {
  EXPECT_NO_THROW(parse_workload("", "g.toml", {{"backend", "dfccl-graph,nccl-graph"}}));
  for (const auto& [key, value] : {std::pair{"run.completion", "host"}, std::pair{"sync.probability", "0.1"}}) {
    const std::string e = error_of("", {{"backend", "dfccl-graph"}, {key, value}});
    EXPECT_NE(e.find(key), std::string::npos) << e;
    EXPECT_NE(e.find("dfccl-graph"), std::string::npos) << e;
  }
  EXPECT_NO_THROW(
      parse_workload("", "g.toml", {{"backend", "dfccl-graph"}, {"collectives", "all_reduce,sendrecv,all_to_all"}}));
}

TEST(Workload, ErrorsNameTheKey) {
  EXPECT_NE(error_of("[run]\niteratons = 3\n").find("run.iteratons"), std::string::npos);
  EXPECT_NE(error_of("[runn]\nx = 1\n").find("'runn'"), std::string::npos);
  EXPECT_NE(error_of("[run]\niterations = 'many'\n").find("run.iterations"), std::string::npos);
  EXPECT_NE(error_of("[run]\niterations = 0\n").find("run.iterations"), std::string::npos);
  EXPECT_NE(error_of("[data]\ndtype = 'float17'\n").find("data.dtype"), std::string::npos);
  EXPECT_NE(error_of("[data]\nop = 'xor'\n").find("data.op"), std::string::npos);
  EXPECT_NE(error_of("[sync]\nprobability = 1.5\n").find("sync.probability"), std::string::npos);
  EXPECT_NE(error_of("[sync]\nplacement = 'sometimes'\n").find("sync.placement"), std::string::npos);
  EXPECT_NE(error_of("[sizes]\nbegin = '2M'\nend = '1M'\n").find("sizes.begin"), std::string::npos);
  EXPECT_NE(error_of("[sweep]\ncollectives = ['all_reduce', 'all_to_al']\n").find("sweep.collectives"),
            std::string::npos);
  EXPECT_NE(error_of("[run]\nbackend = 'mpi'\n").find("run.backend"), std::string::npos);
  EXPECT_NE(error_of("[run]\nnccl_comms = 'sometimes'\n").find("run.nccl_comms"), std::string::npos);
  EXPECT_NE(error_of("", {{"nccl_comms", "fast"}}).find("run.nccl_comms"), std::string::npos);
  EXPECT_NE(error_of("[[step]]\ncoll = 'all_reduce'\n").find("step[0].bytes"), std::string::npos);
  EXPECT_NE(error_of("[[step]]\ncoll = 'all_reduce'\nbytes = 8\ngroupp = 'tp'\n").find("step[0].groupp"),
            std::string::npos);
  EXPECT_NE(error_of("[[step]]\ncoll = 'all_reduce'\nbytes = 8\ngroup = 'ep'\n").find("step[0].group"),
            std::string::npos);
  EXPECT_NE(error_of("[run\n").find("test.toml:1"), std::string::npos);  // TOML syntax: file and line
  // Overrides
  EXPECT_NE(error_of("", {{"run.trails", "3"}}).find("run.trails"), std::string::npos);
  EXPECT_NE(error_of("", {{"iters", "x"}}).find("run.iterations"), std::string::npos);
  EXPECT_NE(error_of("", {{"check", "maybe"}}).find("run.check"), std::string::npos);
  EXPECT_NE(error_of("", {{"timeout", "-1"}}).find("run.timeout"), std::string::npos);
  EXPECT_NE(error_of("", {{"end", "12Q"}}).find("sizes.end"), std::string::npos);
  EXPECT_NE(error_of("", {{"step.bytes", "8"}}).find("step.bytes"), std::string::npos);
  EXPECT_NE(error_of("", {{"kind", "step"}}).find("kind"), std::string::npos);
  EXPECT_NE(error_of("", {{"completion", "poll"}}).find("'run.completion': 'poll' is not stream, host or callback"),
            std::string::npos);
  EXPECT_EQ(parse_workload("", "t.toml", {{"completion", "callback"}}).completion, Completion::Callback);
}

TEST(Workload, TimingModeAndBatch) {
  Workload def = parse_workload("", "t.toml", {});
  EXPECT_EQ(def.timing, TimingMode::Iteration);
  EXPECT_EQ(def.batch, 10);
  Workload file = parse_workload("[run]\ntiming = 'batch'\nbatch = 4\n", "t.toml", {});
  EXPECT_EQ(file.timing, TimingMode::Batch);
  EXPECT_EQ(file.batch, 4);
  Workload cli = parse_workload("[run]\nbatch = 4\n", "t.toml", {{"timing", "batch"}, {"batch", "5"}});
  EXPECT_EQ(cli.timing, TimingMode::Batch);
  EXPECT_EQ(cli.batch, 5);
  // Stored with the run (the HDF5 root attribute `config`).
  EXPECT_NE(cli.resolved_toml.find("timing = 'batch'"), std::string::npos) << cli.resolved_toml;
  EXPECT_NE(cli.resolved_toml.find("batch = 5"), std::string::npos) << cli.resolved_toml;
  EXPECT_EQ(parse_workload(cli.resolved_toml, "again.toml", {}).batch, 5);

  // Bad values name the argument.
  EXPECT_NE(error_of("", {{"timing", "foo"}}).find("'run.timing': 'foo' is not iteration or batch"), std::string::npos)
      << error_of("", {{"timing", "foo"}});
  EXPECT_NE(error_of("", {{"batch", "0"}}).find("'run.batch': 0 is less than 1"), std::string::npos);
  EXPECT_NE(error_of("", {{"batch", "-3"}}).find("'run.batch': -3 is less than 1"), std::string::npos);
  EXPECT_NE(error_of("", {{"batch", "x"}}).find("'run.batch': 'x' is not an integer"), std::string::npos)
      << error_of("", {{"batch", "x"}});
  EXPECT_NE(error_of("", {{"run.batch", "2.5"}}).find("run.batch"), std::string::npos);
  EXPECT_NE(error_of("[run]\ntiming = 'batches'\n").find("run.timing"), std::string::npos);
  EXPECT_NE(error_of("[run]\nbatch = 0\n").find("run.batch"), std::string::npos);
  EXPECT_NE(error_of("[run]\nbatch = '10'\n").find("run.batch"), std::string::npos);
}

TEST(Workload, ShippedWorkloadsParse) {
  std::filesystem::path dir = std::filesystem::path(DFCCL_SOURCE_DIR) / "workloads";
  int n = 0;
  for (const char* name :
       {"sweep", "stress", "resnet50-dp", "gpt2-3d", "replay-ring4", "replay-megatron8", "burst", "fault"}) {
    auto path = dir / (std::string(name) + ".toml");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    Workload w = load_workload(path.string(), {});
    EXPECT_EQ(w.name, name);
    EXPECT_FALSE(w.description.empty()) << name;
    EXPECT_FALSE(w.source.empty()) << name << ": every shipped workload says where its sizes come from";
    ++n;
  }
  EXPECT_EQ(n, 8);
}

// A [fault] table makes a fault workload (harness/fault/fault.h), which runs on the backends that shrink only.
TEST(Workload, FaultKind) {
  Workload w = parse_workload("[fault]\nkill_max_ms = 50\n[run]\nbackend = ['host']\n", "f.toml", {});
  EXPECT_EQ(w.kind, Workload::Kind::Fault);
  EXPECT_EQ(name_of(w.kind, Workload::kKindNames), "fault");
  EXPECT_EQ(w.fault_kill_max_ms, 50);
  EXPECT_EQ(w.fault_after, 50);
  EXPECT_EQ(w.fault_inflight, 4);
  EXPECT_NE(error_of("[fault]\n[run]\nbackend = ['host-blocking']\n").find("run.backend"), std::string::npos);
  EXPECT_NE(error_of("[fault]\ninflight = 0\n[run]\nbackend = ['host']\n").find("fault.inflight"), std::string::npos);
}

TEST(Workload, SettingsAreDescribed) {
  std::string d = describe_settings();
  for (const char* key :
       {"run.iterations", "sizes.begin", "order.probability", "host_alloc.kinds", "implicit.lazy_kernel_probability",
        "compute.duration_us", "run.timeout", "run.timing", "run.batch", "--timing=run.timing", "--batch=run.batch"})
    EXPECT_NE(d.find(key), std::string::npos) << key;
}

// The settings table is the one home of each key's facts: every default is valid, and the help text of an
// enum-valued setting names each of its choices.
TEST(Workload, SettingsTableIsConsistent) {
  for (const Setting& s : settings()) {
    for (const char* choice : s.valid.choices)
      EXPECT_NE(std::string(s.help).find(choice), std::string::npos) << s.key << ": help does not name " << choice;
    EXPECT_NE(find_setting(s.key), nullptr) << s.key;
  }
  for (const auto& [alias, key] : setting_aliases()) EXPECT_NE(find_setting(key), nullptr) << alias;
  EXPECT_NO_THROW(parse_workload("", "defaults.toml", {}));
}

// Enum-valued settings parse to their enums by the position of the name among the table's choices.
TEST(Workload, EnumSettingsParseFromTheirChoices) {
  Workload w = parse_workload("", "e.toml",
                              {{"completion", "host"},
                               {"order", "host"},
                               {"streams", "per_group"},
                               {"nccl_comms", "nonblocking"},
                               {"timing", "batch"},
                               {"sync.placement", "before_wait"},
                               {"host_alloc.kinds", "host_register,malloc_host"},
                               {"kind", "sweep"}});
  EXPECT_EQ(w.completion, Completion::Host);
  EXPECT_EQ(w.order, SubmitOrder::Host);
  EXPECT_EQ(w.streams, Streams::PerGroup);
  EXPECT_EQ(w.nccl_comms, NcclComms::Nonblocking);
  EXPECT_EQ(w.timing, TimingMode::Batch);
  EXPECT_EQ(w.sync_placement, SyncPlacement::BeforeWait);
  EXPECT_EQ(w.host_alloc_kinds, (std::vector<HostAllocKind>{HostAllocKind::HostRegister, HostAllocKind::MallocHost}));
  EXPECT_EQ(w.kind, Workload::Kind::Sweep);
  Workload d = parse_workload("", "d.toml", {});
  EXPECT_EQ(d.completion, Completion::Stream);
  EXPECT_EQ(d.order, SubmitOrder::Stream);
  EXPECT_EQ(d.streams, Streams::Single);
  EXPECT_EQ(d.nccl_comms, NcclComms::Auto);
  EXPECT_EQ(d.sync_placement, SyncPlacement::Between);
  EXPECT_EQ(d.host_alloc_kinds.size(), 3u);
  EXPECT_EQ(name_of(NcclComms::Nonblocking, kNcclCommsNames), "nonblocking");
  EXPECT_EQ(name_of(Workload::Kind::Replay, Workload::kKindNames), "replay");
}

// The messages of each kind of check, word for word.
TEST(Workload, ValidationMessages) {
  const std::pair<Overrides, const char*> cases[] = {
      {{{"iters", "0"}}, "test.toml: 'run.iterations': 0 is less than 1"},
      {{{"seed", "-1"}}, "test.toml: 'run.seed': must not be negative"},
      {{{"timeout", "0"}}, "test.toml: 'run.timeout': must be positive"},
      {{{"factor", "0.5"}}, "test.toml: 'sizes.factor': must be at least 1"},
      {{{"sync.probability", "2"}}, "test.toml: 'sync.probability': 2 is not a probability in [0, 1]"},
      {{{"compute.duration_us", "-1"}}, "test.toml: 'compute.duration_us': must not be negative"},
      {{{"streams", "two"}}, "test.toml: 'run.streams': 'two' is not single or per_group"},
      {{{"host_alloc.kinds", "malloc"}},
       "test.toml: 'host_alloc.kinds': 'malloc' is not malloc_host, free_host or host_register"},
      {{{"kind", "grid"}}, "test.toml: 'kind': 'grid' is not sweep, mix, step, replay or fault"},
      {{{"backend", "mpi"}},
       "test.toml: 'run.backend': unknown backend 'mpi' (dfccl, dfccl-blocking, dfccl-graph, nccl, nccl-graph, host, "
       "host-blocking, auto)"},
      {{{"collectives", "gather"}},
       "test.toml: 'sweep.collectives': unknown collective 'gather' (all_reduce, all_gather, reduce_scatter, "
       "broadcast, reduce, sendrecv, all_to_all, p2p)"},
      {{{"collectives", "all_to_all"}, {"in_place", "only"}},
       "test.toml: 'run.in_place': is 'only', but all_to_all has no in-place variant (it runs out of place only)"},
      {{{"pipeline.micro_batches", "4"}}, "test.toml: 'layout.pp': is 1: a [pipeline] needs at least 2 stages"},
      {{{"pipeline.micro_batches", "4"}, {"pp", "2"}, {"pipeline.activation_bytes", "2"}},
       "test.toml: 'pipeline.activation_bytes': 2 bytes is less than one float32 element"},
      {{{"kind", "replay"}, {"sim.layout", "megatron:2x1x1"}, {"sim.coll", "p2p"}},
       "test.toml: 'sim.coll': p2p is a transfer between two ranks, not a collective of the group"},
      {{{"sweep.group", "ep"}}, "test.toml: 'sweep.group': unknown group 'ep' (world, tp, dp, pp)"},
      {{{"dtype", "float17"}}, "test.toml: 'data.dtype': unknown data type 'float17'"},
      {{{"op", "xor"}}, "test.toml: 'data.op': unknown reduction operator 'xor'"},
      {{{"mix.collectives", "all_reduce=-1"}}, "test.toml: 'mix.collectives.all_reduce': weight must not be negative"},
  };
  for (const auto& [overrides, message] : cases) EXPECT_EQ(error_of("", overrides), message);
}

// What main refuses before the run (exit 2): a folder as --workload, a backend given twice, a malformed --expect, and
// a sweep whose largest case cannot fit in a host's memory, naming the sizes.
TEST(Workload, ProblemsFoundBeforeTheRun) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  try {
    load_workload(dir, {});
    ADD_FAILURE() << "a folder was read as a workload";
  } catch (const WorkloadError& e) {
    EXPECT_NE(std::string(e.what()).find("is a folder, not a workload file"), std::string::npos) << e.what();
  }
  EXPECT_NE(error_of("", {{"backend", "host,host"}}).find("'run.backend': host is given twice"), std::string::npos);
  EXPECT_EQ(error_of("", {{"backend", "host,host-blocking"}}), "");

  const std::vector<std::string> backends = {"host"};
  EXPECT_EQ(expectation_problem("wrong==0", backends), "");
  EXPECT_EQ(expectation_problem("host:all_reduce:busbw_mean>=1.5", backends), "");
  EXPECT_NE(expectation_problem("bogus", backends).find("--expect 'bogus': no comparison"), std::string::npos);
  EXPECT_NE(expectation_problem("wrongs==0", backends).find("unknown counter 'wrongs'"), std::string::npos);
  EXPECT_NE(expectation_problem("wrong==x", backends).find("not an integer"), std::string::npos);
  EXPECT_NE(expectation_problem("busbw_mean>fast", backends).find("not a number"), std::string::npos);
  EXPECT_NE(expectation_problem("nccl:wrong==0", backends).find("no backend nccl in this run"), std::string::npos);

  // all_reduce of 1 MiB out of place: 1 MiB in, 1 MiB out per rank; all_gather: 1 MiB / 4 in, 1 MiB out.
  EXPECT_EQ(case_host_bytes(kAllReduce, 1 << 20, 4, DataType::Float32, InPlace::Both), 2u << 20);
  EXPECT_EQ(case_host_bytes(kAllReduce, 1 << 20, 4, DataType::Float32, InPlace::Only), 1u << 20);
  EXPECT_EQ(case_host_bytes(kAllGather, 1 << 20, 4, DataType::Float32, InPlace::Both), (1u << 20) + (1u << 18));
  const Workload w = parse_workload("", "t.toml", {{"b", "1G"}, {"e", "1G"}});
  EXPECT_EQ(sweep_memory_problem(w, 2, 2, uint64_t(4) << 30), "");  // 2 ranks x 2 GiB fit in 4 GiB
  const std::string problem = sweep_memory_problem(w, 2, 2, (uint64_t(4) << 30) - 1);
  EXPECT_NE(problem.find("'sizes.end': the sweep's largest case, all_reduce of 1 GiB in groups of 2, needs at least "
                         "2 GiB of host memory per rank"),
            std::string::npos)
      << problem;
  EXPECT_NE(problem.find("4 GiB for the 2 ranks on this host"), std::string::npos) << problem;
}
