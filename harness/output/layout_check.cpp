#include "layout_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <type_traits>

#include "colls/collective.h"
#include "h5_table.h"

namespace dfccl::harness {
namespace {

const char* kRootAttrs[] = {"tool",
                            "dfccl_version",
                            "git_revision",
                            "date_utc",
                            "hostname",
                            "command_line",
                            "config",
                            "layout_version",
                            "status",
                            "workload",
                            "workload_kind",
                            "nranks",
                            "hosts",
                            "nhosts",
                            "layout",
                            "gpus",
                            "driver_version",
                            "cuda_driver_version",
                            "cuda_runtime_version",
                            "nccl_version",
                            "mpi_version",
                            "backends",
                            "engine_settings"};
const char* kSummaryCols[] = {"backend", "workload", "trials",         "completed", "deadlocked",
                              "failed",  "stalled",  "skipped",        "wrong",     "deadlock_rate",
                              "ci_low",  "ci_high",  "busbw_mean_GBs", "wall_s"};
const char* kEnvironmentCols[] = {"rank", "name", "value"};
const char* kCollectiveCols[] = {
    "case",      "entry",         "coll",           "group",       "label",        "dtype",    "op",
    "root",      "priority",      "nranks",         "count",       "bytes",        "in_place", "time_kind",
    "samples",   "time_min_us",   "time_median_us", "time_max_us", "time_mean_us", "cv",       "algbw_GBs",
    "busbw_GBs", "e2e_median_us", "core_median_us", "wrong",       "preemptions"};
const char* kTrialCols[] = {"case",        "trial",           "status", "ranks",     "elapsed_s", "detect_s",
                            "preemptions", "daemon_launches", "wrong",  "reordered", "syncs",     "message"};
const char* kIterationCols[] = {"row", "iteration", "time_us"};
const char* kHopCols[] = {"group", "rank", "peer", "transport", "host", "peer_host"};
// Replay workloads (workload_kind = replay) only.
const char* kReplayAttrs[] = {"layout",      "layout_spec", "ranks",      "groups", "colls",
                              "collectives", "submissions", "p_disorder", "p_sync", "seed",
                              "first_trial", "coll",        "bytes"};
const char* kReplayGroupCols[] = {"group", "name", "kind", "ranks", "colls"};
const char* kReplayTrialCols[] = {"trial",         "scenario_trial",   "status",
                                  "deadlocked",    "program_steps",    "program_submissions",
                                  "program_syncs", "disordered_ranks", "executed_steps"};
// Fault workloads (workload_kind = fault) only.
const char* kFaultCols[] = {"trial",     "status", "victim", "kill_ms",   "detect_s",  "shrink_s",
                            "recover_s", "lost",   "wrong",  "survivors", "resumed_at"};
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

// The layout version that added a root attribute, table or column (1: there from the start); files of older versions
// (results/ holds many) are checked without what came later.
int added_in(const std::string& name) {
  if (name == "cuda_driver_version" || name == "engine_settings" || name == "stalled" || name == "ranks" ||
      name == "environment" || name == "in_place")
    return 2;
  if (name == "hosts" || name == "nhosts") return 3;
  return 1;
}
int g_version = 3;  // the layout version of the file being checked (check_layout sets it)
bool too_new(const std::string& name) { return added_in(name) > g_version; }

template <size_t N>
void check_table(const h5::File& f, const std::string& g, const char* const (&cols)[N],
                 std::vector<std::string>& problems) {
  if (!f.has(g)) {
    problems.push_back(fmt::format("missing table /{}", g));
    return;
  }
  long expected = -1;
  for (const char* c : cols) {
    if (too_new(c)) continue;
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

// Layout 3: `hosts` has one line per rank and `nhosts` counts its distinct lines.
void check_hosts(const h5::File& f, std::vector<std::string>& problems) {
  if (!f.has_attr("/", "hosts") || !f.has_attr("/", "nhosts") || !f.has_attr("/", "nranks")) return;
  std::vector<std::string> lines;
  const std::string hosts = f.attr_string("/", "hosts");
  for (size_t at = 0; at <= hosts.size();) {
    const size_t end = std::min(hosts.find('\n', at), hosts.size());
    lines.push_back(hosts.substr(at, end - at));
    at = end + 1;
  }
  std::sort(lines.begin(), lines.end());
  const auto nranks = f.attr_int("/", "nranks"), nhosts = f.attr_int("/", "nhosts");
  if (static_cast<int64_t>(lines.size()) != nranks)
    problems.push_back(fmt::format("root attribute hosts has {} lines for {} ranks", lines.size(), nranks));
  const auto distinct = std::unique(lines.begin(), lines.end()) - lines.begin();
  if (distinct != nhosts)
    problems.push_back(fmt::format("root attribute nhosts is {}, but hosts names {} hosts", nhosts, distinct));
}

// Layout 3: a backend on the dfccl library (mode preemptive or blocking) that completed a trial has its hops.
bool needs_hops(const h5::File& f, const std::string& base) {
  if (g_version < 3 || !f.has_attr(base, "mode") || !f.has(base + "/trials/status")) return false;
  const std::string mode = f.attr_string(base, "mode");
  if (mode != "preemptive" && mode != "blocking") return false;
  const auto status = f.read_strings(base + "/trials", "status");
  return std::find(status.begin(), status.end(), "completed") != status.end();
}

}  // namespace

namespace {

// /replay's attributes and groups (a replay workload's file).
void check_replay(const h5::File& f, std::vector<std::string>& problems) {
  if (!f.has("replay")) {
    problems.push_back("a replay workload without /replay");
    return;
  }
  for (const char* a : kReplayAttrs)
    if (!f.has_attr("replay", a)) problems.push_back(fmt::format("/replay: missing attribute {}", a));
  check_table(f, "replay/groups", kReplayGroupCols, problems);
}

// The group of backend b that /summary names: its attributes and tables.
void check_backend(const h5::File& f, const std::string& b, bool replay, bool fault,
                   std::vector<std::string>& problems) {
  const std::string base = "backends/" + b;
  if (!f.has(base)) {
    problems.push_back(fmt::format("summary names backend {} but /{} is missing", b, base));
    return;
  }
  for (const char* a : kBackendAttrs)
    if (!f.has_attr(base, a)) problems.push_back(fmt::format("/{}: missing attribute {}", base, a));
  check_table(f, base + "/collectives", kCollectiveCols, problems);
  check_table(f, base + "/trials", kTrialCols, problems);
  check_table(f, base + "/iterations", kIterationCols, problems);
  // A fault workload's communicators live in its child processes: no hops.
  if (f.has(base + "/hops") || (!fault && needs_hops(f, base))) check_table(f, base + "/hops", kHopCols, problems);
  if (replay && f.has_attr(base, "available") && f.attr_int(base, "available") != 0)
    check_table(f, base + "/replay", kReplayTrialCols, problems);
  if (fault && f.has_attr(base, "available") && f.attr_int(base, "available") != 0)
    check_table(f, base + "/faults", kFaultCols, problems);
}

}  // namespace

std::vector<std::string> check_layout(const std::string& path) {
  std::vector<std::string> problems;
  try {
    auto f = h5::File::open_read(path);
    const std::string version = f.has_attr("/", "layout_version") ? f.attr_string("/", "layout_version") : "";
    g_version = version == "1" ? 1 : version == "2" ? 2 : 3;
    for (const char* a : kRootAttrs)
      if (!f.has_attr("/", a) && !too_new(a)) problems.push_back(fmt::format("missing root attribute {}", a));
    if (f.has_attr("/", "tool") && f.attr_string("/", "tool") != "dfccl-harness")
      problems.push_back("root attribute tool is not dfccl-harness");
    if (!version.empty() && version != kHarnessLayoutVersion && g_version == 3)
      problems.push_back("unknown layout_version " + version);
    check_table(f, "summary", kSummaryCols, problems);
    if (!too_new("environment")) check_table(f, "environment", kEnvironmentCols, problems);
    if (g_version >= 3) check_hosts(f, problems);
    const bool replay = f.has_attr("/", "workload_kind") && f.attr_string("/", "workload_kind") == "replay";
    if (replay) check_replay(f, problems);
    const bool fault = f.has_attr("/", "workload_kind") && f.attr_string("/", "workload_kind") == "fault";
    if (f.has("summary/backend"))
      for (const auto& b : f.read_strings("summary", "backend")) check_backend(f, b, replay, fault, problems);
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
  auto stalled = f.has("summary/stalled") ? f.read_ints("summary", "stalled")  // layout 2 on
                                          : std::vector<int64_t>(names.size(), 0);
  auto skipped = f.read_ints("summary", "skipped");
  auto wrong = f.read_ints("summary", "wrong");
  Counters& all = out["*"];
  for (size_t i = 0; i < names.size(); ++i) {
    Counters c{trials.at(i),
               completed.at(i),
               deadlocked.at(i),
               failed.at(i),
               stalled.at(i),
               skipped.at(i),
               wrong.at(i),
               0,
               {}};
    std::string base = "backends/" + names[i] + "/collectives";
    if (f.has(base + "/coll")) {
      auto colls = f.read_strings(base, "coll");
      auto busbw = f.read_doubles(base, "busbw_GBs");
      c.rows = static_cast<int64_t>(colls.size());
      for (size_t r = 0; r < colls.size() && r < busbw.size(); ++r) c.busbw.emplace_back(colls[r], busbw[r]);
    }
    all.trials += c.trials;
    all.completed += c.completed;
    all.deadlocked += c.deadlocked;
    all.failed += c.failed;
    all.stalled += c.stalled;
    all.skipped += c.skipped;
    all.wrong += c.wrong;
    all.rows += c.rows;
    all.busbw.insert(all.busbw.end(), c.busbw.begin(), c.busbw.end());
    out[names[i]] = std::move(c);
  }
  return out;
}

namespace {

// One expectation, split: "[backend:][collective:]name OP rhs".
struct Expectation {
  std::string backend = "*", coll, name, op, rhs;
};

bool is_collective(const std::string& s) {
  for (const Collective* c : all_collectives())
    if (s == c->name) return true;
  return false;
}

std::string collective_names() {
  std::string out;
  for (const Collective* c : all_collectives()) out += (out.empty() ? "" : " ") + std::string(c->name);
  return out;
}

// Splits `e`; returns the problem ("" when it splits).
std::string split_expectation(const std::string& e, Expectation& x) {
  std::string expr = e;
  for (int prefix = 0; prefix < 2; ++prefix) {
    size_t colon = expr.find(':');
    if (colon == std::string::npos) break;
    std::string p = expr.substr(0, colon);
    if (is_collective(p)) x.coll = p;
    else if (prefix == 0 && x.coll.empty()) x.backend = p;
    else return fmt::format("'{}' is not a collective ({})", p, collective_names());
    expr = expr.substr(colon + 1);
  }
  for (const char* o : {"==", "!=", ">=", "<=", ">", "<"}) {
    size_t pos = expr.find(o);
    if (pos == std::string::npos) continue;
    x.op = o;
    x.name = expr.substr(0, pos);
    x.rhs = expr.substr(pos + x.op.size());
    return "";
  }
  return "no comparison (==, !=, >=, <=, >, <)";
}

template <class T>
bool compare(T have, const std::string& op, T want) {
  return op == "=="   ? have == want
         : op == "!=" ? have != want
         : op == ">=" ? have >= want
         : op == "<=" ? have <= want
         : op == ">"  ? have > want
                      : have < want;
}

// Whether all of s is one number (std::stod or std::stoll), into *out.
template <class T>
bool parse_whole(const std::string& s, T* out) {
  try {
    size_t used = 0;
    if constexpr (std::is_floating_point_v<T>) *out = std::stod(s, &used);
    else *out = std::stoll(s, &used);
    return used == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

// busbw_mean of the rows of `c` (of one collective when x.coll is set). Returns the problem ("" when it holds).
std::string check_busbw(const Expectation& x, const Counters& c) {
  double want = 0;
  if (!parse_whole(x.rhs, &want)) return "the right-hand side is not a number";
  double sum = 0;
  int n = 0;
  for (const auto& [coll, bw] : c.busbw)
    if ((x.coll.empty() || coll == x.coll) && !std::isnan(bw)) sum += bw, ++n;
  if (n == 0) return fmt::format("no row{} with a bus bandwidth", x.coll.empty() ? "" : " of " + x.coll);
  const double have = sum / n;
  if (!compare(have, x.op, want)) return fmt::format("does not hold: busbw_mean is {:g} GB/s over {} rows", have, n);
  return "";
}

// A counter of `c` (null: only the form is checked). Returns the problem ("" when it holds).
std::string check_counter(const Expectation& x, const Counters* c) {
  const Counters none;
  const Counters& k = c ? *c : none;
  const std::pair<const char*, int64_t> counters[] = {
      {"trials", k.trials},   {"completed", k.completed}, {"deadlocked", k.deadlocked}, {"failed", k.failed},
      {"stalled", k.stalled}, {"skipped", k.skipped},     {"wrong", k.wrong},           {"rows", k.rows}};
  for (const auto& [name, have] : counters) {
    if (x.name != name) continue;
    if (!x.coll.empty()) return fmt::format("'{}' is counted per backend, not per collective", name);
    long long want = 0;
    if (!parse_whole(x.rhs, &want)) return "the right-hand side is not an integer";
    if (c && !compare<long long>(have, x.op, want)) return fmt::format("does not hold: {} is {}", name, have);
    return "";
  }
  return fmt::format("unknown counter '{}' (trials completed deadlocked failed stalled skipped wrong rows busbw_mean)",
                     x.name);
}

}  // namespace

std::string expectation_problem(const std::string& e, const std::vector<std::string>& backends) {
  Expectation x;
  std::string problem = split_expectation(e, x);
  double number = 0;
  if (problem.empty() && x.backend != "*" && std::find(backends.begin(), backends.end(), x.backend) == backends.end())
    problem = fmt::format("no backend {} in this run ({})", x.backend, fmt::join(backends, ","));
  else if (problem.empty() && x.name == "busbw_mean" && !parse_whole(x.rhs, &number))
    problem = "the right-hand side is not a number";
  else if (problem.empty() && x.name != "busbw_mean") problem = check_counter(x, nullptr);
  return problem.empty() ? "" : fmt::format("--expect '{}': {}", e, problem);
}

std::string read_status(const std::string& path) { return h5::File::open_read(path).attr_string("/", "status"); }

std::vector<std::string> check_expectations(const std::map<std::string, Counters>& counters,
                                            const std::vector<std::string>& expectations) {
  std::vector<std::string> failures;
  for (const auto& e : expectations) {
    Expectation x;
    std::string problem = split_expectation(e, x);
    if (problem.empty()) {
      auto it = counters.find(x.backend);
      if (it == counters.end()) problem = fmt::format("no backend {} in the file", x.backend);
      else if (x.name == "busbw_mean") problem = check_busbw(x, it->second);
      else problem = check_counter(x, &it->second);
    }
    if (problem.starts_with("does not hold")) failures.push_back(fmt::format("expectation '{}' {}", e, problem));
    else if (!problem.empty()) failures.push_back(fmt::format("--expect '{}': {}", e, problem));
  }
  return failures;
}

}  // namespace dfccl::harness
