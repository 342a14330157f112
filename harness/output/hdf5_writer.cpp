// The HDF5 file of a run (layout: docs/hdf5-layout.md, section dfccl-harness). The file is created at the start of
// the run; its tables are extendible columns, to which every checkpoint (after each trial and each case) appends the
// rows reported since the last one and in which it updates the running backend's summary row, and then flushes the
// file. The file is built in memory and each flush replaces the file on disk with its whole image at once
// (h5::File::create_checkpointed): a run killed at any moment leaves a readable file, and a reader may open it while
// the run goes on. The file on disk holds every row reported before the last image: a checkpoint (after each trial
// and case) writes one when due (at most about a tenth of the run's time goes into images), the end of a backend and
// of the run always.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "h5_table.h"
#include "layout_check.h"
#include "run_identity.h"
#include "writer.h"

namespace dfccl::harness {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// Rows [first, first + rows.size()) of column `name` of group g: get(row) for every row, as T (int64_t, double or
// std::string).
template <class T, class Rows, class Get>
void put_rows(h5::File& f, const std::string& g, const char* name, size_t first, const Rows& rows, Get get) {
  std::vector<T> v;
  v.reserve(rows.size());
  for (const auto& r : rows) v.push_back(static_cast<T>(get(r)));
  f.put_rows(g, name, first, v);
}

class Hdf5Writer final : public Writer {
 public:
  Hdf5Writer(std::string path, double image_spacing) : path_(std::move(path)), image_spacing_(image_spacing) {}

 private:
  // A backend of the run: its place in /summary, and the rows of its tables written so far.
  struct BackendState {
    std::string base;  // backends/<name>
    size_t summary_row = 0, cases = 0, trials = 0, iterations = 0;
  };

  void do_begin_run(const RunInfo& r) override {
    run_ = r;
    std::filesystem::path p(path_);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    file_.emplace(h5::File::create_checkpointed(path_, image_spacing_));
    write_root("running");
    write_environment();
    write_replay();
    put_summary(0, {});  // the columns, with no row yet
    file_->flush();
  }
  void do_begin_backend(const BackendInfo& b) override {
    if (!file_) return;
    BackendState st;
    st.base = "backends/" + b.name;
    st.summary_row = backends_.size();
    write_backend_info(st.base, b);
    st.cases = file_->rows(st.base + "/collectives", "case");  // a backend named twice appends to its tables
    st.trials = file_->rows(st.base + "/trials", "case");
    st.iterations = file_->rows(st.base + "/iterations", "row");
    backends_.push_back(st);
    put_cases(st, {});
    put_trials(st, {});
    BackendSummary s;
    s.backend = b.name;
    s.workload = run_.workload;
    put_summary(st.summary_row, {s});
    file_->flush();
  }
  void do_add_case(const CaseRow& c) override { pending_cases_.push_back(c); }
  void do_add_trial(const TrialRow& t) override { pending_trials_.push_back(t); }
  // /backends/<b>/hops, appended (a backend named twice appends), then flushed.
  void do_add_hops(const std::vector<HopRow>& hops) override {
    if (!file_ || backends_.empty()) return;
    h5::File& f = *file_;
    const std::string g = backends_.back().base + "/hops";
    const size_t at = f.rows(g, "rank");
    using H = HopRow;
    put_rows<std::string>(f, g, "group", at, hops, [](const H& h) { return h.group; });
    put_rows<int64_t>(f, g, "rank", at, hops, [](const H& h) { return h.rank; });
    put_rows<int64_t>(f, g, "peer", at, hops, [](const H& h) { return h.peer; });
    put_rows<std::string>(f, g, "transport", at, hops, [](const H& h) { return h.transport; });
    put_rows<std::string>(f, g, "host", at, hops, [](const H& h) { return h.host; });
    put_rows<std::string>(f, g, "peer_host", at, hops, [](const H& h) { return h.peer_host; });
    f.flush();
  }
  void do_checkpoint(const BackendSummary& so_far) override { write_pending(&so_far, true); }
  void do_end_backend(const BackendSummary& s) override { write_pending(&s); }
  void do_end_run(const std::string& status) override {
    if (!file_) return;
    write_pending(nullptr);
    file_->set_attr("/", "status", status);
    file_->flush();
    file_.reset();  // closes the file
  }

