// The HDF5 file of a run (layout: docs/hdf5-layout.md, section dfccl-harness). Everything is kept in memory and the
// whole file is rewritten after every backend and at the end, so that a run stopped between backends still leaves
// a valid file, and the final file always exists, with the run's status.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <map>

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

// One column of group g: get(row) for every row, as T (int64_t, double or std::string).
template <class T, class Rows, class Get>
void write_rows(h5::File& f, const std::string& g, const char* name, const Rows& rows, Get get) {
  std::vector<T> v;
  v.reserve(rows.size());
  for (const auto& r : rows) v.push_back(static_cast<T>(get(r)));
  f.write_column(g, name, v);
}

class Hdf5Writer final : public Writer {
 public:
  explicit Hdf5Writer(std::string path) : path_(std::move(path)) {}

 private:
  struct BackendData {
    BackendInfo info;
    std::vector<CaseRow> cases;
    std::vector<TrialRow> trials;
    bool has_summary = false;
    BackendSummary summary;
  };

  void do_begin_run(const RunInfo& r) override { run_ = r; }
  void do_begin_backend(const BackendInfo& b) override {
    backends_.push_back(BackendData{});
    backends_.back().info = b;
  }
  void do_add_case(const CaseRow& c) override {
    if (!backends_.empty()) backends_.back().cases.push_back(c);
  }
  void do_add_trial(const TrialRow& t) override {
    if (!backends_.empty()) backends_.back().trials.push_back(t);
  }
  void do_end_backend(const BackendSummary& s) override {
    if (!backends_.empty()) {
      backends_.back().summary = s;
      backends_.back().has_summary = true;
    }
    write("running");
  }
  void do_end_run(const std::string& status) override { write(status); }

  void write(const std::string& status) {
    std::filesystem::path p(path_);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    std::string tmp = path_ + ".tmp";
    {
      auto f = h5::File::create(tmp);
      write_root(f, status);
      write_replay(f);
      write_summary(f);
      for (const auto& b : backends_) write_backend(f, b);
    }
    std::filesystem::rename(tmp, path_);
  }

  void write_root(h5::File& f, const std::string& status) {
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
    f.set_attr("/", "layout", run_.layout);
    f.set_attr("/", "gpus", join(run_.gpus, "\n"));
    f.set_attr("/", "driver_version", run_.driver_version);
    f.set_attr("/", "cuda_runtime_version", run_.cuda_runtime_version);
    f.set_attr("/", "cuda_toolkit_version", run_.cuda_toolkit_version);
    f.set_attr("/", "nccl_version", run_.nccl_version);
    f.set_attr("/", "mpi_version", run_.mpi_version);
    f.set_attr("/", "mpi_library", run_.mpi_library);
    f.set_attr("/", "backends", join(run_.backends, ","));
  }

