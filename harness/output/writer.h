// Output formats share one base class (nvbench's printer_base pattern): the driver calls the public, non-virtual
// methods; each format implements the do_* hooks it needs. MultiWriter fans out to several.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "results.h"

namespace dfccl::harness {

struct Progress {
  std::string backend;
  int64_t done = 0, total = 0;  // trials
  int64_t completed = 0, deadlocked = 0, failed = 0, wrong = 0;
  double elapsed_s = 0;
  bool campaign = false;  // several trials per case: worth a progress line
};

class Writer {
 public:
  virtual ~Writer() = default;
  void begin_run(const RunInfo& run) { do_begin_run(run); }
  void begin_backend(const BackendInfo& b) { do_begin_backend(b); }
  void add_case(const CaseRow& row) { do_add_case(row); }
  void add_trial(const TrialRow& row) { do_add_trial(row); }
  // Once per backend, after its communicators exist: every rank's ring hops (none when the library tells none).
  void add_hops(const std::vector<HopRow>& hops) { do_add_hops(hops); }
  // After every finished trial and after every case's rows: what was reported so far must survive the process
  // (the HDF5 file appends and flushes it). so_far: the running backend's summary up to now.
  void checkpoint(const BackendSummary& so_far) { do_checkpoint(so_far); }
  void progress(const Progress& p) { do_progress(p); }
  void end_backend(const BackendSummary& s) { do_end_backend(s); }
  // status: "complete", or why the run stopped early. Called exactly once, also after an error.
  void end_run(const std::string& status) { do_end_run(status); }

 protected:
  virtual void do_begin_run(const RunInfo&) {}
  virtual void do_begin_backend(const BackendInfo&) {}
  virtual void do_add_case(const CaseRow&) {}
  virtual void do_add_trial(const TrialRow&) {}
  virtual void do_add_hops(const std::vector<HopRow>&) {}
  virtual void do_checkpoint(const BackendSummary&) {}
  virtual void do_progress(const Progress&) {}
  virtual void do_end_backend(const BackendSummary&) {}
  virtual void do_end_run(const std::string&) {}
};

class MultiWriter final : public Writer {
 public:
  void add(std::unique_ptr<Writer> w) { writers_.push_back(std::move(w)); }

 private:
  void do_begin_run(const RunInfo& r) override {
    for (auto& w : writers_) w->begin_run(r);
  }
  void do_begin_backend(const BackendInfo& b) override {
    for (auto& w : writers_) w->begin_backend(b);
  }
  void do_add_case(const CaseRow& r) override {
    for (auto& w : writers_) w->add_case(r);
  }
  void do_add_trial(const TrialRow& r) override {
    for (auto& w : writers_) w->add_trial(r);
  }
  void do_add_hops(const std::vector<HopRow>& h) override {
    for (auto& w : writers_) w->add_hops(h);
  }
  void do_checkpoint(const BackendSummary& s) override {
    for (auto& w : writers_) w->checkpoint(s);
  }
  void do_progress(const Progress& p) override {
    for (auto& w : writers_) w->progress(p);
  }
  void do_end_backend(const BackendSummary& s) override {
    for (auto& w : writers_) w->end_backend(s);
  }
  void do_end_run(const std::string& s) override {
    for (auto& w : writers_) w->end_run(s);
  }
  std::vector<std::unique_ptr<Writer>> writers_;
};

struct ConsoleOptions {
  bool quiet = false;       // no per-trial lines, no progress line
  double progress_s = 5;    // seconds between progress lines (0: after every case)
  int trials_per_case = 1;  // run.trials: turns Progress's trial counts into case counts
  double min_bw_GBs = -1;   // NCCL_TESTS_MIN_BW (< 0: unchecked): the footer's OK/FAILED, as nccl-tests
};

// nccl-tests' table on stdout with nccl-tests' footer per backend, a progress line on stderr, a summary at the end.
std::unique_ptr<Writer> make_console_writer(const ConsoleOptions& options);
// -J: the run as JSON, shaped after nccl-tests' -J output (json_writer.cpp); min_bw_GBs as in ConsoleOptions.
std::unique_ptr<Writer> make_json_writer(const std::string& path, double min_bw_GBs);
// One self-describing HDF5 file, created at begin_run, written whole at every end of backend and end of run and at a
// checkpoint when due (h5::File::flush; `image_spacing` 0: at every checkpoint), so a killed run leaves a readable
// file with every row reported before its last written checkpoint.
std::unique_ptr<Writer> make_hdf5_writer(const std::string& path, double image_spacing = 10);

}  // namespace dfccl::harness