  // Appends the pending rows to the running backend's tables, updates its summary row (when given), flushes (when
  // due: h5::File::flush).
  void write_pending(const BackendSummary* summary, bool when_due = false) {
    if (!file_ || backends_.empty()) return;
    BackendState& st = backends_.back();
    put_cases(st, pending_cases_);
    put_trials(st, pending_trials_);
    pending_cases_.clear();
    pending_trials_.clear();
    if (summary) put_summary(st.summary_row, {*summary});
    if (summary && !summary->engine.empty()) file_->set_attr("backends/" + summary->backend, "engine", summary->engine);
    file_->flush(when_due);
  }

  void write_root(const std::string& status) {
    h5::File& f = *file_;
    h5::write_run_identity(f, "dfccl-harness",
                           {run_.dfccl_version, run_.git_revision, run_.date_utc, join(run_.hosts, ","),
                            run_.command_line, run_.config_toml});
    f.set_attr("/", "layout_version", std::string(kHarnessLayoutVersion));
    f.set_attr("/", "status", status);
    f.set_attr("/", "workload", run_.workload);
    f.set_attr("/", "workload_kind", run_.workload_kind);
    f.set_attr("/", "workload_description", run_.workload_description);
    f.set_attr("/", "workload_source", run_.workload_source);
    f.set_attr("/", "nranks", static_cast<int64_t>(run_.nranks));
    f.set_attr("/", "hosts", join(run_.rank_hosts, "\n"));
    f.set_attr("/", "nhosts", static_cast<int64_t>(run_.hosts.size()));
    f.set_attr("/", "layout", run_.layout);
    f.set_attr("/", "gpus", join(run_.gpus, "\n"));
    f.set_attr("/", "driver_version", run_.driver_version);
    f.set_attr("/", "cuda_driver_version", run_.cuda_driver_version);
    f.set_attr("/", "cuda_runtime_version", run_.cuda_runtime_version);
    f.set_attr("/", "cuda_toolkit_version", run_.cuda_toolkit_version);
    f.set_attr("/", "nccl_version", run_.nccl_version);
    f.set_attr("/", "mpi_version", run_.mpi_version);
    f.set_attr("/", "mpi_library", run_.mpi_library);
    f.set_attr("/", "backends", join(run_.backends, ","));
    f.set_attr("/", "engine_settings", run_.engine_settings);
  }

  // /environment: every rank's DFCCL_*, NCCL_*, CUDA_* and launcher variables.
  void write_environment() {
    const auto& env = run_.environment;
    put_rows<int64_t>(*file_, "environment", "rank", 0, env, [](const EnvEntry& e) { return e.rank; });
    put_rows<std::string>(*file_, "environment", "name", 0, env, [](const EnvEntry& e) { return e.name; });
    put_rows<std::string>(*file_, "environment", "value", 0, env, [](const EnvEntry& e) { return e.value; });
  }

