// The HDF5 file of a run: written through the writer, read back, checked against the documented layout; a file
// with a column missing or of the wrong length is reported.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "h5_table.h"
#include "output/layout_check.h"
#include "output/writer.h"

using namespace dfccl::harness;

namespace {

// replay: a replay workload's file (workload_kind replay); with_replay_info = false leaves /replay out (broken).
// with_hops = false leaves out the host backend's ring hops (broken: it completed a trial).
std::string write_sample(const std::string& name, bool replay = false, bool with_replay_info = true,
                         bool with_hops = true) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  auto w = make_hdf5_writer(path);
  RunInfo run;
  run.dfccl_version = "0.1.0";
  run.git_revision = "abc1234";
  run.date_utc = "2026-11-30T00:00:00Z";
  run.command_line = "dfccl-harness --workload workloads/stress.toml";
  run.config_toml = "name = 'stress'\n";
  run.workload = "stress";
  run.workload_kind = "mix";
  run.hosts = {"a", "b"};
  run.rank_hosts = {"a", "b"};
  run.gpus = {"a: no GPU", "b: no GPU"};
  run.nranks = 2;
  run.layout = "tp=1 dp=2 pp=1";
  run.backends = {"host", "host-blocking"};
  if (replay) {
    run.workload_kind = "replay";
    run.replay.present = with_replay_info;
    run.replay.layout = run.replay.layout_spec = "groups:0,1";
    run.replay.ranks = 2;
    run.replay.groups = 1;
    run.replay.colls = 3;
    run.replay.collectives = 3;
    run.replay.submissions = 6;
    run.replay.p_disorder = 0.5;
    run.replay.seed = 7;
    run.replay.first_trial = 40;
    run.replay.coll = "all_reduce";
    run.replay.bytes = 64;
    run.replay.group_names = {"g0(g:0,1)"};
    run.replay.group_kinds = {"g"};
    run.replay.group_sizes = {2};
    run.replay.group_colls = {3};
  }
  w->begin_run(run);
  for (const char* b : {"host", "host-blocking"}) {
    w->begin_backend(BackendInfo{b, "host", "preemptive", "host", "host clock", true, ""});
    if (with_hops && std::string(b) == "host")
      w->add_hops({HopRow{"world", 0, 1, "network", "a", "b"}, HopRow{"world", 1, 0, "network", "b", "a"}});
    CaseRow row;
    row.coll = "all_reduce";
    row.group = "world";
    row.dtype = "float32";
    row.op = "sum";
    row.nranks = 2;
    row.count = 256;
    row.bytes = 1024;
    row.time_kind = "iteration";
    row.samples = 3;
    row.time_median_us = 10;
    row.algbw_GBs = 0.1024;
    row.busbw_GBs = 0.1024;
    row.times_us = {9, 10, 11};
    w->add_case(row);
    TrialRow t;
    t.status = std::string(b) == "host" ? "completed" : "deadlocked";
    t.detect_s = 1.5;
    if (replay) {
      t.scenario_trial = 40;
      t.program_steps = 7;
      t.program_submissions = 6;
      t.program_syncs = 1;
      t.disordered_ranks = 1;
      t.executed_steps = 5;
    }
    w->add_trial(t);
    BackendSummary s;
    s.backend = b;
    s.workload = "stress";
    s.trials = 1;
    s.completed = t.status == "completed";
    s.deadlocked = 1 - s.completed;
    s.deadlock_rate = static_cast<double>(s.deadlocked);
    w->end_backend(s);
  }
  w->end_run("complete");
  return path;
}

}  // namespace

