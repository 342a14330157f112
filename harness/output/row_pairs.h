// nccl-tests prints a size's out-of-place and in-place measurements on one line (and in one -J result). The driver
// reports them as separate case rows, a case's out-of-place rows before its in-place twin's (runtime/driver.cpp,
// make_cases). RowPairer joins them for the console and JSON writers: each in-place row with the waiting
// out-of-place row of the same measurement (collective, entry, group, size, type, ...). A row whose twin never comes
// (its case had no completed trial, or run.in_place is off or only) comes out alone.
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "results.h"

namespace dfccl::harness {

struct RowPair {
  std::optional<CaseRow> out_of_place, in_place;  // at least one is set
  const CaseRow& first() const { return out_of_place ? *out_of_place : *in_place; }
};

class RowPairer {
 public:
  // pairs: in-place twins will come (run.in_place both); otherwise every row comes out at once, alone.
  explicit RowPairer(bool pairs = false) : pairs_(pairs) {}

  // The pairs complete once `row` is added, in report order.
  std::vector<RowPair> add(const CaseRow& row) {
    std::vector<RowPair> out;
    if (!row.in_place) {
      if (!waiting_.empty() && waiting_.front().case_index != row.case_index) flush_into(out);
      if (pairs_) waiting_.push_back(row);
      else out.push_back({row, std::nullopt});
      return out;
    }
    auto twin = std::find_if(waiting_.begin(), waiting_.end(), [&](const CaseRow& o) { return same(o, row); });
    if (twin == waiting_.end()) {
      flush_into(out);
      out.push_back({std::nullopt, row});
      return out;
    }
    for (auto it = waiting_.begin(); it != twin; ++it) out.push_back({*it, std::nullopt});  // their twins are gone
    out.push_back({*twin, row});
    waiting_.erase(waiting_.begin(), twin + 1);
    return out;
  }

  // The rows still waiting (at the end of a backend), alone.
  std::vector<RowPair> flush() {
    std::vector<RowPair> out;
    flush_into(out);
    return out;
  }

 private:
  static bool same(const CaseRow& a, const CaseRow& b) {
    return a.coll == b.coll && a.entry == b.entry && a.group == b.group && a.label == b.label && a.dtype == b.dtype &&
           a.op == b.op && a.root == b.root && a.priority == b.priority && a.nranks == b.nranks && a.count == b.count &&
           a.bytes == b.bytes && a.time_kind == b.time_kind;
  }
  void flush_into(std::vector<RowPair>& out) {
    for (const CaseRow& r : waiting_) out.push_back({r, std::nullopt});
    waiting_.clear();
  }

  bool pairs_;
  std::vector<CaseRow> waiting_;  // out-of-place rows of the last case, waiting for their in-place twins
};

}  // namespace dfccl::harness