  // A replay of the simulator's scenarios: its parameters (/replay) and its groups (/replay/groups).
  void write_replay() {
    h5::File& f = *file_;
    const ReplayInfo& r = run_.replay;
    if (!r.present) return;
    const std::string g = "replay";
    f.write_column(g + "/groups", "group", [&] {
      std::vector<int64_t> v;
      for (size_t i = 0; i < r.group_names.size(); ++i) v.push_back(static_cast<int64_t>(i));
      return v;
    }());
    f.write_column(g + "/groups", "name", r.group_names);
    f.write_column(g + "/groups", "kind", r.group_kinds);
    f.write_column(g + "/groups", "ranks", r.group_sizes);
    f.write_column(g + "/groups", "colls", r.group_colls);
    f.set_attr(g, "layout", r.layout);
    f.set_attr(g, "layout_spec", r.layout_spec);
    f.set_attr(g, "ranks", r.ranks);
    f.set_attr(g, "groups", r.groups);
    f.set_attr(g, "colls", r.colls);
    f.set_attr(g, "collectives", r.collectives);
    f.set_attr(g, "submissions", r.submissions);
    f.set_attr(g, "p_disorder", r.p_disorder);
    f.set_attr(g, "p_sync", r.p_sync);
    f.set_attr(g, "seed", r.seed);
    f.set_attr(g, "first_trial", r.first_trial);
    f.set_attr(g, "coll", r.coll);
    f.set_attr(g, "bytes", r.bytes);
  }

  // Rows [row, row + rows.size()) of /summary.
  void put_summary(size_t row, const std::vector<BackendSummary>& rows) {
    h5::File& f = *file_;
    const std::string g = "summary";
    using S = BackendSummary;
    put_rows<std::string>(f, g, "backend", row, rows, [](const S& s) { return s.backend; });
    put_rows<std::string>(f, g, "workload", row, rows, [](const S& s) { return s.workload; });
    put_rows<int64_t>(f, g, "trials", row, rows, [](const S& s) { return s.trials; });
    put_rows<int64_t>(f, g, "completed", row, rows, [](const S& s) { return s.completed; });
    put_rows<int64_t>(f, g, "deadlocked", row, rows, [](const S& s) { return s.deadlocked; });
    put_rows<int64_t>(f, g, "failed", row, rows, [](const S& s) { return s.failed; });
    put_rows<int64_t>(f, g, "stalled", row, rows, [](const S& s) { return s.stalled; });
    put_rows<int64_t>(f, g, "skipped", row, rows, [](const S& s) { return s.skipped; });
    put_rows<int64_t>(f, g, "wrong", row, rows, [](const S& s) { return s.wrong; });
    put_rows<double>(f, g, "deadlock_rate", row, rows, [](const S& s) { return s.deadlock_rate; });
    put_rows<double>(f, g, "ci_low", row, rows, [](const S& s) { return s.ci_low; });
    put_rows<double>(f, g, "ci_high", row, rows, [](const S& s) { return s.ci_high; });
    put_rows<double>(f, g, "busbw_mean_GBs", row, rows, [](const S& s) { return s.busbw_mean_GBs; });
    put_rows<double>(f, g, "wall_s", row, rows, [](const S& s) { return s.wall_s; });
  }

  void write_backend_info(const std::string& base, const BackendInfo& b) {
    h5::File& f = *file_;
    f.set_attr(base, "backend", b.name);
    f.set_attr(base, "executor", b.executor);
    f.set_attr(base, "mode", b.mode);
    f.set_attr(base, "completion", b.completion);
    f.set_attr(base, "timing", b.timing);
    f.set_attr(base, "available", static_cast<int64_t>(b.available));
    f.set_attr(base, "skip_reason", b.skip_reason);
  }