TEST(HarnessH5, WrittenFileFollowsTheLayoutAndReadsBack) {
  std::string path = write_sample("dfccl_harness_layout_test.h5");
  auto problems = check_layout(path);
  for (const auto& p : problems) ADD_FAILURE() << p;

  auto f = dfccl::h5::File::open_read(path);
  EXPECT_EQ(f.attr_string("/", "tool"), "dfccl-harness");
  EXPECT_EQ(f.attr_string("/", "status"), "complete");
  EXPECT_EQ(f.attr_string("/", "hostname"), "a,b");
  EXPECT_EQ(f.attr_int("/", "nranks"), 2);
  EXPECT_EQ(f.attr_string("/", "layout_version"), "3");
  EXPECT_EQ(f.attr_string("/", "hosts"), "a\nb");
  EXPECT_EQ(f.attr_int("/", "nhosts"), 2);
  EXPECT_EQ(f.read_ints("backends/host/hops", "peer"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(f.read_strings("backends/host/hops", "transport"), (std::vector<std::string>{"network", "network"}));
  EXPECT_EQ(f.read_strings("backends/host/hops", "peer_host"), (std::vector<std::string>{"b", "a"}));
  EXPECT_FALSE(f.has("backends/host-blocking/hops"));  // no completed trial: its hops are not required
  EXPECT_EQ(f.read_strings("summary", "backend"), (std::vector<std::string>{"host", "host-blocking"}));
  EXPECT_EQ(f.read_ints("backends/host/collectives", "bytes"), std::vector<int64_t>{1024});
  EXPECT_EQ(f.read_doubles("backends/host/iterations", "time_us"), (std::vector<double>{9, 10, 11}));
  EXPECT_EQ(f.read_strings("backends/host-blocking/trials", "status"), std::vector<std::string>{"deadlocked"});

  auto counters = read_counters(path);
  EXPECT_EQ(counters["*"].trials, 2);
  EXPECT_EQ(counters["host-blocking"].deadlocked, 1);
  EXPECT_EQ(counters["host"].rows, 1);
  EXPECT_TRUE(check_expectations(
                  counters, {"host:deadlocked==0", "host-blocking:deadlocked>0", "wrong==0", "rows>=2", "trials!=0"})
                  .empty());
  EXPECT_EQ(check_expectations(counters, {"deadlocked==0"}).size(), 1u);
  EXPECT_EQ(check_expectations(counters, {"nccl:deadlocked==0"}).size(), 1u);  // no such backend
  EXPECT_EQ(check_expectations(counters, {"speed>3"}).size(), 1u);             // no such counter
  EXPECT_EQ(check_expectations(counters, {"wrong"}).size(), 1u);               // no comparison
  // The bandwidth gate: busbw_mean over the rows that have a bus bandwidth, per backend or collective.
  const double bw = counters["host"].busbw.at(0).second;
  ASSERT_GT(bw, 0);
  EXPECT_TRUE(check_expectations(counters, {fmt::format("busbw_mean>={}", bw / 2), "all_reduce:busbw_mean>0",
                                            fmt::format("host:all_reduce:busbw_mean<={}", bw * 2)})
                  .empty());
  auto failed = check_expectations(counters, {fmt::format("all_reduce:busbw_mean>={}", bw * 2)});
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].find("does not hold: busbw_mean is"), std::string::npos) << failed[0];
  EXPECT_EQ(check_expectations(counters, {"broadcast:busbw_mean>0"}).size(), 1u);  // no broadcast row
  auto no_row = check_expectations(counters, {"all_to_all:busbw_mean>0"});         // a collective, but no row of it
  ASSERT_EQ(no_row.size(), 1u);
  EXPECT_NE(no_row[0].find("no row of all_to_all"), std::string::npos) << no_row[0];
  EXPECT_EQ(check_expectations(counters, {"busbw_mean>fast"}).size(), 1u);      // not a number
  EXPECT_EQ(check_expectations(counters, {"all_reduce:wrong==0"}).size(), 1u);  // counted per backend
  EXPECT_EQ(check_expectations(counters, {"host:nccl:wrong==0"}).size(), 1u);   // not a collective
  std::filesystem::remove(path);
}

TEST(HarnessH5, ReplayFilesHaveTheScenarioAndOneRowPerTrial) {
  std::string path = write_sample("dfccl_harness_replay_test.h5", true);
  auto problems = check_layout(path);
  for (const auto& p : problems) ADD_FAILURE() << p;
  auto f = dfccl::h5::File::open_read(path);
  EXPECT_EQ(f.attr_string("/", "workload_kind"), "replay");
  EXPECT_EQ(f.attr_string("replay", "layout_spec"), "groups:0,1");
  EXPECT_EQ(f.attr_int("replay", "first_trial"), 40);
  EXPECT_DOUBLE_EQ(f.attr_double("replay", "p_disorder"), 0.5);
  EXPECT_EQ(f.read_strings("replay/groups", "name"), std::vector<std::string>{"g0(g:0,1)"});
  EXPECT_EQ(f.read_ints("backends/host-blocking/replay", "scenario_trial"), std::vector<int64_t>{40});
  EXPECT_EQ(f.read_ints("backends/host-blocking/replay", "deadlocked"), std::vector<int64_t>{1});
  EXPECT_EQ(f.read_ints("backends/host/replay", "deadlocked"), std::vector<int64_t>{0});
  EXPECT_EQ(f.read_ints("backends/host/replay", "executed_steps"), std::vector<int64_t>{5});
  std::filesystem::remove(path);

  // Other workloads have no replay tables; a replay file without /replay is reported.
  std::string plain = write_sample("dfccl_harness_plain_test.h5");
  EXPECT_FALSE(dfccl::h5::File::open_read(plain).has("backends/host/replay"));
  std::filesystem::remove(plain);
  std::string broken = write_sample("dfccl_harness_replay_broken_test.h5", true, false);
  problems = check_layout(broken);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems.front().find("/replay"), std::string::npos) << problems.front();
  std::filesystem::remove(broken);
}

