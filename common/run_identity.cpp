#include "run_identity.h"

namespace dfccl::h5 {

void write_run_identity(File& f, std::string_view tool, const RunIdentity& id) {
  f.set_attr("/", "tool", std::string(tool));
  f.set_attr("/", "dfccl_version", id.dfccl_version);
  f.set_attr("/", "git_revision", id.git_revision);
  f.set_attr("/", "date_utc", id.date_utc);
  f.set_attr("/", "hostname", id.hostname);
  f.set_attr("/", "command_line", id.command_line);
  f.set_attr("/", "config", id.config);
}

}  // namespace dfccl::h5
