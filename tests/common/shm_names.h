// Names the library makes in /dev/shm, for tests that check what an init leaves behind.
#pragma once

#include <dirent.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bootstrap/unique_id.h"  // the token's place in the id (lib/src: the test's include path must have it)
#include "dfccl.h"

namespace dfccl::test {

// The bootstrap segments of unique id `id` in /dev/shm, of any host: /dfccl-bs-<token>-<host hash>
// (lib/src/bootstrap/bootstrap.cpp, open_segment).
inline std::vector<std::string> bootstrap_segments(const dfcclUniqueId& id) {
  UniqueIdData d{};
  static_assert(sizeof(d) <= sizeof(id.internal));
  __builtin_memcpy(&d, id.internal, sizeof(d));
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "dfccl-bs-%016llx-", static_cast<unsigned long long>(d.token));
  std::vector<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (const dirent* e = readdir(dir))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) names.push_back(e->d_name);
    closedir(dir);
  }
  return names;
}

}  // namespace dfccl::test