  // Appends case rows to the backend's collectives table and their per-iteration times to its iterations table.
  void put_cases(BackendState& st, const std::vector<CaseRow>& cases) {
    h5::File& f = *file_;
    const std::string g = st.base + "/collectives";
    const size_t at = st.cases;
    auto col_s = [&](const char* name, auto get) { put_rows<std::string>(f, g, name, at, cases, get); };
    auto col_i = [&](const char* name, auto get) { put_rows<int64_t>(f, g, name, at, cases, get); };
    auto col_d = [&](const char* name, auto get) { put_rows<double>(f, g, name, at, cases, get); };
    col_i("case", [](const CaseRow& c) { return c.case_index; });
    col_i("entry", [](const CaseRow& c) { return c.entry; });
    col_s("coll", [](const CaseRow& c) { return c.coll; });
    col_s("group", [](const CaseRow& c) { return c.group; });
    col_s("label", [](const CaseRow& c) { return c.label; });
    col_s("dtype", [](const CaseRow& c) { return c.dtype; });
    col_s("op", [](const CaseRow& c) { return c.op; });
    col_i("root", [](const CaseRow& c) { return c.root; });
    col_i("priority", [](const CaseRow& c) { return c.priority; });
    col_i("nranks", [](const CaseRow& c) { return c.nranks; });
    col_i("count", [](const CaseRow& c) { return c.count; });
    col_i("bytes", [](const CaseRow& c) { return c.bytes; });
    col_i("in_place", [](const CaseRow& c) { return static_cast<int64_t>(c.in_place); });
    col_s("time_kind", [](const CaseRow& c) { return c.time_kind; });
    col_i("samples", [](const CaseRow& c) { return c.samples; });
    col_d("time_min_us", [](const CaseRow& c) { return c.time_min_us; });
    col_d("time_median_us", [](const CaseRow& c) { return c.time_median_us; });
    col_d("time_max_us", [](const CaseRow& c) { return c.time_max_us; });
    col_d("time_mean_us", [](const CaseRow& c) { return c.time_mean_us; });
    col_d("cv", [](const CaseRow& c) { return c.cv; });
    col_d("algbw_GBs", [](const CaseRow& c) { return c.algbw_GBs; });
    col_d("busbw_GBs", [](const CaseRow& c) { return c.busbw_GBs; });
    col_d("e2e_median_us", [](const CaseRow& c) { return c.e2e_median_us; });
    col_d("core_median_us", [](const CaseRow& c) { return c.core_median_us; });
    col_i("wrong", [](const CaseRow& c) { return c.wrong; });
    col_i("preemptions", [](const CaseRow& c) { return c.preemptions; });
    put_iterations(st, cases);
    st.cases += cases.size();
  }

  // The iterations table: `row` indexes the collectives table, so the cases' first row is st.cases.
  void put_iterations(BackendState& st, const std::vector<CaseRow>& cases) {
    std::vector<int64_t> row, iteration;
    std::vector<double> time;
    for (size_t r = 0; r < cases.size(); ++r)
      for (size_t i = 0; i < cases[r].times_us.size(); ++i) {
        row.push_back(static_cast<int64_t>(st.cases + r));
        iteration.push_back(static_cast<int64_t>(i));
        time.push_back(cases[r].times_us[i]);
      }
    const std::string g = st.base + "/iterations";
    file_->put_rows(g, "row", st.iterations, row, kIterationChunk);
    file_->put_rows(g, "iteration", st.iterations, iteration, kIterationChunk);
    file_->put_rows(g, "time_us", st.iterations, time, kIterationChunk);
    st.iterations += row.size();
  }

  // Appends trial rows to the backend's trials table (and, for a replay, its replay table).
  void put_trials(BackendState& st, const std::vector<TrialRow>& rows) {
    h5::File& f = *file_;
    const std::string g = st.base + "/trials";
    const size_t at = st.trials;
    using T = TrialRow;
    put_rows<int64_t>(f, g, "case", at, rows, [](const T& t) { return t.case_index; });
    put_rows<int64_t>(f, g, "trial", at, rows, [](const T& t) { return t.trial; });
    put_rows<std::string>(f, g, "status", at, rows, [](const T& t) { return t.status; });
    put_rows<std::string>(f, g, "ranks", at, rows, [](const T& t) { return t.ranks; });
    put_rows<double>(f, g, "elapsed_s", at, rows, [](const T& t) { return t.elapsed_s; });
    put_rows<double>(f, g, "detect_s", at, rows, [](const T& t) { return t.detect_s; });
    put_rows<int64_t>(f, g, "preemptions", at, rows, [](const T& t) { return t.preemptions; });
    put_rows<int64_t>(f, g, "daemon_launches", at, rows, [](const T& t) { return t.daemon_launches; });
    put_rows<int64_t>(f, g, "wrong", at, rows, [](const T& t) { return t.wrong; });
    put_rows<int64_t>(f, g, "reordered", at, rows, [](const T& t) { return t.reordered; });
    put_rows<int64_t>(f, g, "syncs", at, rows, [](const T& t) { return t.syncs; });
    put_rows<std::string>(f, g, "message", at, rows, [](const T& t) { return t.message; });
    if (run_.replay.present) put_replay_trials(st.base + "/replay", at, rows);
    if (run_.workload_kind == "fault") put_fault_trials(st.base + "/faults", at, rows);
    st.trials += rows.size();
  }

