// The console: nccl-tests' table (size, count, type, redop, root, time, algbw, busbw, #wrong) with the harness's
// extra columns, a progress line (every 5 s) on campaigns of several trials per case, and a summary per backend.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "writer.h"

namespace dfccl::harness {
namespace {

std::string num(double v, int prec = 2) {
  if (std::isnan(v)) return "-";
  return fmt::format("{:.{}f}", v, prec);
}

class ConsoleWriter final : public Writer {
 public:
  explicit ConsoleWriter(bool quiet) : quiet_(quiet) {}

 private:
  void do_begin_run(const RunInfo& r) override {
    fmt::print("# dfccl-harness {} ({}), workload '{}' ({}), {} ranks, {}\n", r.dfccl_version, r.git_revision,
               r.workload, r.workload_kind, r.nranks, r.layout);
    if (!r.workload_description.empty()) fmt::print("# {}\n", r.workload_description);
    fmt::print("# date {}  hosts {}  driver {}  cuda {}  nccl {}  {}\n", r.date_utc, fmt::join(r.hosts, ","),
               r.driver_version, r.cuda_runtime_version, r.nccl_version, r.mpi_version);
    for (size_t i = 0; i < r.gpus.size(); ++i) fmt::print("#  rank {:3} {}\n", i, r.gpus[i]);
    std::fflush(stdout);
  }

  void do_begin_backend(const BackendInfo& b) override {
    header_printed_ = false;
    if (!b.available) {
      fmt::print("#\n# backend {}: skipped: {}\n", b.name, b.skip_reason);
      std::fflush(stdout);
      return;
    }
    fmt::print("#\n# backend {} (executor {}, {}); completion: {}; timing: {}\n", b.name, b.executor, b.mode,
               b.completion, b.timing);
    std::fflush(stdout);
  }

  void print_header() {
    if (header_printed_) return;
    header_printed_ = true;
    fmt::print(
        "#{:>14} {:>6} {:>12} {:>12} {:>9} {:>6} {:>5} {:>10} {:>9} {:>9} {:>8} {:>10} {:>10} {:>7} {:>10} {:>10}\n",
        "coll", "group", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "min", "max",
        "cv%", "e2e", "core");
    fmt::print(
        "#{:>14} {:>6} {:>12} {:>12} {:>9} {:>6} {:>5} {:>10} {:>9} {:>9} {:>8} {:>10} {:>10} {:>7} {:>10} {:>10}\n",
        "", "", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "", "(us)", "(us)");
  }

  void do_add_case(const CaseRow& c) override {
    clear_progress();
    print_header();
    std::string wrong = c.wrong < 0 ? "N/A" : fmt::format("{}", c.wrong);
    fmt::print(
        " {:>14} {:>6} {:>12} {:>12} {:>9} {:>6} {:>5} {:>10} {:>9} {:>9} {:>8} {:>10} {:>10} {:>7} {:>10} {:>10}\n",
        c.coll, c.group, c.bytes, c.count, c.dtype, c.op, c.root, num(c.time_median_us), num(c.algbw_GBs),
        num(c.busbw_GBs), wrong, num(c.time_min_us), num(c.time_max_us), num(100 * c.cv, 1), num(c.e2e_median_us),
        num(c.core_median_us));
    std::fflush(stdout);
  }

  void do_add_trial(const TrialRow& t) override {
    if (t.status == "completed" || quiet_) return;
    clear_progress();
    fmt::print("#   case {} trial {}: {} after {:.2f} s{}{}\n", t.case_index, t.trial, t.status, t.elapsed_s,
               std::isnan(t.detect_s) ? "" : fmt::format(" (silent for {:.2f} s)", t.detect_s),
               t.message.empty() ? "" : ": " + t.message);
    std::fflush(stdout);
  }

  // A plain line (logs stay readable under mpirun and ctest): at most every 5 s, and at the end.
  void do_progress(const Progress& p) override {
    if (quiet_ || !p.campaign || p.total <= 1) return;
    auto now = std::chrono::steady_clock::now();
    bool last = p.done == p.total;
    if (!last && now - last_progress_ < std::chrono::seconds(5)) return;
    last_progress_ = now;
    fmt::print("# [{}] trial {}/{}: completed {} deadlocked {} failed {} wrong {}  {:.1f} s\n", p.backend, p.done,
               p.total, p.completed, p.deadlocked, p.failed, p.wrong, p.elapsed_s);
    std::fflush(stdout);
  }

  void do_end_backend(const BackendSummary& s) override {
    clear_progress();
    fmt::print("# {}: {} trials: {} completed, {} deadlocked, {} failed, {} skipped; deadlock rate {:.4f} "
               "(95% CI {:.4f} .. {:.4f}); wrong elements {}: {}; avg bus bandwidth {} GB/s; {:.1f} s\n",
               s.backend, s.trials, s.completed, s.deadlocked, s.failed, s.skipped, s.deadlock_rate, s.ci_low,
               s.ci_high, s.wrong, s.wrong == 0 ? "OK" : "FAILED", num(s.busbw_mean_GBs, 3), s.wall_s);
    summaries_.push_back(s);
    std::fflush(stdout);
  }

  void do_end_run(const std::string& status) override {
    clear_progress();
    fmt::print("#\n# Summary ({})\n", status);
    fmt::print("# {:<14} {:>7} {:>10} {:>11} {:>7} {:>10} {:>19} {:>8} {:>12}\n", "backend", "trials", "completed",
               "deadlocked", "failed", "rate", "95% CI", "wrong", "busbw(GB/s)");
    for (const auto& s : summaries_)
      fmt::print("# {:<14} {:>7} {:>10} {:>11} {:>7} {:>10.4f} {:>9.4f}..{:<8.4f} {:>8} {:>12}\n", s.backend, s.trials,
                 s.completed, s.deadlocked, s.failed, s.deadlock_rate, s.ci_low, s.ci_high, s.wrong,
                 num(s.busbw_mean_GBs, 3));
    std::fflush(stdout);
  }

  void clear_progress() {}

  bool quiet_;
  bool header_printed_ = false;
  std::chrono::steady_clock::time_point last_progress_{};
  std::vector<BackendSummary> summaries_;
};

}  // namespace

std::unique_ptr<Writer> make_console_writer(bool quiet) { return std::make_unique<ConsoleWriter>(quiet); }

}  // namespace dfccl::harness
