#include "signals.h"

#include <fmt/format.h>
#include <signal.h>

#include <csignal>
#include <cstring>

#include "runtime/run_stop.h"

namespace dfccl::harness {
namespace {

volatile std::sig_atomic_t g_signal = 0;

// Async-signal-safe: one store. SA_RESETHAND restores the default action, so a second signal ends the process.
extern "C" void record_signal(int sig) { g_signal = sig; }

}  // namespace

void install_signal_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = record_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int received_signal() { return g_signal; }

void throw_if_signalled() {
  const int sig = g_signal;
  if (sig == 0) return;
  const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "signal";
  throw RunStopped(fmt::format("interrupted ({})", name), 128 + sig);
}

}  // namespace dfccl::harness
