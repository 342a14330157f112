// Names of the harness's own threads, as top -H, ps -L and gdb show them (the library's: lib/src/util/thread_name.h).
#pragma once

#include <pthread.h>

namespace dfccl::harness {

// Caller: the first statement of every thread body the harness starts. `name`: "dfccl-<role>", at most 15
// characters (the kernel's limit; longer names are refused and the thread keeps the process's name).
inline void name_this_thread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace dfccl::harness
