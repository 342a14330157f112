// `-J FILE`: the run as one JSON document, shaped after nccl-tests' -J output (per result row: size, count, type,
// redop, root, an "out_of_place" and an "in_place" object with time, alg_bw, bus_bw, nwrong, null for a measurement
// not made (run.in_place off or only, or no completed trial); per backend: "out_of_bounds" and
// "average_bus_bandwidth"), with the harness's extra fields, which describe the result's first measurement, and the
// run's hosts ("hosts", "nhosts", "rank_hosts") and each dfccl backend's ring hops ("hops", as /backends/<b>/hops).
// The file is rewritten (through FILE.tmp and a rename) after every backend and at the end; "status" is "running"
// until then. NaN and infinities are written as null.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "row_pairs.h"
#include "writer.h"

namespace dfccl::harness {
namespace {

std::string jstr(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}
std::string jnum(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }
std::string jint(int64_t v) { return fmt::format("{}", v); }
std::string jbool(bool v) { return v ? "true" : "false"; }
std::string jlist(const std::vector<std::string>& items) {
  return "[" + fmt::format("{}", fmt::join(items, ", ")) + "]";
}
std::string jstrings(const std::vector<std::string>& v) {
  std::vector<std::string> items;
  for (const auto& s : v) items.push_back(jstr(s));
  return jlist(items);
}

// A JSON object built field by field; values are JSON text.
class Obj {
 public:
  Obj& add(const std::string& key, const std::string& json) {
    text_ += fmt::format("{}{}: {}", text_.empty() ? "" : ", ", jstr(key), json);
    return *this;
  }
  std::string str() const { return "{" + text_ + "}"; }

 private:
  std::string text_;
};

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// One measurement's object, or null.
std::string measurement_json(const std::optional<CaseRow>& c) {
  if (!c) return "null";
  Obj m;
  m.add("time", jnum(c->time_median_us))
      .add("alg_bw", jnum(c->algbw_GBs))
      .add("bus_bw", jnum(c->busbw_GBs))
      .add("nwrong", c->wrong < 0 ? "null" : jint(c->wrong));
  return m.str();
}

std::string result_json(const RowPair& p) {
  const CaseRow& c = p.first();
  Obj o;
  o.add("size", jint(c.bytes)).add("count", jint(c.count)).add("type", jstr(c.dtype)).add("redop", jstr(c.op));
  o.add("root", jint(c.root)).add("out_of_place", measurement_json(p.out_of_place));
  o.add("in_place", measurement_json(p.in_place));
  o.add("coll", jstr(c.coll)).add("group", jstr(c.group)).add("label", jstr(c.label)).add("entry", jint(c.entry));
  o.add("case", jint(c.case_index)).add("priority", jint(c.priority)).add("nranks", jint(c.nranks));
  o.add("time_kind", jstr(c.time_kind)).add("samples", jint(c.samples));
  o.add("time_min_us", jnum(c.time_min_us)).add("time_median_us", jnum(c.time_median_us));
  o.add("time_mean_us", jnum(c.time_mean_us)).add("time_max_us", jnum(c.time_max_us)).add("cv", jnum(c.cv));
  o.add("e2e_median_us", jnum(c.e2e_median_us)).add("core_median_us", jnum(c.core_median_us));
  o.add("preemptions", jint(c.preemptions));
  return o.str();
}

std::string trial_json(const TrialRow& t) {
  Obj o;
  o.add("case", jint(t.case_index)).add("trial", jint(t.trial)).add("status", jstr(t.status));
  o.add("elapsed_s", jnum(t.elapsed_s)).add("detect_s", jnum(t.detect_s)).add("message", jstr(t.message));
  return o.str();
}

class JsonWriter final : public Writer {
 public:
  JsonWriter(std::string path, double min_bw_GBs) : path_(std::move(path)), min_bw_(min_bw_GBs) {}

