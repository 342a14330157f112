// Files through which a test's peer processes hand each other words (a unique id, an event's time, a release): one
// writes a file whole, another waits for it to appear.
#pragma once

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace dfccl::test {

// Writes `text` to `path` atomically (a temporary name, then rename), so that a reader sees all of it or nothing.
inline void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  std::rename(tmp.c_str(), path.c_str());
}

// The content of `path`, waiting up to `wait_ms` for it to appear; "" if it did not.
inline std::string read_file(const std::string& path, int wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    std::ifstream f(path);
    if (f) {
      std::stringstream s;
      s << f.rdbuf();
      return s.str();
    }
    if (std::chrono::steady_clock::now() > deadline) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace dfccl::test