// Layout 3: a dfccl backend that completed a trial without its hops table is reported.
TEST(HarnessH5, MissingHopsAreReported) {
  const std::string path = write_sample("dfccl_harness_no_hops_test.h5", false, true, false);
  const auto problems = check_layout(path);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "missing table /backends/host/hops");
  std::filesystem::remove(path);
}

TEST(HarnessH5, BrokenFilesAreReported) {
  std::string path = write_sample("dfccl_harness_broken_test.h5");
  {
    // Damage it: a column of the wrong length and a missing root attribute.
    auto f = dfccl::h5::File::open_read(path);
  }
  {
    // h5::File has no read-write open: rebuild a damaged copy by hand.
    auto g = dfccl::h5::File::create(path);
    g.set_attr("/", "tool", std::string("dfccl-harness"));
    g.write_column("summary", "backend", std::vector<std::string>{"host"});
    g.write_column("summary", "trials", std::vector<int64_t>{1, 2});
    g.set_attr("/", "nranks", int64_t{3});
    g.set_attr("/", "hosts", std::string("a\nb\na"));
    g.set_attr("/", "nhosts", int64_t{1});
  }
  auto problems = check_layout(path);
  EXPECT_FALSE(problems.empty());
  bool length = false, attr = false, hosts = false;
  for (const auto& p : problems) {
    if (p.find("trials has 2 rows") != std::string::npos) length = true;
    if (p.find("missing root attribute git_revision") != std::string::npos) attr = true;
    if (p == "root attribute nhosts is 1, but hosts names 2 hosts") hosts = true;
  }
  EXPECT_TRUE(length);
  EXPECT_TRUE(attr);
  EXPECT_TRUE(hosts);
  EXPECT_FALSE(check_layout("/nonexistent/file.h5").empty());
  std::filesystem::remove(path);
}

// A checkpoint leaves the file on disk complete while the writer still holds it open (what a kill would leave; read
// from a copy, because HDF5 does not open a file twice in one process): every trial reported so far, the running
// backend's summary row, status running; a second checkpoint appends. Spacing 0 writes every checkpoint (the default
// writes one when due, which a test cannot time).
TEST(HarnessH5, EveryCheckpointLeavesAReadableFile) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string path = (dir / "dfccl_harness_checkpoint_test.h5").string();
  const std::string copy = (dir / "dfccl_harness_checkpoint_copy.h5").string();
  auto w = make_hdf5_writer(path, 0);
  RunInfo run;
  run.workload = "stress";
  run.backends = {"host"};
  run.environment = {EnvEntry{0, "NCCL_DEBUG", "WARN"}, EnvEntry{1, "NCCL_DEBUG", "INFO"}};
  run.nranks = 2;
  run.hosts = {"a"};
  run.rank_hosts = {"a", "a"};
  w->begin_run(run);
  w->begin_backend(BackendInfo{"host", "host", "preemptive", "host", "host clock", true, ""});
  w->add_hops({HopRow{"world", 0, 1, "shared_memory", "a", "a"}, HopRow{"world", 1, 0, "shared_memory", "a", "a"}});
  BackendSummary s;
  s.backend = "host";
  for (int64_t trial = 0; trial < 2; ++trial) {
    TrialRow t;
    t.trial = trial;
    t.status = trial == 0 ? "completed" : "stalled";
    t.ranks = trial == 0 ? "" : "1";
    w->add_trial(t);
    ++(trial == 0 ? s.completed : s.stalled);
    s.trials = trial + 1;
    w->checkpoint(s);

    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    for (const auto& p : check_layout(copy)) ADD_FAILURE() << "after trial " << trial << ": " << p;
    auto f = dfccl::h5::File::open_read(copy);
    EXPECT_EQ(f.attr_string("/", "status"), "running");
    EXPECT_EQ(f.read_ints("backends/host/trials", "trial").size(), static_cast<size_t>(trial + 1));
    auto counters = read_counters(copy);
    EXPECT_EQ(counters["host"].trials, trial + 1);
    EXPECT_EQ(counters["host"].stalled, trial);
  }
  {
    auto f = dfccl::h5::File::open_read(copy);
    EXPECT_EQ(f.read_strings("backends/host/trials", "ranks"), (std::vector<std::string>{"", "1"}));
    EXPECT_EQ(f.read_strings("environment", "value"), (std::vector<std::string>{"WARN", "INFO"}));
    EXPECT_EQ(f.read_ints("environment", "rank"), (std::vector<int64_t>{0, 1}));
  }
  w->end_backend(s);
  w->end_run("interrupted (SIGINT)");
  EXPECT_EQ(read_status(path), "interrupted (SIGINT)");
  std::filesystem::remove(path);
  std::filesystem::remove(copy);
}
