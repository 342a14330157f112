// dfccl-sim: deadlock rates of random collective-invocation scenarios under four execution models.
// Usage: docs/simulator.md; `dfccl-sim --help`.
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include "output.h"
#include "plan.h"
#include "runner.h"
#include "scenario.h"
#include "sim_build_info.h"

using namespace dfccl::sim;

namespace {

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

void print_programs(const Scenario& s, uint64_t trial) {
  std::vector<Step> prog;
  for (int r = 0; r < s.num_ranks(); ++r) {
    s.program(r, trial, prog);
    std::string line = fmt::format("rank {:>4}:", r);
    for (Step x : prog) line += x == kSync ? std::string(" sync") : " " + s.collective_name(x);
    fmt::print("{}\n", line);
  }
}

// The plan to run: the file's (--plan), where the options given on the command line win, else one block made of
// the command line's options; --trials overrides every block's.
Plan resolve_plan(const CLI::App& app, const std::string& plan_file, const Plan& given, const SweepBlock& cli,
                  int64_t trials_override) {
  Plan plan = given;
  if (!plan_file.empty()) {
    plan = Plan::from_toml_file(plan_file);
    if (app.count("--seed")) plan.seed = given.seed;
    if (app.count("--first-trial")) plan.first_trial = given.first_trial;
    if (app.count("--threads")) plan.threads = given.threads;
    if (given.per_trial) plan.per_trial = true;
    if (given.verify_cycles) plan.verify_cycles = true;
  } else {
    plan.blocks.push_back(cli);
  }
  if (trials_override > 0)
    for (auto& b : plan.blocks) b.trials = trials_override;
  return plan;
}

dfccl::h5::RunIdentity run_identity(int argc, char** argv, const Plan& plan) {
  dfccl::h5::RunIdentity meta;
  meta.dfccl_version = DFCCL_SIM_VERSION;
  meta.git_revision = DFCCL_SIM_GIT_REVISION;
  meta.date_utc = utc_now();
  meta.hostname = host_name();
  for (int i = 0; i < argc; ++i) meta.command_line += (i ? " " : "") + shell_quote(argv[i]);
  meta.config = plan.to_toml();
  return meta;
}

struct Totals {
  int64_t submissions = 0, collectives = 0;
  double seconds = 0;
};

// Runs settings [i, j), which share a scenario (layout, colls, p_disorder, p_sync): their models on the same
// generated programs. Prints one table line per setting and returns its row (per-trial results only if per_trial).
std::vector<Row> run_batch(const std::vector<Setting>& settings, size_t i, size_t j, const Plan& plan, int cycle_hops,
                           bool quiet, Totals& totals) {
  const auto& s0 = settings[i];
  const Scenario sc(Layout::parse(s0.layout, s0.colls), ScenarioParams{s0.p_disorder, s0.p_sync, plan.seed});
  std::vector<ModelSpec> models;
  for (size_t k = i; k < j; ++k) models.push_back(settings[k].model);
  RunOptions opt;
  opt.trials = s0.trials;
  opt.first_trial = plan.first_trial;
  opt.threads = plan.threads;
  opt.verify_cycles = plan.verify_cycles;
  opt.cycle_hops = cycle_hops > 0 ? static_cast<size_t>(cycle_hops) : SIZE_MAX;
  if (!quiet)
    opt.progress = [&, i, j](int64_t done, int64_t dl) {
      fmt::print(stderr, "  [settings {}-{} of {}] {}/{} trials, {} deadlocks\n", i + 1, j, settings.size(), done,
                 s0.trials, dl);
    };
  auto results = run_models(sc, models, opt);
  totals.submissions += sc.num_submissions() * s0.trials * static_cast<int64_t>(models.size());
  totals.collectives += sc.num_collectives() * s0.trials * static_cast<int64_t>(models.size());
  totals.seconds += results.front().seconds;
  std::vector<Row> rows;
  for (size_t k = i; k < j; ++k) {
    Row row;
    row.setting = settings[k];
    row.layout_spec = sc.layout().spec;
    row.ranks = sc.num_ranks();
    row.groups = sc.num_groups();
    row.collectives = sc.num_collectives();
    row.submissions = sc.num_submissions();
    row.seed = plan.seed;
    row.first_trial = plan.first_trial;
    row.batch = static_cast<int64_t>(i);
    row.result = std::move(results[k - i]);
    fmt::print("{}\n", table_row(row));
    if (!quiet && row.result.deadlocks > 0)
      fmt::print("   first deadlock: trial {}, cycle of {}\n", row.result.first_deadlock_trial, row.result.first_cycle);
    if (!plan.per_trial) {
      row.result.deadlocked = {};
      row.result.completed = {};
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dfccl-sim: deadlock rates of random collective-invocation scenarios (docs/simulator.md)"};
  Plan plan;
  SweepBlock cli;
  std::string plan_file, out_file;
  int64_t trials_override = 0;
  int cycle_hops = 12;
  bool quiet = false;
  int64_t show_trial = -1;

  app.add_option("--plan", plan_file, "TOML plan file with [[sweep]] blocks (replaces the block options below)")
      ->check(CLI::ExistingFile);
  app.add_option("--out,-o", out_file, "HDF5 results file (docs/hdf5-layout.md, section dfccl-sim)");
  app.add_option("--seed", plan.seed, "Base seed; trial t of every setting uses the streams of (seed, t, rank)");
  app.add_option("--first-trial", plan.first_trial, "Index of the first trial");
  app.add_option("--threads,-j", plan.threads, "Worker threads (0: hardware concurrency); results do not depend on it");
  app.add_flag("--per-trial", plan.per_trial, "Also write one row per trial (/sim/trials)");
  app.add_flag("--verify-cycles", plan.verify_cycles, "Search a wait-for cycle in every deadlocked trial (slower)");
  app.add_option("--cycle-hops", cycle_hops, "Hops of the first deadlock cycle printed and stored (0: all)");
  app.add_flag("--quiet,-q", quiet, "Only the table");
  app.add_option("--show-programs", show_trial,
                 "Print every rank's program of this trial for the first setting, then exit");

  app.add_option("--models,-m", cli.models, "Models: a|queue b|stream c|stream-limit d|dfccl")->delimiter(',');
  app.add_option("--limits,-R", cli.limits, "Resident-collective limits R for model c")->delimiter(',');
  app.add_option("--layout,-l", cli.layouts,
                 "Layouts (repeatable): megatron:TPxDPxPP[:tp=A,dp=B,pp=C], random:NxKxM[@S], groups:0,1;1,2;...");
  app.add_option("--colls,-c", cli.colls, "Collectives per group")->delimiter(',');
  app.add_option("--disorder,-d", cli.disorder, "Disorder probabilities")->delimiter(',');
  app.add_option("--sync,-s", cli.sync, "Sync probabilities")->delimiter(',');
  app.add_flag("--zip", cli.zip, "Pair disorder[i] with sync[i] instead of all combinations");
  app.add_option("--trials,--rounds,-t", trials_override, "Trials per setting (default 1000; overrides the plan's)");

  CLI11_PARSE(app, argc, argv);

  try {
    const Plan given = plan;
    plan = resolve_plan(app, plan_file, given, cli, trials_override);
    const auto settings = expand(plan);
    const int threads = plan.threads > 0 ? plan.threads : static_cast<int>(std::thread::hardware_concurrency());
    const dfccl::h5::RunIdentity meta = run_identity(argc, argv, plan);

    if (show_trial >= 0) {
      const auto& s = settings.front();
      Scenario sc(Layout::parse(s.layout, s.colls), {s.p_disorder, s.p_sync, plan.seed});
      print_programs(sc, static_cast<uint64_t>(show_trial));
      return 0;
    }

    if (!quiet)
      fmt::print("dfccl-sim {} ({}): {} settings, seed {}, {} threads\n", meta.dfccl_version, meta.git_revision,
                 settings.size(), plan.seed, threads);
    fmt::print("{}\n", table_header());
    std::fflush(stdout);

    std::vector<Row> rows;
    Totals totals;
    // Settings that share a scenario (layout, colls, p_disorder, p_sync) are adjacent; each such batch runs its models
    // on the same generated programs.
    auto scenario_key = [](const Setting& s) {
      return fmt::format("{}|{}|{}|{}|{}", s.layout, s.colls, s.p_disorder, s.p_sync, s.trials);
    };
    for (size_t i = 0; i < settings.size();) {
      size_t j = i + 1;
      while (j < settings.size() && scenario_key(settings[j]) == scenario_key(settings[i])) ++j;
      for (auto& row : run_batch(settings, i, j, plan, cycle_hops, quiet, totals)) rows.push_back(std::move(row));
      std::fflush(stdout);
      i = j;
    }
    if (!quiet)
      fmt::print(
          "total: {} collectives ({} submissions) simulated in {:.2f} s: {:.3g} collectives/s, {:.3g} submissions/s "
          "({} threads; each trial's programs generated once and run under every model of its batch)\n",
          totals.collectives, totals.submissions, totals.seconds,
          totals.seconds > 0 ? static_cast<double>(totals.collectives) / totals.seconds : 0.0,
          totals.seconds > 0 ? static_cast<double>(totals.submissions) / totals.seconds : 0.0, threads);
    if (!out_file.empty()) {
      write_hdf5(out_file, meta, rows, plan.per_trial);
      if (!quiet) fmt::print("wrote {}\n", out_file);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "dfccl-sim: {}\n", e.what());
    return 1;
  }
  return 0;
}