  // A replay's per-trial table: one row per row of /trials, in the same order.
  void put_replay_trials(const std::string& r, size_t at, const std::vector<TrialRow>& rows) {
    h5::File& f = *file_;
    using T = TrialRow;
    put_rows<int64_t>(f, r, "trial", at, rows, [](const T& t) { return t.trial; });
    put_rows<int64_t>(f, r, "scenario_trial", at, rows, [](const T& t) { return t.scenario_trial; });
    put_rows<std::string>(f, r, "status", at, rows, [](const T& t) { return t.status; });
    put_rows<int64_t>(f, r, "deadlocked", at, rows, [](const T& t) { return t.status == "deadlocked" ? 1 : 0; });
    put_rows<int64_t>(f, r, "program_steps", at, rows, [](const T& t) { return t.program_steps; });
    put_rows<int64_t>(f, r, "program_submissions", at, rows, [](const T& t) { return t.program_submissions; });
    put_rows<int64_t>(f, r, "program_syncs", at, rows, [](const T& t) { return t.program_syncs; });
    put_rows<int64_t>(f, r, "disordered_ranks", at, rows, [](const T& t) { return t.disordered_ranks; });
    put_rows<int64_t>(f, r, "executed_steps", at, rows, [](const T& t) { return t.executed_steps; });
  }

  // A fault workload's per-trial table: one row per row of /trials, in the same order.
  void put_fault_trials(const std::string& g, size_t at, const std::vector<TrialRow>& rows) {
    h5::File& f = *file_;
    using T = TrialRow;
    put_rows<int64_t>(f, g, "trial", at, rows, [](const T& t) { return t.trial; });
    put_rows<std::string>(f, g, "status", at, rows, [](const T& t) { return t.status; });
    put_rows<int64_t>(f, g, "victim", at, rows, [](const T& t) { return t.victim; });
    put_rows<double>(f, g, "kill_ms", at, rows, [](const T& t) { return t.kill_ms; });
    put_rows<double>(f, g, "detect_s", at, rows, [](const T& t) { return t.fault_detect_s; });
    put_rows<double>(f, g, "shrink_s", at, rows, [](const T& t) { return t.fault_shrink_s; });
    put_rows<double>(f, g, "recover_s", at, rows, [](const T& t) { return t.fault_recover_s; });
    put_rows<int64_t>(f, g, "lost", at, rows, [](const T& t) { return t.fault_lost; });
    put_rows<int64_t>(f, g, "wrong", at, rows, [](const T& t) { return t.wrong; });
    put_rows<int64_t>(f, g, "survivors", at, rows, [](const T& t) { return t.fault_survivors; });
    put_rows<int64_t>(f, g, "resumed_at", at, rows, [](const T& t) { return t.fault_resumed_at; });
  }

  static constexpr size_t kIterationChunk = 4096;  // rows per chunk of the iterations table (the longest)
  std::string path_;
  double image_spacing_;  // h5::File::create_checkpointed
  RunInfo run_;
  std::optional<h5::File> file_;  // open from begin_run to end_run
  std::vector<BackendState> backends_;
  std::vector<CaseRow> pending_cases_;  // reported since the last checkpoint
  std::vector<TrialRow> pending_trials_;
};
}  // namespace

std::unique_ptr<Writer> make_hdf5_writer(const std::string& path, double image_spacing) {
  return std::make_unique<Hdf5Writer>(path, image_spacing);
}

}  // namespace dfccl::harness
