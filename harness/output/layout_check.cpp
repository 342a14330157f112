#include "layout_check.h"

#include <fmt/format.h>

#include <exception>

#include "h5_table.h"

namespace dfccl::harness {
namespace {

const char* kRootAttrs[] = {"tool",         "dfccl_version", "git_revision",   "date_utc",
                            "hostname",     "command_line",  "config",         "layout_version",
                            "status",       "workload",      "workload_kind",  "nranks",
                            "layout",       "gpus",          "driver_version", "cuda_runtime_version",
                            "nccl_version", "mpi_version",   "backends"};
const char* kSummaryCols[] = {"backend", "workload",      "trials", "completed", "deadlocked",     "failed", "skipped",
                              "wrong",   "deadlock_rate", "ci_low", "ci_high",   "busbw_mean_GBs", "wall_s"};
const char* kCollectiveCols[] = {
    "case",          "entry",          "coll",        "group",        "label", "dtype",     "op",
    "root",          "priority",       "nranks",      "count",        "bytes", "time_kind", "samples",
    "time_min_us",   "time_median_us", "time_max_us", "time_mean_us", "cv",    "algbw_GBs", "busbw_GBs",
    "e2e_median_us", "core_median_us", "wrong",       "preemptions"};
const char* kTrialCols[] = {"case",  "trial",     "status", "elapsed_s", "detect_s", "preemptions", "daemon_launches",
                            "wrong", "reordered", "syncs",  "message"};
const char* kIterationCols[] = {"row", "iteration", "time_us"};
// Replay workloads (workload_kind = replay) only.
const char* kReplayAttrs[] = {"layout",      "layout_spec", "ranks",      "groups", "colls",
                              "collectives", "submissions", "p_disorder", "p_sync", "seed",
                              "first_trial", "coll",        "bytes"};
const char* kReplayGroupCols[] = {"group", "name", "kind", "ranks", "colls"};
const char* kReplayTrialCols[] = {"trial",         "scenario_trial",   "status",
                                  "deadlocked",    "program_steps",    "program_submissions",
                                  "program_syncs", "disordered_ranks", "executed_steps"};
const char* kBackendAttrs[] = {"backend", "executor", "mode", "completion", "timing", "available", "skip_reason"};

// Length of a column whatever its type.
size_t column_length(const h5::File& f, const std::string& g, const std::string& name) {
  try {
    return f.read_doubles(g, name).size();
  } catch (const std::exception&) {
  }
  try {
    return f.read_ints(g, name).size();
  } catch (const std::exception&) {
  }
  return f.read_strings(g, name).size();
}

template <size_t N>
void check_table(const h5::File& f, const std::string& g, const char* const (&cols)[N],
                 std::vector<std::string>& problems) {
  if (!f.has(g)) {
    problems.push_back(fmt::format("missing table /{}", g));
    return;
  }
  long expected = -1;
  for (const char* c : cols) {
    if (!f.has(g + "/" + c)) {
      problems.push_back(fmt::format("/{}: missing column {}", g, c));
      continue;
    }
    long n = static_cast<long>(column_length(f, g, c));
    if (expected < 0) expected = n;
    else if (n != expected)
      problems.push_back(fmt::format("/{}: column {} has {} rows, expected {}", g, c, n, expected));
  }
}

}  // namespace

std::vector<std::string> check_layout(const std::string& path) {
  std::vector<std::string> problems;
  try {
    auto f = h5::File::open_read(path);
    for (const char* a : kRootAttrs)
      if (!f.has_attr("/", a)) problems.push_back(fmt::format("missing root attribute {}", a));
    if (f.has_attr("/", "tool") && f.attr_string("/", "tool") != "dfccl-harness")
      problems.push_back("root attribute tool is not dfccl-harness");
    if (f.has_attr("/", "layout_version") && f.attr_string("/", "layout_version") != kHarnessLayoutVersion)
      problems.push_back("unknown layout_version " + f.attr_string("/", "layout_version"));
    check_table(f, "summary", kSummaryCols, problems);
    const bool replay = f.has_attr("/", "workload_kind") && f.attr_string("/", "workload_kind") == "replay";
    if (replay) {
      if (!f.has("replay")) {
        problems.push_back("a replay workload without /replay");
      } else {
        for (const char* a : kReplayAttrs)
          if (!f.has_attr("replay", a)) problems.push_back(fmt::format("/replay: missing attribute {}", a));
        check_table(f, "replay/groups", kReplayGroupCols, problems);
      }
    }
    if (f.has("summary/backend")) {
      for (const auto& b : f.read_strings("summary", "backend")) {
        std::string base = "backends/" + b;
        if (!f.has(base)) {
          problems.push_back(fmt::format("summary names backend {} but /{} is missing", b, base));
          continue;
        }
        for (const char* a : kBackendAttrs)
          if (!f.has_attr(base, a)) problems.push_back(fmt::format("/{}: missing attribute {}", base, a));
        check_table(f, base + "/collectives", kCollectiveCols, problems);
        check_table(f, base + "/trials", kTrialCols, problems);
        check_table(f, base + "/iterations", kIterationCols, problems);
        if (replay && f.has_attr(base, "available") && f.attr_int(base, "available") != 0)
          check_table(f, base + "/replay", kReplayTrialCols, problems);
      }
    }
  } catch (const std::exception& e) {
    problems.push_back(e.what());
  }
  return problems;
}

std::map<std::string, Counters> read_counters(const std::string& path) {
  auto f = h5::File::open_read(path);
  std::map<std::string, Counters> out;
  auto names = f.read_strings("summary", "backend");
  auto trials = f.read_ints("summary", "trials");
  auto completed = f.read_ints("summary", "completed");
  auto deadlocked = f.read_ints("summary", "deadlocked");
  auto failed = f.read_ints("summary", "failed");
  auto skipped = f.read_ints("summary", "skipped");
  auto wrong = f.read_ints("summary", "wrong");
  Counters& all = out["*"];
  for (size_t i = 0; i < names.size(); ++i) {
    Counters c{trials.at(i), completed.at(i), deadlocked.at(i), failed.at(i), skipped.at(i), wrong.at(i), 0};
    std::string base = "backends/" + names[i] + "/collectives";
    if (f.has(base + "/coll")) c.rows = static_cast<int64_t>(f.read_strings(base, "coll").size());
    out[names[i]] = c;
    all.trials += c.trials;
    all.completed += c.completed;
    all.deadlocked += c.deadlocked;
    all.failed += c.failed;
    all.skipped += c.skipped;
    all.wrong += c.wrong;
    all.rows += c.rows;
  }
  return out;
}

std::vector<std::string> check_expectations(const std::map<std::string, Counters>& counters,
                                            const std::vector<std::string>& expectations) {
  std::vector<std::string> failures;
  for (const auto& e : expectations) {
    std::string expr = e;
    std::string backend = "*";
    if (size_t colon = expr.find(':'); colon != std::string::npos) {
      backend = expr.substr(0, colon);
      expr = expr.substr(colon + 1);
    }
    static const char* ops[] = {"==", "!=", ">=", "<=", ">", "<"};
    size_t pos = std::string::npos;
    std::string op;
    for (const char* o : ops) {
      pos = expr.find(o);
      if (pos != std::string::npos) {
        op = o;
        break;
      }
    }
    if (op.empty()) {
      failures.push_back(fmt::format("--expect '{}': no comparison (==, !=, >=, <=, >, <)", e));
      continue;
    }
    std::string name = expr.substr(0, pos);
    long long want = 0;
    try {
      want = std::stoll(expr.substr(pos + op.size()));
    } catch (const std::exception&) {
      failures.push_back(fmt::format("--expect '{}': the right-hand side is not an integer", e));
      continue;
    }
    auto it = counters.find(backend);
    if (it == counters.end()) {
      failures.push_back(fmt::format("--expect '{}': no backend {} in the file", e, backend));
      continue;
    }
    const Counters& c = it->second;
    int64_t have;
    if (name == "trials") have = c.trials;
    else if (name == "completed") have = c.completed;
    else if (name == "deadlocked") have = c.deadlocked;
    else if (name == "failed") have = c.failed;
    else if (name == "skipped") have = c.skipped;
    else if (name == "wrong") have = c.wrong;
    else if (name == "rows") have = c.rows;
    else {
      failures.push_back(fmt::format("--expect '{}': unknown counter '{}'", e, name));
      continue;
    }
    bool ok = op == "=="   ? have == want
              : op == "!=" ? have != want
              : op == ">=" ? have >= want
              : op == "<=" ? have <= want
              : op == ">"  ? have > want
                           : have < want;
    if (!ok) failures.push_back(fmt::format("expectation '{}' does not hold: {} is {}", e, name, have));
  }
  return failures;
}

}  // namespace dfccl::harness