 private:
  void do_begin_run(const RunInfo& r) override {
    Obj o;
    o.add("version", "1").add("tool", jstr("dfccl-harness")).add("dfccl_version", jstr(r.dfccl_version));
    o.add("git_revision", jstr(r.git_revision)).add("start_time", jstr(r.date_utc));
    o.add("command_line", jstr(r.command_line)).add("workload", jstr(r.workload));
    o.add("workload_kind", jstr(r.workload_kind)).add("nranks", jint(r.nranks)).add("layout", jstr(r.layout));
    o.add("hosts", jstrings(r.hosts)).add("nhosts", jint(static_cast<int64_t>(r.hosts.size())));
    o.add("rank_hosts", jstrings(r.rank_hosts));
    o.add("gpus", jstrings(r.gpus)).add("driver_version", jstr(r.driver_version));
    o.add("cuda_runtime_version", jstr(r.cuda_runtime_version)).add("nccl_version", jstr(r.nccl_version));
    o.add("mpi_version", jstr(r.mpi_version));
    o.add("time_statistic", jstr("median over timed iterations of the slowest rank's time (MAX over ranks)"));
    o.add("in_place", jstr(r.in_place));  // run.in_place: both | off | only
    pairs_ = r.in_place == "both";
    head_ = o;
    write("running");
  }

  void do_begin_backend(const BackendInfo& b) override {
    backend_ = Obj();
    backend_.add("backend", jstr(b.name)).add("executor", jstr(b.executor)).add("mode", jstr(b.mode));
    backend_.add("completion", jstr(b.completion)).add("timing", jstr(b.timing));
    backend_.add("available", jbool(b.available)).add("skip_reason", jstr(b.skip_reason));
    results_.clear();
    trials_.clear();
    pairer_ = RowPairer(pairs_);
  }

  void do_add_case(const CaseRow& c) override {
    for (const RowPair& p : pairer_.add(c)) results_.push_back(result_json(p));
  }

  void do_add_hops(const std::vector<HopRow>& hops) override {
    std::vector<std::string> items;
    for (const HopRow& h : hops)
      items.push_back(Obj()
                          .add("group", jstr(h.group))
                          .add("rank", jint(h.rank))
                          .add("peer", jint(h.peer))
                          .add("transport", jstr(h.transport))
                          .add("host", jstr(h.host))
                          .add("peer_host", jstr(h.peer_host))
                          .str());
    backend_.add("hops", jlist(items));
  }

  void do_add_trial(const TrialRow& t) override {
    if (t.status != "completed") trials_.push_back(trial_json(t));
  }

  void do_end_backend(const BackendSummary& s) override {
    for (const RowPair& p : pairer_.flush()) results_.push_back(result_json(p));
    Obj b = backend_;
    b.add("results", jlist(results_)).add("trials_not_completed", jlist(trials_));
    b.add("out_of_bounds", Obj().add("count", jint(s.wrong)).add("okay", jbool(s.wrong == 0)).str());
    const std::string okay =
        min_bw_ < 0 ? jstr("unchecked") : jbool(!(s.busbw_mean_GBs < min_bw_ * 0.9) && !std::isnan(s.busbw_mean_GBs));
    b.add("average_bus_bandwidth", Obj().add("bandwidth", jnum(s.busbw_mean_GBs)).add("okay", okay).str());
    Obj sum;
    sum.add("trials", jint(s.trials)).add("completed", jint(s.completed)).add("deadlocked", jint(s.deadlocked));
    sum.add("failed", jint(s.failed)).add("skipped", jint(s.skipped)).add("wrong", jint(s.wrong));
    sum.add("deadlock_rate", jnum(s.deadlock_rate)).add("ci_low", jnum(s.ci_low)).add("ci_high", jnum(s.ci_high));
    sum.add("busbw_mean_GBs", jnum(s.busbw_mean_GBs)).add("wall_s", jnum(s.wall_s));
    b.add("summary", sum.str());
    backends_.push_back(b.str());
    write("running");
  }

  void do_end_run(const std::string& status) override { write(status); }

  // The whole document, through path.tmp and a rename.
  void write(const std::string& status) {
    Obj doc = head_;
    doc.add("backends", jlist(backends_)).add("status", jstr(status)).add("end_time", jstr(now_utc()));
    const std::string tmp = path_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << doc.str() << "\n";
      if (!out) throw std::runtime_error(fmt::format("-J {}: cannot write {}", path_, tmp));
    }
    std::filesystem::rename(tmp, path_);
  }

  std::string path_;
  double min_bw_;
  Obj head_, backend_;
  std::vector<std::string> results_, trials_, backends_;
  bool pairs_ = false;  // run.in_place both: in-place rows join their out-of-place twins
  RowPairer pairer_;
};

}  // namespace

std::unique_ptr<Writer> make_json_writer(const std::string& path, double min_bw_GBs) {
  return std::make_unique<JsonWriter>(path, min_bw_GBs);
}

}  // namespace dfccl::harness
