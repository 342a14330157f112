// sim_replay_check: compares, trial by trial, a dfccl-harness replay file (workload kind replay: the harness ran the
// simulator's own scenarios, docs/simulator.md "Validation against the harness") with the simulator's prediction.
//
//   sim_replay_check FILE.h5 --backend host-blocking --model a [--min-trials N] [--min-deadlocks N]
//
// For every row of /backends/<backend>/replay, the scenario of the file's /replay attributes is generated again
// (the same code, common/scenario.h) and run under the model; the harness's status must be `deadlocked` exactly
// when the model deadlocks (a status other than completed/deadlocked is a failure). host-blocking is model (a),
// host (preemptive) model (d), which never deadlocks. Exit 0 when every trial agrees and the counts reach the
// minimums, 1 otherwise, 2 when the file cannot be read.
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <string>

#include "h5_table.h"
#include "model.h"
#include "scenario.h"

using namespace dfccl;

int main(int argc, char** argv) {
  std::string path, backend = "host-blocking", model_name = "a";
  int64_t min_trials = 1, min_deadlocks = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend") backend = value();
    else if (a == "--model") model_name = value();
    else if (a == "--min-trials") min_trials = std::stoll(value());
    else if (a == "--min-deadlocks") min_deadlocks = std::stoll(value());
    else if (path.empty() && !a.starts_with("-")) path = a;
    else {
      fmt::print(stderr, "usage: sim_replay_check FILE.h5 [--backend B] [--model a|b|c|d] [--min-trials N] "
                         "[--min-deadlocks N]\n");
      return 2;
    }
  }
  try {
    auto f = h5::File::open_read(path);
    if (!f.has_attr("/", "workload_kind") || f.attr_string("/", "workload_kind") != "replay" || !f.has("replay")) {
      fmt::print(stderr, "{}: not a replay workload's file (workload_kind replay, /replay)\n", path);
      return 2;
    }
    const std::string layout = f.attr_string("replay", "layout");
    const int colls = static_cast<int>(f.attr_int("replay", "colls"));
    scenario::ScenarioParams params{f.attr_double("replay", "p_disorder"), f.attr_double("replay", "p_sync"),
                                    static_cast<uint64_t>(f.attr_int("replay", "seed"))};
    scenario::Scenario scenario(scenario::Layout::parse(layout, colls), params);
    const sim::ModelSpec model = sim::ModelSpec::parse(model_name, 1);
    const std::string g = "backends/" + backend + "/replay";
    if (!f.has(g)) {
      fmt::print(stderr, "{}: no table /{}\n", path, g);
      return 2;
    }
    auto trials = f.read_ints(g, "scenario_trial");
    auto status = f.read_strings(g, "status");
    fmt::print("{}: backend {} vs model ({}) {}; scenario {} colls {} disorder {} sync {} seed {}\n", path, backend,
               model.letter(), model.name(), scenario.layout().spec, colls, params.p_disorder, params.p_sync,
               params.seed);

    sim::Engine engine(scenario);
    scenario::Programs programs;
    int64_t agree = 0, disagree = 0, other = 0, harness_dl = 0, sim_dl = 0;
    for (size_t i = 0; i < trials.size(); ++i) {
      scenario.programs(static_cast<uint64_t>(trials[i]), programs);
      const sim::Outcome o = engine.run(programs, model, false);
      sim_dl += o.deadlock;
      const std::string& st = status.at(i);
      std::string verdict;
      if (st != "completed" && st != "deadlocked") {
        ++other;
        verdict = "NOT COMPARABLE";
      } else {
        const bool dl = st == "deadlocked";
        harness_dl += dl;
        if (dl == o.deadlock) {
          ++agree;
          verdict = "agree";
        } else {
          ++disagree;
          verdict = "DISAGREE";
        }
      }
      fmt::print("  trial {:>6}: harness {:<10} simulator {:<10} {}\n", trials[i], st,
                 o.deadlock ? "deadlocked" : "completed", verdict);
    }
    const int64_t n = static_cast<int64_t>(trials.size());
    fmt::print("{} trials: {} agree, {} disagree, {} neither completed nor deadlocked; deadlocked: harness {}, "
               "simulator {}\n",
               n, agree, disagree, other, harness_dl, sim_dl);
    bool ok = disagree == 0 && other == 0 && n >= min_trials && harness_dl >= min_deadlocks;
    if (n < min_trials) fmt::print("FAIL: {} trials, at least {} expected\n", n, min_trials);
    if (harness_dl < min_deadlocks) fmt::print("FAIL: {} deadlocks, at least {} expected\n", harness_dl, min_deadlocks);
    fmt::print("{}\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", path, e.what());
    return 2;
  }
}
