// The console: nccl-tests' table (size count type redop root, then out-of-place time algbw busbw #wrong, then
// in-place time algbw busbw #wrong, in the same order, so that scripts written for nccl-tests read it) followed by the
// harness's columns (coll group min max cv% e2e core, of the line's first measurement); with run.in_place off the
// in-place fields are left out, with only the out-of-place ones are blank (as nccl-tests prints a measurement it
// skips), and a measurement without a completed trial is "-" in each field; nccl-tests' two footer lines per backend, a
// line per trial that did not complete, the hosts of the ranks and each backend's ring hops by transport, a progress
// line on stderr (case k/N and an ETA, at most every --progress seconds) and a summary per backend and at the end.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "row_pairs.h"
#include "runtime/hosts.h"
#include "writer.h"

namespace dfccl::harness {
namespace {

std::string num(double v, int prec = 2) {
  if (std::isnan(v)) return "-";
  return fmt::format("{:.{}f}", v, prec);
}

// "42 s", "3m05s", "2h07m".
std::string duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  const auto t = static_cast<int64_t>(std::llround(s));
  if (t < 60) return fmt::format("{} s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
}

// A line: nccl-tests' preamble (size .. root), its measurement fields (time algbw busbw #wrong, once or twice), then
// the harness's columns (coll .. core). The header's first column is one character narrower, for its '#'.
constexpr const char* kPreamble = "{:>12} {:>12} {:>8} {:>6} {:>6}";
constexpr const char* kHeaderPreamble = "#{:>11} {:>12} {:>8} {:>6} {:>6}";
constexpr const char* kMeasurement = " {:>10} {:>8} {:>8} {:>6}";
constexpr const char* kHarness = "  {:>14} {:>6} {:>10} {:>10} {:>7} {:>10} {:>10}\n";
constexpr int kMeasurementWidth = 1 + 10 + 1 + 8 + 1 + 8 + 1 + 6;

// One measurement's fields: "-" in each where its case has no row.
std::string measurement(const std::optional<CaseRow>& c) {
  if (!c) return fmt::format(kMeasurement, "-", "-", "-", "-");
  return fmt::format(kMeasurement, num(c->time_median_us), num(c->algbw_GBs), num(c->busbw_GBs),
                     c->wrong < 0 ? "N/A" : fmt::format("{}", c->wrong));
}

class ConsoleWriter final : public Writer {
 public:
  explicit ConsoleWriter(const ConsoleOptions& o) : o_(o) {}

 private:
  void do_begin_run(const RunInfo& r) override {
    fmt::print("# dfccl-harness {} ({}), workload '{}' ({}), {} ranks, {}\n", r.dfccl_version, r.git_revision,
               r.workload, r.workload_kind, r.nranks, r.layout);
    if (!r.workload_description.empty()) fmt::print("# {}\n", r.workload_description);
    fmt::print("# date {}  hosts {}  driver {}  cuda {}  nccl {}  {}\n", r.date_utc, fmt::join(r.hosts, ","),
               r.driver_version, r.cuda_runtime_version, r.nccl_version, r.mpi_version);
    if (!r.rank_hosts.empty()) fmt::print("# {}\n", hosts_line(r.rank_hosts));
    for (size_t i = 0; i < r.gpus.size(); ++i) fmt::print("#  rank {:3} {}\n", i, r.gpus[i]);
    fmt::print("# time: the median over the timed iterations of the slowest rank's time (MAX over ranks, nccl-tests "
               "-a 3); algbw and busbw from it. {}\n",
               r.in_place == "off"    ? "Out-of-place only (run.in_place off): no in-place columns."
               : r.in_place == "only" ? "In-place only (run.in_place only): the out-of-place columns are blank."
                                      : "Out-of-place, then in-place (run.in_place both); the harness columns "
                                        "describe the out-of-place measurement.");
    in_place_columns_ = r.in_place != "off";
    only_in_place_ = r.in_place == "only";
    backends_total_ = static_cast<int>(r.backends.size());
    std::fflush(stdout);
  }

