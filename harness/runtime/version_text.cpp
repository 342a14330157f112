#include "version_text.h"

#include <fmt/format.h>

#include <cctype>
#include <sstream>

namespace dfccl::harness {

std::string nvidia_module_version(const std::string& first_line) {
  const std::string key = "NVRM version:";
  const size_t at = first_line.find(key);
  if (at == std::string::npos) return "";
  std::istringstream words(first_line.substr(at + key.size()));
  for (std::string w; words >> w;) {
    const bool digits_and_dots = std::isdigit(static_cast<unsigned char>(w.front())) &&
                                 w.find_first_not_of("0123456789.") == std::string::npos &&
                                 w.find('.') != std::string::npos;
    if (digits_and_dots) return w;
  }
  return "";
}

std::string nccl_version_text(int code) {
  if (code >= 20900) return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100);
}

bool recorded_variable(const std::string& name) {
  for (const char* prefix : {"DFCCL_", "NCCL_", "CUDA_", "OMPI_COMM_WORLD_", "SLURM_"})
    if (name.starts_with(prefix)) return true;
  return name == "PMIX_RANK";
}

}  // namespace dfccl::harness