  // A replay of the simulator's scenarios: its parameters (/replay) and its groups (/replay/groups).
  void write_replay(h5::File& f) {
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

  void write_summary(h5::File& f) {
    std::vector<BackendSummary> rows;
    for (const auto& b : backends_)
      if (b.has_summary) rows.push_back(b.summary);
    const std::string g = "summary";
    using S = BackendSummary;
    write_rows<std::string>(f, g, "backend", rows, [](const S& s) { return s.backend; });
    write_rows<std::string>(f, g, "workload", rows, [](const S& s) { return s.workload; });
    write_rows<int64_t>(f, g, "trials", rows, [](const S& s) { return s.trials; });
    write_rows<int64_t>(f, g, "completed", rows, [](const S& s) { return s.completed; });
    write_rows<int64_t>(f, g, "deadlocked", rows, [](const S& s) { return s.deadlocked; });
    write_rows<int64_t>(f, g, "failed", rows, [](const S& s) { return s.failed; });
    write_rows<int64_t>(f, g, "skipped", rows, [](const S& s) { return s.skipped; });
    write_rows<int64_t>(f, g, "wrong", rows, [](const S& s) { return s.wrong; });
    write_rows<double>(f, g, "deadlock_rate", rows, [](const S& s) { return s.deadlock_rate; });
    write_rows<double>(f, g, "ci_low", rows, [](const S& s) { return s.ci_low; });
    write_rows<double>(f, g, "ci_high", rows, [](const S& s) { return s.ci_high; });
    write_rows<double>(f, g, "busbw_mean_GBs", rows, [](const S& s) { return s.busbw_mean_GBs; });
    write_rows<double>(f, g, "wall_s", rows, [](const S& s) { return s.wall_s; });
  }

  void write_backend(h5::File& f, const BackendData& b) {
    const std::string base = "backends/" + b.info.name;
    f.set_attr(base, "backend", b.info.name);
    f.set_attr(base, "executor", b.info.executor);
    f.set_attr(base, "mode", b.info.mode);
    f.set_attr(base, "completion", b.info.completion);
    f.set_attr(base, "timing", b.info.timing);
    f.set_attr(base, "available", static_cast<int64_t>(b.info.available));
    f.set_attr(base, "skip_reason", b.info.skip_reason);

    {
      const std::string g = base + "/collectives";
      auto col_s = [&](const char* name, auto get) { write_rows<std::string>(f, g, name, b.cases, get); };
      auto col_i = [&](const char* name, auto get) { write_rows<int64_t>(f, g, name, b.cases, get); };
      auto col_d = [&](const char* name, auto get) { write_rows<double>(f, g, name, b.cases, get); };
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
    }
    {
      const std::string g = base + "/trials";
      using T = TrialRow;
      const auto& rows = b.trials;
      write_rows<int64_t>(f, g, "case", rows, [](const T& t) { return t.case_index; });
      write_rows<int64_t>(f, g, "trial", rows, [](const T& t) { return t.trial; });
      write_rows<std::string>(f, g, "status", rows, [](const T& t) { return t.status; });
      write_rows<double>(f, g, "elapsed_s", rows, [](const T& t) { return t.elapsed_s; });
      write_rows<double>(f, g, "detect_s", rows, [](const T& t) { return t.detect_s; });
      write_rows<int64_t>(f, g, "preemptions", rows, [](const T& t) { return t.preemptions; });
      write_rows<int64_t>(f, g, "daemon_launches", rows, [](const T& t) { return t.daemon_launches; });
      write_rows<int64_t>(f, g, "wrong", rows, [](const T& t) { return t.wrong; });
      write_rows<int64_t>(f, g, "reordered", rows, [](const T& t) { return t.reordered; });
      write_rows<int64_t>(f, g, "syncs", rows, [](const T& t) { return t.syncs; });
      write_rows<std::string>(f, g, "message", rows, [](const T& t) { return t.message; });
      if (run_.replay.present) {  // one row per trial, in the order of /trials
        const std::string r = base + "/replay";
        write_rows<int64_t>(f, r, "trial", rows, [](const T& t) { return t.trial; });
        write_rows<int64_t>(f, r, "scenario_trial", rows, [](const T& t) { return t.scenario_trial; });
        write_rows<std::string>(f, r, "status", rows, [](const T& t) { return t.status; });
        write_rows<int64_t>(f, r, "deadlocked", rows, [](const T& t) { return t.status == "deadlocked" ? 1 : 0; });
        write_rows<int64_t>(f, r, "program_steps", rows, [](const T& t) { return t.program_steps; });
        write_rows<int64_t>(f, r, "program_submissions", rows, [](const T& t) { return t.program_submissions; });
        write_rows<int64_t>(f, r, "program_syncs", rows, [](const T& t) { return t.program_syncs; });
        write_rows<int64_t>(f, r, "disordered_ranks", rows, [](const T& t) { return t.disordered_ranks; });
        write_rows<int64_t>(f, r, "executed_steps", rows, [](const T& t) { return t.executed_steps; });
      }
    }
    {
      const std::string g = base + "/iterations";
      std::vector<int64_t> row, iteration;
      std::vector<double> time;
      for (size_t r = 0; r < b.cases.size(); ++r)
        for (size_t i = 0; i < b.cases[r].times_us.size(); ++i) {
          row.push_back(static_cast<int64_t>(r));
          iteration.push_back(static_cast<int64_t>(i));
          time.push_back(b.cases[r].times_us[i]);
        }
      f.write_column(g, "row", row);
      f.write_column(g, "iteration", iteration);
      f.write_column(g, "time_us", time);
    }
  }

  std::string path_;
  RunInfo run_;
  std::vector<BackendData> backends_;
};

}  // namespace

std::unique_ptr<Writer> make_hdf5_writer(const std::string& path) { return std::make_unique<Hdf5Writer>(path); }

}  // namespace dfccl::harness