  void do_begin_backend(const BackendInfo& b) override {
    header_printed_ = false;
    pairer_ = RowPairer(in_place_columns_ && !only_in_place_);
    available_ = b.available;
    ++backend_index_;
    last_progress_ = std::chrono::steady_clock::now();
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
    std::string titles = fmt::format("#{:>47}{:^36}", "", "out-of-place");
    if (in_place_columns_) titles += fmt::format("{:^36}", "in-place");
    fmt::print("{}harness columns\n", titles);
    auto line = [&](std::array<const char*, 16> f) {
      std::string m = fmt::format(kMeasurement, f[5], f[6], f[7], f[8]);
      fmt::print("{}{}{}", fmt::format(kHeaderPreamble, f[0], f[1], f[2], f[3], f[4]), in_place_columns_ ? m + m : m,
                 fmt::format(kHarness, f[9], f[10], f[11], f[12], f[13], f[14], f[15]));
    };
    line({"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "coll", "group", "min", "max",
          "cv%", "e2e", "core"});
    line({"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "", "", "(us)", "(us)", "", "(us)", "(us)"});
  }

  void do_add_case(const CaseRow& c) override {
    for (const RowPair& p : pairer_.add(c)) print_pair(p);
  }

  // One line of the table: the preamble and harness columns from the pair's first row.
  void print_pair(const RowPair& p) {
    print_header();
    const CaseRow& c = p.first();
    std::string out_of_place = only_in_place_ ? std::string(kMeasurementWidth, ' ') : measurement(p.out_of_place);
    fmt::print("{}{}{}{}", fmt::format(kPreamble, c.bytes, c.count, c.dtype, c.op, c.root), out_of_place,
               in_place_columns_ ? measurement(p.in_place) : "",
               fmt::format(kHarness, c.coll, c.group, num(c.time_min_us), num(c.time_max_us), num(100 * c.cv, 1),
                           num(c.e2e_median_us), num(c.core_median_us)));
    std::fflush(stdout);
  }

  void do_add_hops(const std::vector<HopRow>& hops) override {
    fmt::print("# ring hops: {}\n", hops_line(hops));
    std::fflush(stdout);
  }

  void do_add_trial(const TrialRow& t) override {
    if (t.status == "completed" || o_.quiet) return;
    fmt::print("#   case {} trial {}: {} after {:.2f} s{}{}\n", t.case_index, t.trial, t.status, t.elapsed_s,
               std::isnan(t.detect_s) ? "" : fmt::format(" (silent for {:.2f} s)", t.detect_s),
               t.message.empty() ? "" : ": " + t.message);
    std::fflush(stdout);
  }

  // A plain line on stderr (logs stay readable under mpirun and ctest), at most every progress_s seconds; with 0,
  // after every case. The ETA assumes the backends still to come take as long as this one.
  void do_progress(const Progress& p) override {
    if (o_.quiet || p.total <= 0 || p.done <= 0) return;
    const int64_t per_case = std::max(o_.trials_per_case, 1);
    const bool case_done = p.done % per_case == 0;
    auto now = std::chrono::steady_clock::now();
    if (o_.progress_s <= 0 ? !case_done : now - last_progress_ < std::chrono::duration<double>(o_.progress_s)) return;
    last_progress_ = now;
    const double per_trial = p.elapsed_s / static_cast<double>(p.done);
    const double eta = per_trial * static_cast<double>(p.total - p.done) +
                       per_trial * static_cast<double>(p.total) * std::max(backends_total_ - backend_index_, 0);
    const int64_t cases = p.total / per_case, k = (p.done + per_case - 1) / per_case;
    std::string trial =
        per_case > 1 && !case_done ? fmt::format(" trial {}/{}", (p.done - 1) % per_case + 1, per_case) : std::string();
    fmt::print(stderr, "# [{} {}/{}] case {}/{}{}: {} elapsed, ETA {}; completed {} deadlocked {} failed {} wrong {}\n",
               p.backend, backend_index_, backends_total_, k, cases, trial, duration(p.elapsed_s), duration(eta),
               p.completed, p.deadlocked, p.failed, p.wrong);
    std::fflush(stderr);
  }

  // nccl-tests' footer (util.cu, writeResultFooter): wrong elements and the mean busbw over every row, out-of-place
  // and in-place alike; then the harness's summary line.
  void do_end_backend(const BackendSummary& s) override {
    for (const RowPair& p : pairer_.flush()) print_pair(p);
    if (available_) {
      const double bw = s.busbw_mean_GBs;
      const char* gate = o_.min_bw_GBs < 0 ? "" : bw < o_.min_bw_GBs * 0.9 || std::isnan(bw) ? "FAILED" : "OK";
      fmt::print("# {:<20} : {} {}\n", "Out of bounds values", s.wrong, s.wrong ? "FAILED" : "OK");
      fmt::print("# {:<20} : {:g} {}\n", "Avg bus bandwidth", bw, gate);
      fmt::print("#\n");
    }
    fmt::print("# {}: {} trials: {} completed, {} deadlocked, {} failed, {} skipped; deadlock rate {:.4f} "
               "(95% CI {:.4f} .. {:.4f}); wrong elements {}: {}; avg bus bandwidth {} GB/s; {:.1f} s\n",
               s.backend, s.trials, s.completed, s.deadlocked, s.failed, s.skipped, s.deadlock_rate, s.ci_low,
               s.ci_high, s.wrong, s.wrong == 0 ? "OK" : "FAILED", num(s.busbw_mean_GBs, 3), s.wall_s);
    summaries_.push_back(s);
    std::fflush(stdout);
  }

  void do_end_run(const std::string& status) override {
    fmt::print("#\n# Summary ({})\n", status);
    fmt::print("# {:<14} {:>7} {:>10} {:>11} {:>7} {:>10} {:>19} {:>8} {:>12}\n", "backend", "trials", "completed",
               "deadlocked", "failed", "rate", "95% CI", "wrong", "busbw(GB/s)");
    for (const auto& s : summaries_)
      fmt::print("# {:<14} {:>7} {:>10} {:>11} {:>7} {:>10.4f} {:>9.4f}..{:<8.4f} {:>8} {:>12}\n", s.backend, s.trials,
                 s.completed, s.deadlocked, s.failed, s.deadlock_rate, s.ci_low, s.ci_high, s.wrong,
                 num(s.busbw_mean_GBs, 3));
    std::fflush(stdout);
  }

  ConsoleOptions o_;
  bool header_printed_ = false, available_ = false;
  bool in_place_columns_ = false, only_in_place_ = false;  // run.in_place: not off; only
  RowPairer pairer_;
  int backend_index_ = 0, backends_total_ = 0;
  std::chrono::steady_clock::time_point last_progress_{};
  std::vector<BackendSummary> summaries_;
};

}  // namespace

std::unique_ptr<Writer> make_console_writer(const ConsoleOptions& options) {
  return std::make_unique<ConsoleWriter>(options);
}

}  // namespace dfccl::harness
