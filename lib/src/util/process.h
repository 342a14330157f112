// Processes as seen from this one: which pid namespace a pid belongs to, and whether a pid has exited. Used to judge
// /dev/shm segments left by killed processes (a name or a claim carries its creator's pid and namespace).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

namespace dfccl {

// The inode of this process's pid namespace: a pid recorded with the same value names a process of this namespace.
// 0 when /proc cannot tell (then no pid can be judged).
uint64_t pid_namespace();
// Whether `pid`, a process of this pid namespace, has exited (kill(pid, 0) says no such process). A pid that exists,
// or that this process may not signal, counts as alive.
bool process_exited(pid_t pid);
// Removes each name in /dev/shm for which orphan(name) holds (name without the leading '/'), logging each removal at
// INFO as "removed /dev/shm/<name>, <what>". The names are judged first, then removed.
void remove_dev_shm_orphans(const std::function<bool(const std::string& name)>& orphan, const char* what);

}  // namespace dfccl
