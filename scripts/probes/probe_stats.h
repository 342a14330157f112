// What the latency probes print from a run: medians, and the engine's counters between two dfcclGetStats.
#pragma once

#include <algorithm>
#include <cstdio>
#include <vector>

#include "dfccl.h"

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Primitives per collective, the share of collectives whose descriptor block 0 found prefetched, and, with a
// -DDFCCL_PROFILE=1 libdfccl, thread 0's time per phase per collective summed over all blocks (us). The daemon adds
// its counters when it exits: take both snapshots while it is idle.
inline void print_stats_delta(const char* label, const dfcclStats_t& a, const dfcclStats_t& b, double ncoll) {
  static const char* names[dfcclNumProfilePhases] = {"check", "move", "post", "program", "poll", "exit", "launch"};
  std::printf("  %s: %.1f primitives per collective, %.0f %% prefetched", label,
              double(b.primitives - a.primitives) / ncoll, 100.0 * double(b.descPrefetched - a.descPrefetched) / ncoll);
  if (b.profileNs[dfcclProfileLaunch] > a.profileNs[dfcclProfileLaunch]) {
    std::printf("; profile per collective, all blocks (us):");
    for (int k = 0; k < dfcclNumProfilePhases; ++k)
      std::printf(" %s %.2f", names[k], double(b.profileNs[k] - a.profileNs[k]) / 1e3 / ncoll);
  }
  std::printf("\n");
}
