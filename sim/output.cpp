#include "output.h"

#include <fmt/format.h>

#include "h5_table.h"
#include "run_identity.h"

namespace dfccl::sim {

namespace {
std::string pct(double x) { return fmt::format("{:.3g}%", 100.0 * x); }
}  // namespace

std::string table_header() {
  return fmt::format("{:<2} {:<5} {:<40} {:>6} {:>9} {:>9} {:>6} {:>8} {:>8} {:>9} {:>22} {:>8}", "m", "R", "layout",
                     "ranks", "p_dis", "p_sync", "colls", "trials", "deadlk", "rate", "95% CI (Wilson)", "seconds");
}

std::string table_row(const Row& r) {
  const auto& s = r.setting;
  const auto& x = r.result;
  return fmt::format("{:<2} {:<5} {:<40} {:>6} {:>9.3g} {:>9.3g} {:>6} {:>8} {:>8} {:>9} {:>22} {:>8.2f}",
                     s.model.letter(), s.model.model == Model::stream_limit ? std::to_string(s.model.limit) : "-",
                     s.layout, r.ranks, s.p_disorder, s.p_sync, s.colls, x.trials, x.deadlocks, pct(x.rate),
                     fmt::format("[{}, {}]", pct(x.ci.lo), pct(x.ci.hi)), x.seconds);
}

void write_hdf5(const std::string& path, const h5::RunIdentity& meta, const std::vector<Row>& rows, bool per_trial) {
  auto f = h5::File::create(path);
  h5::write_run_identity(f, "dfccl-sim", meta);

  const std::string g = "/sim/settings";
  auto col_s = [&](const char* name, auto get) {
    std::vector<std::string> v;
    for (const auto& r : rows) v.push_back(get(r));
    f.write_column(g, name, v);
  };
  auto col_i = [&](const char* name, auto get) {
    std::vector<int64_t> v;
    for (const auto& r : rows) v.push_back(static_cast<int64_t>(get(r)));
    f.write_column(g, name, v);
  };
  auto col_d = [&](const char* name, auto get) {
    std::vector<double> v;
    for (const auto& r : rows) v.push_back(static_cast<double>(get(r)));
    f.write_column(g, name, v);
  };
  col_s("block", [](const Row& r) { return r.setting.block; });
  col_s("model", [](const Row& r) { return r.setting.model.letter(); });
  col_s("model_name", [](const Row& r) { return r.setting.model.name(); });
  col_i("limit", [](const Row& r) { return r.setting.model.model == Model::stream_limit ? r.setting.model.limit : 0; });
  col_s("layout", [](const Row& r) { return r.setting.layout; });
  col_s("layout_spec", [](const Row& r) { return r.layout_spec; });
  col_i("ranks", [](const Row& r) { return r.ranks; });
  col_i("groups", [](const Row& r) { return r.groups; });
  col_i("colls", [](const Row& r) { return r.setting.colls; });
  col_i("collectives", [](const Row& r) { return r.collectives; });
  col_i("submissions", [](const Row& r) { return r.submissions; });
  col_d("p_disorder", [](const Row& r) { return r.setting.p_disorder; });
  col_d("p_sync", [](const Row& r) { return r.setting.p_sync; });
  col_i("seed", [](const Row& r) { return r.seed; });
  col_i("first_trial", [](const Row& r) { return r.first_trial; });
  col_i("trials", [](const Row& r) { return r.result.trials; });
  col_i("deadlocks", [](const Row& r) { return r.result.deadlocks; });
  col_d("rate", [](const Row& r) { return r.result.rate; });
  col_d("ci_lo", [](const Row& r) { return r.result.ci.lo; });
  col_d("ci_hi", [](const Row& r) { return r.result.ci.hi; });
  col_d("mean_completed_fraction", [](const Row& r) { return r.result.mean_completed_fraction; });
  col_d("mean_stuck_ranks", [](const Row& r) { return r.result.mean_stuck_ranks; });
  col_i("first_deadlock_trial", [](const Row& r) { return r.result.first_deadlock_trial; });
  col_i("first_cycle_length", [](const Row& r) { return r.result.first_cycle_length; });
  col_s("first_cycle", [](const Row& r) { return r.result.first_cycle; });
  col_i("batch", [](const Row& r) { return r.batch; });
  col_d("seconds", [](const Row& r) { return r.result.seconds; });
  col_d("model_thread_seconds", [](const Row& r) { return r.result.model_thread_seconds; });
  col_d("generation_thread_seconds", [](const Row& r) { return r.result.generation_thread_seconds; });

  if (per_trial) {
    std::vector<int64_t> setting, trial, deadlocked, completed;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& x = rows[i].result;
      for (size_t t = 0; t < x.deadlocked.size(); ++t) {
        setting.push_back(static_cast<int64_t>(i));
        trial.push_back(static_cast<int64_t>(rows[i].first_trial + t));
        deadlocked.push_back(x.deadlocked[t]);
        completed.push_back(x.completed[t]);
      }
    }
    f.write_column("/sim/trials", "setting", setting);
    f.write_column("/sim/trials", "trial", trial);
    f.write_column("/sim/trials", "deadlocked", deadlocked);
    f.write_column("/sim/trials", "completed", completed);
  }
}

}  // namespace dfccl::sim
