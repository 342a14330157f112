// The message parse_workload throws for a workload text ("" when it parses), shared by the tests of workload
// errors (each checks that the message names the bad key).
#pragma once

#include <string>

#include "config/workload.h"

namespace dfccl::harness::test {

inline std::string error_of(const std::string& text, const Overrides& o = {}) {
  try {
    parse_workload(text, "test.toml", o);
  } catch (const WorkloadError& e) {
    return e.what();
  }
  return "";
}

}  // namespace dfccl::harness::test
