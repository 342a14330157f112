// Workload files: parsing, defaults, command-line overrides, and errors that name the bad key.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/workload.h"
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

TEST(Workload, OverridesWinOverTheFileAndAliasesWork) {
  std::string text = "[run]\niterations = 7\nbackend = 'host'\n[data]\ndtype = 'float32'\n";
  Workload w = parse_workload(text, "o.toml",
                              {{"run.iterations", "3"}, {"dtype", "bf16"}, {"b", "1K"}, {"e", "4K"},
                               {"backend", "host,host-blocking"}, {"run.check", "false"}, {"sync.probability", "0.5"}});
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
  EXPECT_NE(error_of("[sweep]\ncollectives = ['all_reduce', 'alltoall']\n").find("sweep.collectives"),
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
  EXPECT_EQ(parse_workload("", "t.toml", {{"completion", "callback"}}).completion, "callback");
}

TEST(Workload, TimingModeAndBatch) {
  Workload def = parse_workload("", "t.toml", {});
  EXPECT_EQ(def.timing, "iteration");
  EXPECT_EQ(def.batch, 10);
  Workload file = parse_workload("[run]\ntiming = 'batch'\nbatch = 4\n", "t.toml", {});
  EXPECT_EQ(file.timing, "batch");
  EXPECT_EQ(file.batch, 4);
  Workload cli = parse_workload("[run]\nbatch = 4\n", "t.toml", {{"timing", "batch"}, {"batch", "5"}});
  EXPECT_EQ(cli.timing, "batch");
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
  for (const char* name : {"sweep", "stress", "resnet50-dp", "gpt2-3d", "replay-ring4", "replay-megatron8", "burst"}) {
    auto path = dir / (std::string(name) + ".toml");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    Workload w = load_workload(path.string(), {});
    EXPECT_EQ(w.name, name);
    EXPECT_FALSE(w.description.empty()) << name;
    EXPECT_FALSE(w.source.empty()) << name << ": every shipped workload says where its sizes come from";
    ++n;
  }
  EXPECT_EQ(n, 7);
}

TEST(Workload, SettingsAreDescribed) {
  std::string d = describe_settings();
  for (const char* key : {"run.iterations", "sizes.begin", "order.probability", "host_alloc.kinds",
                          "implicit.lazy_kernel_probability", "compute.duration_us", "run.timeout", "run.timing",
                          "run.batch", "--timing=run.timing", "--batch=run.batch"})
    EXPECT_NE(d.find(key), std::string::npos) << key;
}
