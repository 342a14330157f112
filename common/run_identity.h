// The identity every DFCCL results file opens with: root attributes naming the tool, its build, when and where it
// ran, how it was invoked and its resolved configuration (docs/hdf5-layout.md). Written by the harness and the
// simulator alike.
#pragma once

#include <string>
#include <string_view>

#include "h5_table.h"

namespace dfccl::h5 {

struct RunIdentity {
  std::string dfccl_version, git_revision, date_utc, hostname, command_line, config;
};

// Writes the root attributes tool, dfccl_version, git_revision, date_utc, hostname, command_line and config of f.
void write_run_identity(File& f, std::string_view tool, const RunIdentity& id);

}  // namespace dfccl::h5
