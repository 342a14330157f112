// net_transport_peer <scenario> <UCX_TLS>: the other process of net_transport_test. It prints "ADDR <hex>" (its
// transport's address) on stdout, reads the parent's "ADDR <hex>" from stdin, connects, then runs the scenario:
//   exchange  receive the parent's kSizes messages (posted late, in reverse order), check them, answer each in
//             order, wait for kBye, close; exit 0 when every message was right
//   idle      answer kHello, then only progress until kBye (the parent kills or stops it meanwhile)
// Every wait is bounded: the process exits by itself after 30 s. Exit 1: usage or set-up error; 3: wrong data.
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>

#include "net_test_util.h"

namespace {

using namespace dfccl;
using namespace dfccl::nettest;
using namespace std::chrono_literals;

// Reads one line from stdin within `timeout` ("" on timeout or end of file).
std::string read_line(std::chrono::milliseconds timeout) {
  std::string line;
  const auto deadline = Clock::now() + timeout;
  char c;
  while (Clock::now() < deadline) {
    pollfd p{0, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    if (read(0, &c, 1) != 1) return "";
    if (c == '\n') return line;
    line += c;
  }
  return "";
}

int fail(const std::string& why) {
  std::fprintf(stderr, "net_transport_peer: %s\n", why.c_str());
  return 1;
}

bool wait_tag(net::Transport& t, Tag tag, std::chrono::milliseconds timeout) {
  auto r = t.irecv(tag, net::tags::kExact, nullptr, 0);
  return r.ok() && drive(t, {r.value}, timeout)[0].code == net::Code::kOk;
}

int exchange(net::Transport& t, net::Peer parent) {
  progress_for(t, 300ms);  // the parent's messages wait in the unexpected queue
  std::vector<std::vector<std::uint8_t>> bufs(kSizes.size());
  std::vector<net::Req> reqs(kSizes.size());
  for (std::size_t k = kSizes.size(); k-- > 0;) {
    bufs[k].assign(kSizes[k], 0);
    auto r = t.irecv(kToChild + k, net::tags::kExact, bufs[k].data(), bufs[k].size());
    if (!r.ok()) return fail("irecv: " + r.status.message);
    reqs[k] = r.value;
  }
  const auto done = drive(t, reqs, 20s);
  for (std::size_t k = 0; k < kSizes.size(); ++k) {
    if (done[k].code != net::Code::kOk || done[k].bytes != kSizes[k] || done[k].tag != kToChild + k ||
        first_mismatch(bufs[k].data(), kSizes[k], kToChild + k) >= 0) {
      std::fprintf(stderr, "net_transport_peer: message %zu: %s, %zu bytes\n", k, net::code_name(done[k].code),
                   done[k].bytes);
      return 3;
    }
  }
  std::vector<std::vector<std::uint8_t>> out(kSizes.size());
  std::vector<net::Req> sends;
  for (std::size_t k = 0; k < kSizes.size(); ++k) {
    out[k] = payload(kToParent + k, kSizes[k]);
    auto r = t.isend(parent, kToParent + k, out[k].data(), out[k].size());
    if (!r.ok()) return fail("isend: " + r.status.message);
    sends.push_back(r.value);
  }
  for (const auto& c : drive(t, sends, 20s))
    if (c.code != net::Code::kOk) return fail(std::string("send: ") + net::code_name(c.code) + " " + c.message);
  if (!wait_tag(t, kBye, 20s)) return fail("no kBye from the parent");
  const net::Status st = t.close(parent, net::CloseMode::kFlush, 2s);
  return st.ok() ? 0 : fail("close: " + st.message);
}

int idle(net::Transport& t, net::Peer parent) {
  if (!wait_tag(t, kHello, 20s)) return fail("no kHello from the parent");
  auto s = t.isend(parent, kHello, nullptr, 0);
  if (!s.ok() || drive(t, {s.value}, 10s)[0].code != net::Code::kOk) return fail("answering kHello failed");
  return wait_tag(t, kBye, 30s) ? 0 : fail("no kBye within 30 s");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return fail("usage: net_transport_peer exchange|idle <UCX_TLS>");
  const std::string scenario = argv[1];
  auto made = net::make_transport(options_for(argv[2]));
  if (!made.ok()) return fail(made.status.message);
  net::Transport& t = *made.value;
  std::cout << "ADDR " << to_hex(t.address()) << std::endl;
  const std::string line = read_line(20s);
  if (line.rfind("ADDR ", 0) != 0) return fail("no address from the parent");
  auto parent = t.connect(from_hex(line.substr(5)), "parent");
  if (!parent.ok()) return fail(parent.status.message);
  if (scenario == "exchange") return exchange(t, parent.value);
  if (scenario == "idle") return idle(t, parent.value);
  return fail("unknown scenario " + scenario);
}
