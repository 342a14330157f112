#include "transport/connection.h"

#include <vector>

namespace dfccl {

bool credits_returned(Executor& ex, const core::CommStatic& s) {
  const size_t n = size_t(s.nchan) * s.nlanes;  // (channel, lane) rows: the region's control words and lane states
  std::vector<core::LaneCtrl> ctrl(n);
  std::vector<core::LaneState> lanes(n);
  ex.copy_from_device(ctrl.data(), s.self, n * sizeof(core::LaneCtrl));
  ex.copy_from_device(lanes.data(), s.lanes, n * sizeof(core::LaneState));
  for (size_t i = 0; i < n; ++i)
    if (ctrl[i].head != lanes[i].sent) return false;
  return true;
}

}  // namespace dfccl
