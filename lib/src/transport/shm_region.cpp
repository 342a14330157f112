#include "transport/shm_region.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "util/error.h"
#include "util/process.h"

namespace dfccl {

namespace {

// Region names: /dfccl-rg-<pid namespace, hex>-<creator pid>-<device>-<counter>.
constexpr const char* kRegionPrefix = "dfccl-rg-";

// Removes the regions whose creator, a process of this pid namespace, has exited. A region's name goes once every
// peer has mapped it; one whose creator was killed during its init stays otherwise until the host reboots. Peers
// that still map it keep their mapping; a peer that has not mapped it yet fails its init as it would anyway (the
// creator is gone).
void remove_orphan_regions(uint64_t pidns) {
  if (pidns == 0) return;
  const std::string ours = fmt::format("{}{:x}-", kRegionPrefix, pidns);
  remove_dev_shm_orphans(
      [&](const std::string& n) {
        if (!n.starts_with(ours)) return false;
        const long pid = std::strtol(n.c_str() + ours.size(), nullptr, 10);
        return pid > 0 && process_exited(pid_t(pid));
      },
      "a connection region whose process is gone");
}

}  // namespace

RegionBlob shm_region_create(int device, size_t bytes, const char* who) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t pidns = pid_namespace();
  remove_orphan_regions(pidns);
  RegionBlob blob{};
  const std::string name =
      fmt::format("/{}{:x}-{}-{}-{}", kRegionPrefix, pidns, getpid(), device, counter.fetch_add(1));
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw_system(fmt::format("{}: shm_open {}", who, name));
  // The pages are reserved now: a /dev/shm without room for them (a container's is often 64 MiB) is an error here,
  // not a SIGBUS when the region is first written.
  if (const int e = posix_fallocate(fd, 0, off_t(bytes)); e != 0) {
    close(fd);
    shm_unlink(name.c_str());
    errno = e;
    throw_system(fmt::format("{}: /dev/shm has no room for {} bytes ({}; enlarge it, e.g. docker run --shm-size)", who,
                             bytes, name));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    throw_system(fmt::format("{}: mmap {}", who, name));
  }
  blob.pid = uint32_t(getpid());
  blob.device = device;
  blob.ptr = reinterpret_cast<uint64_t>(p);
  blob.bytes = bytes;
  std::snprintf(blob.handle, sizeof(blob.handle), "%s", name.c_str());
  return blob;
}

void* shm_region_map(const RegionBlob& blob, const char* who) {
  int fd = shm_open(blob.handle, O_RDWR, 0600);
  if (fd < 0) throw_system(fmt::format("{}: shm_open {} (peer region)", who, blob.handle));
  void* p = mmap(nullptr, blob.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) throw_system(fmt::format("{}: mmap {} (peer region)", who, blob.handle));
  return p;
}

void shm_region_unmap(void* p, const RegionBlob& blob) { munmap(p, blob.bytes); }

void shm_region_free(const RegionBlob& blob) {
  munmap(reinterpret_cast<void*>(blob.ptr), blob.bytes);
  shm_unlink(blob.handle);
}

void shm_region_unlink(const RegionBlob& blob) { shm_unlink(blob.handle); }

}  // namespace dfccl
