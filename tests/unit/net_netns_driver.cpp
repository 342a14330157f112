// net_netns_driver <UCX_TLS> <command...>: the parent side of net_transport_peer's "exchange" scenario, with the peer
// started by <command...> (for tests/netns/: `ip netns exec ... net_transport_peer exchange tcp`, so that the two
// transports are on different fake hosts). Addresses go through the child's stdin and stdout; then kSizes messages
// each way (0 bytes to 6 MiB), checked byte by byte on both sides, and kBye.
// Exit codes: 0 right, 1 set-up error or a failed request, 3 wrong data (here or in the peer), 77 built without UCX.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "net_test_util.h"

namespace {

using namespace dfccl;
using namespace dfccl::nettest;
using namespace std::chrono_literals;

int fail(const std::string& why) {
  std::fprintf(stderr, "net_netns_driver: %s\n", why.c_str());
  return 1;
}

struct Child {
  pid_t pid = -1;
  int to = -1, from = -1;
};

Child spawn(char** argv) {
  int in[2], out[2];
  Child c;
  if (pipe(in) != 0 || pipe(out) != 0) return c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  c.to = in[1];
  c.from = out[0];
  return c;
}

// The child's "ADDR <hex>" line within 20 s ("" if none).
std::string read_line(int fd) {
  std::string line;
  char ch;
  for (const auto deadline = Clock::now() + 20s; Clock::now() < deadline;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    if (read(fd, &ch, 1) != 1 || ch == '\n') break;
    line += ch;
  }
  return line;
}

// Sends every message of kSizes, receives every answer and checks it; 0, 1 (a failed request) or 3 (wrong data).
int exchange(net::Transport& t, net::Peer peer) {
  std::vector<std::vector<std::uint8_t>> out(kSizes.size()), in(kSizes.size());
  std::vector<net::Req> reqs;
  for (std::size_t k = 0; k < kSizes.size(); ++k) {
    out[k] = payload(kToChild + k, kSizes[k]);
    in[k].assign(kSizes[k], 0);
    auto s = t.isend(peer, kToChild + k, out[k].data(), out[k].size());
    auto r = t.irecv(kToParent + k, net::tags::kExact, in[k].data(), in[k].size());
    if (!s.ok() || !r.ok()) return fail("posting: " + s.status.message + r.status.message);
    reqs.push_back(s.value);
    reqs.push_back(r.value);
  }
  const auto done = drive(t, reqs, 25s);
  for (std::size_t k = 0; k < kSizes.size(); ++k) {
    for (std::size_t j : {2 * k, 2 * k + 1})
      if (done[j].code != net::Code::kOk)
        return fail("message " + std::to_string(k) + ": " + net::code_name(done[j].code) + " " + done[j].message);
    if (done[2 * k + 1].bytes != kSizes[k] || first_mismatch(in[k].data(), kSizes[k], kToParent + k) >= 0) return 3;
  }
  auto bye = t.isend(peer, kBye, nullptr, 0);
  return bye.ok() && drive(t, {bye.value}, 10s)[0].code == net::Code::kOk ? 0 : fail("kBye was not delivered");
}

// The child's exit status within 20 s, progressing `t` meanwhile (its close needs this side); -1 if it hung.
int wait_child(net::Transport& t, pid_t pid) {
  int status = 0;
  for (const auto deadline = Clock::now() + 20s; Clock::now() < deadline;) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    progress_for(t, 20ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: net_netns_driver <UCX_TLS> <command...>");
  auto made = net::make_transport(options_for(argv[1]));
  if (!made.ok()) {
    std::printf("SKIP: %s\n", made.status.message.c_str());
    return made.status.code == net::Code::kUnsupported ? 77 : 1;
  }
  net::Transport& t = *made.value;
  const Child c = spawn(argv + 2);
  if (c.pid <= 0) return fail("cannot start the peer");
  const std::string line = read_line(c.from);
  if (line.rfind("ADDR ", 0) != 0) return fail("no address from the peer: '" + line + "'");
  auto peer = t.connect(from_hex(line.substr(5)), "peer");
  if (!peer.ok()) return fail(peer.status.message);
  const std::string mine = "ADDR " + to_hex(t.address()) + "\n";
  if (write(c.to, mine.data(), mine.size()) != ssize_t(mine.size())) return fail("cannot write to the peer");
  const int rc = exchange(t, peer.value);
  const int child = wait_child(t, c.pid);
  std::printf("exchange: %s; peer exit status %d\n", rc == 0 ? "right" : "WRONG", child);
  return rc != 0 ? rc : child == 0 ? 0 : child == 3 ? 3 : 1;
}
