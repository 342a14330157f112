#include "util/thread_name.h"

#include <pthread.h>

#include <cstdio>

namespace dfccl {

void name_this_thread(const char* role) {
  char name[16];  // the kernel's limit, with the terminating zero
  std::snprintf(name, sizeof name, "dfccl-%s", role);
  pthread_setname_np(pthread_self(), name);
}

void name_this_thread(const char* role, unsigned n) {
  char with_n[16];
  std::snprintf(with_n, sizeof with_n, "%s%u", role, n);
  name_this_thread(with_n);
}

}  // namespace dfccl
