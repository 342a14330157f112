// The network transport (lib/src/net/transport.h) on UCX, once over UCX_TLS=tcp,self and once over sm,self: between
// two transports driven by two threads, and between this process and net_transport_peer (a second process, its
// address exchanged through pipes). Skipped (exit 77) when the library was built without UCX.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include "net_test_util.h"

namespace {

using namespace dfccl;
using namespace dfccl::nettest;
using namespace std::chrono_literals;
using net::Code;

long ms_since(Clock::time_point t0) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
}

// Runs f(stop) on its own thread. `stop` turns true when the Side is destroyed, which then joins; done() turns true
// when f returned. Both transports of a pair must progress until the other side is done (connections are
// established, and rendezvous data moves, only while both progress).
class Side {
 public:
  explicit Side(std::function<void(const std::atomic<bool>&)> f)
      : thread_([this, f = std::move(f)] {
          f(stop_);
          done_ = true;
        }) {}
  ~Side() {
    stop_ = true;
    thread_.join();
  }
  const std::atomic<bool>& done() const { return done_; }

 private:
  std::atomic<bool> stop_{false}, done_{false};
  std::thread thread_;
};

// Progresses `t` until `flag` is true (at most 30 s).
void progress_until(net::Transport& t, const std::atomic<bool>& flag) {
  const auto deadline = Clock::now() + 30s;
  while (!flag && Clock::now() < deadline) progress_for(t, 1ms);
}

std::unique_ptr<net::Transport> make(const std::string& tls) {
  auto r = net::make_transport(options_for(tls));
  EXPECT_TRUE(r.ok()) << r.status.message;
  return std::move(r.value);
}

// Posts one send per (tag, data) and drives them to completion within 20 s; every outcome must be kOk.
void send_all(net::Transport& t, net::Peer to, const std::vector<std::pair<Tag, std::vector<std::uint8_t>>>& msgs) {
  std::vector<net::Req> reqs;
  for (const auto& [tag, data] : msgs) {
    auto r = t.isend(to, tag, data.empty() ? nullptr : data.data(), data.size());
    ASSERT_TRUE(r.ok()) << r.status.message;
    reqs.push_back(r.value);
  }
  for (const auto& c : drive(t, reqs, 20s)) EXPECT_EQ(c.code, Code::kOk) << c.message;
}

// Two transports, each connected to the other: `a` is driven by the test's thread, `b` by a Side.
class NetTransport : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    a_ = make(GetParam());
    b_ = make(GetParam());
    ASSERT_TRUE(a_ && b_);
    auto ab = a_->connect(b_->address(), "b");
    auto ba = b_->connect(a_->address(), "a");
    ASSERT_TRUE(ab.ok() && ba.ok()) << ab.status.message << ba.status.message;
    to_b_ = ab.value;
    to_a_ = ba.value;
  }
  std::unique_ptr<net::Transport> a_, b_;
  net::Peer to_b_, to_a_;
};

std::string tls_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param.empty() ? "default" : info.param.substr(0, info.param.find(','));
}

// Out of order: b posts the receives of kSizes's messages in reverse order, half of them only after the messages
// arrived (unexpected queue). In order: messages with one tag match the receives of that tag in send order.
TEST_P(NetTransport, ThreadsOrderedAndOutOfOrderTags) {
  const Tag same = net::tags::make(5, 0, 0, 77);
  constexpr std::size_t kSame = 8;
  Side b([&](const std::atomic<bool>&) {
    net::Transport& t = *b_;
    std::vector<std::vector<std::uint8_t>> bufs(kSizes.size() + kSame);
    std::vector<net::Req> reqs(bufs.size());
    auto post = [&](std::size_t k, Tag tag, std::size_t bytes) {
      bufs[k].assign(bytes, 0xee);
      auto r = t.irecv(tag, net::tags::kExact, bufs[k].data(), bytes);
      ASSERT_TRUE(r.ok()) << r.status.message;
      reqs[k] = r.value;
    };
    for (std::size_t k = kSizes.size(); k-- > kSizes.size() / 2;) post(k, kToChild + k, kSizes[k]);
    progress_for(t, 200ms);
    for (std::size_t k = kSizes.size() / 2; k-- > 0;) post(k, kToChild + k, kSizes[k]);
    for (std::size_t j = 0; j < kSame; ++j) post(kSizes.size() + j, same, 16);
    const auto done = drive(t, reqs, 20s);
    for (std::size_t k = 0; k < kSizes.size(); ++k) {
      EXPECT_EQ(done[k].code, Code::kOk) << "message " << k << ": " << done[k].message;
      EXPECT_EQ(done[k].bytes, kSizes[k]) << "message " << k;
      EXPECT_EQ(done[k].tag, kToChild + k);
      EXPECT_EQ(first_mismatch(bufs[k].data(), kSizes[k], kToChild + k), -1) << "message " << k;
    }
    for (std::size_t j = 0; j < kSame; ++j) {
      EXPECT_EQ(done[kSizes.size() + j].code, Code::kOk);
      EXPECT_EQ(bufs[kSizes.size() + j][0], j) << "the receives of one tag must match in send order";
    }
  });
  std::vector<std::pair<Tag, std::vector<std::uint8_t>>> msgs;
  for (std::size_t k = 0; k < kSizes.size(); ++k) msgs.emplace_back(kToChild + k, payload(kToChild + k, kSizes[k]));
  for (std::size_t j = 0; j < kSame; ++j) msgs.emplace_back(same, std::vector<std::uint8_t>(16, std::uint8_t(j)));
  send_all(*a_, to_b_, msgs);
  progress_until(*a_, b.done());
}

// Zero-byte messages (null buffers) complete with 0 bytes and their own tag; a zero-byte message fits any buffer.
TEST_P(NetTransport, ThreadsZeroByteMessages) {
  const Tag t1 = net::tags::make(9, 1, 0, 1), t2 = net::tags::make(9, 1, 0, 2), t3 = net::tags::make(9, 1, 0, 3);
  Side b([&](const std::atomic<bool>&) {
    std::uint8_t spare[16];
    std::vector<net::Req> reqs;
    for (auto [tag, buf, n] : {std::tuple{t3, (void*)nullptr, 0}, {t1, (void*)nullptr, 0}, {t2, (void*)spare, 16}}) {
      auto r = b_->irecv(tag, net::tags::kExact, buf, n);
      ASSERT_TRUE(r.ok()) << r.status.message;
      reqs.push_back(r.value);
    }
    const auto done = drive(*b_, reqs, 20s);
    const Tag want[] = {t3, t1, t2};
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(done[i].code, Code::kOk) << done[i].message;
      EXPECT_EQ(done[i].bytes, 0u);
      EXPECT_EQ(done[i].tag, want[i]);
    }
  });
  send_all(*a_, to_b_, {{t1, {}}, {t2, {}}, {t3, {}}});
  progress_until(*a_, b.done());
}

// A message of several MiB (UCX's rendezvous protocol) arrives intact; one larger than its buffer is kTruncated.
TEST_P(NetTransport, ThreadsLargeMessageAndTruncation) {
  const Tag big = net::tags::make(3, 0, 1, 0), small = net::tags::make(3, 0, 1, 1);
  const std::size_t bytes = (8u << 20) + 5;
  Side b([&](const std::atomic<bool>&) {
    std::vector<std::uint8_t> buf(bytes), tiny(16);
    auto r1 = b_->irecv(big, net::tags::kExact, buf.data(), buf.size());
    auto r2 = b_->irecv(small, net::tags::kExact, tiny.data(), tiny.size());
    ASSERT_TRUE(r1.ok() && r2.ok());
    const auto done = drive(*b_, {r1.value, r2.value}, 20s);
    EXPECT_EQ(done[0].code, Code::kOk) << done[0].message;
    EXPECT_EQ(done[0].bytes, bytes);
    EXPECT_EQ(first_mismatch(buf.data(), bytes, big), -1);
    EXPECT_EQ(done[1].code, Code::kTruncated) << done[1].message;
  });
  send_all(*a_, to_b_, {{big, payload(big, bytes)}, {small, payload(small, 4096)}});
  progress_until(*a_, b.done());
}

// A cancelled receive reports kCancelled and never receives: the message sent afterwards lands in the next receive.
TEST_P(NetTransport, ThreadsCancelPostedReceive) {
  const Tag tag = net::tags::make(4, 0, 0, 9);
  std::vector<std::uint8_t> first(64, 0xee), second(64, 0xee);
  auto r = b_->irecv(tag, net::tags::kExact, first.data(), first.size());
  ASSERT_TRUE(r.ok());
  progress_for(*b_, 20ms);
  const auto t0 = Clock::now();
  ASSERT_TRUE(b_->cancel(r.value).ok());
  const auto done = drive(*b_, {r.value}, 5s);
  std::printf("cancelled receive reported after %ld ms\n", ms_since(t0));
  EXPECT_EQ(done[0].code, Code::kCancelled) << done[0].message;
  EXPECT_EQ(b_->test(r.value).code, Code::kInvalid) << "a reported request is released";
  {
    Side a([&](const std::atomic<bool>& stop) {
      send_all(*a_, to_b_, {{tag, payload(tag, 64)}});
      progress_until(*a_, stop);
    });
    auto r2 = b_->irecv(tag, net::tags::kExact, second.data(), second.size());
    ASSERT_TRUE(r2.ok());
    EXPECT_EQ(drive(*b_, {r2.value}, 20s)[0].code, Code::kOk);
  }
  EXPECT_EQ(first_mismatch(second.data(), 64, tag), -1);
  EXPECT_EQ(first, std::vector<std::uint8_t>(64, 0xee)) << "the cancelled buffer was written";
}

// Messages whose receive is not posted wait (UCX's unexpected queue) without matching other receives, and complete
// as soon as their receive is posted.
TEST_P(NetTransport, ThreadsUnexpectedMessageWaitsForItsReceive) {
  const Tag eager = net::tags::make(6, 1, 1, 1), rndv = net::tags::make(6, 1, 1, 2);
  const Tag other = net::tags::make(6, 1, 1, 3), other_comm = net::tags::make(7, 1, 1, 1);
  const std::size_t big = 4u << 20;
  Side a([&](const std::atomic<bool>& stop) {
    send_all(*a_, to_b_, {{eager, payload(eager, 4096)}, {rndv, payload(rndv, big)}});
    progress_until(*a_, stop);
  });
  std::vector<std::uint8_t> sink(big), e(4096), l(big);
  auto wrong1 = b_->irecv(other, net::tags::kExact, sink.data(), sink.size());
  auto wrong2 = b_->irecv(other_comm, net::tags::kHopMask, sink.data(), sink.size());
  ASSERT_TRUE(wrong1.ok() && wrong2.ok());
  progress_for(*b_, 300ms);
  EXPECT_EQ(b_->test(wrong1.value).code, Code::kPending);
  EXPECT_EQ(b_->test(wrong2.value).code, Code::kPending);
  auto r1 = b_->irecv(eager, net::tags::kExact, e.data(), e.size());
  auto r2 = b_->irecv(rndv, net::tags::kExact, l.data(), l.size());
  ASSERT_TRUE(r1.ok() && r2.ok());
  const auto done = drive(*b_, {r1.value, r2.value}, 20s);
  EXPECT_EQ(done[0].code, Code::kOk) << done[0].message;
  EXPECT_EQ(done[1].code, Code::kOk) << done[1].message;
  EXPECT_EQ(first_mismatch(e.data(), e.size(), eager), -1);
  EXPECT_EQ(first_mismatch(l.data(), l.size(), rndv), -1);
  ASSERT_TRUE(b_->cancel(wrong1.value).ok() && b_->cancel(wrong2.value).ok());
  for (const auto& c : drive(*b_, {wrong1.value, wrong2.value}, 5s)) EXPECT_EQ(c.code, Code::kCancelled);
}

// A mask selects tag fields: receives on (hop, channel) with any lane and position take that channel's messages in
// send order and report each one's full tag.
TEST_P(NetTransport, ThreadsMaskMatchesTagFields) {
  const Tag other_channel = net::tags::make(7, 2, 2, 10);
  std::vector<std::pair<Tag, std::vector<std::uint8_t>>> msgs = {{other_channel, {}}};
  for (std::uint32_t p = 10; p < 13; ++p) msgs.emplace_back(net::tags::make(7, 1, 2, p), std::vector<std::uint8_t>{});
  Side a([&](const std::atomic<bool>& stop) {
    send_all(*a_, to_b_, msgs);
    progress_until(*a_, stop);
  });
  std::vector<net::Req> reqs;
  for (int i = 0; i < 3; ++i)
    reqs.push_back(
        b_->irecv(net::tags::make(7, 1, 0, 0), net::tags::kHopMask | net::tags::kChannelMask, nullptr, 0).value);
  reqs.push_back(b_->irecv(other_channel, net::tags::kExact, nullptr, 0).value);
  const auto done = drive(*b_, reqs, 20s);
  for (std::uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(done[i].code, Code::kOk);
    EXPECT_EQ(net::tags::channel(done[i].tag), 1u);
    EXPECT_EQ(net::tags::lane(done[i].tag), 2u);
    EXPECT_EQ(net::tags::position(done[i].tag), 10 + i);
  }
  EXPECT_EQ(done[3].code, Code::kOk);
  EXPECT_EQ(done[3].tag, other_channel);
}

// A close returns within its deadline although a send can never complete (its receive is never posted): the flush
// times out, the forced close ends the send with kCancelled. kForce does the same without trying to flush.
TEST_P(NetTransport, ThreadsCloseReturnsWithinDeadline) {
  const Tag never = net::tags::make(8, 0, 0, 0);
  const auto data = payload(never, 16u << 20);
  Side b([&](const std::atomic<bool>& stop) { progress_until(*b_, stop); });  // alive, never receiving
  for (auto [mode, budget] : {std::pair{net::CloseMode::kFlush, 300ms}, {net::CloseMode::kForce, 100ms}}) {
    auto peer = a_->connect(b_->address(), "b");
    ASSERT_TRUE(peer.ok());
    auto s = a_->isend(peer.value, never, data.data(), data.size());
    ASSERT_TRUE(s.ok()) << s.status.message;
    progress_for(*a_, 100ms);
    const auto t0 = Clock::now();
    const net::Status st = a_->close(peer.value, mode, budget);
    const long took = ms_since(t0);
    std::printf("close (%s, deadline %ld ms) returned after %ld ms: %s\n",
                mode == net::CloseMode::kFlush ? "flush" : "force", static_cast<long>(budget.count()), took,
                net::code_name(st.code));
    EXPECT_LT(took, budget.count() + 700);
    EXPECT_TRUE(st.ok() || st.code == Code::kTimeout) << st.message;
    const auto c = drive(*a_, {s.value}, 2s)[0];
    EXPECT_EQ(c.code, Code::kCancelled) << c.message;
    EXPECT_EQ(a_->isend(peer.value, never, nullptr, 0).status.code, Code::kInvalid) << "a closed peer is invalid";
  }
}

// Bad arguments are kInvalid results, not crashes.
TEST_P(NetTransport, InvalidArguments) {
  EXPECT_EQ(a_->isend(net::Peer{99}, 1, nullptr, 0).status.code, Code::kInvalid);
  EXPECT_EQ(a_->isend(to_b_, 1, nullptr, 8).status.code, Code::kInvalid);
  EXPECT_EQ(a_->irecv(1, net::tags::kExact, nullptr, 8).status.code, Code::kInvalid);
  EXPECT_EQ(a_->test(net::Req{1234, 1}).code, Code::kInvalid);
  EXPECT_EQ(a_->cancel(net::Req{1234, 1}).code, Code::kInvalid);
  EXPECT_EQ(a_->connect({}, "nobody").status.code, Code::kInvalid);
  EXPECT_EQ(a_->close(net::Peer{99}, net::CloseMode::kForce, 10ms).code, Code::kInvalid);
}

INSTANTIATE_TEST_SUITE_P(Tls, NetTransport, ::testing::Values("tcp,self", ""), tls_name);

// net_transport_peer started with its stdin and stdout on pipes; killed and reaped when destroyed if still running.
class Child {
 public:
  Child(const std::string& scenario, const std::string& tls) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      ::close(in[1]);
      ::close(out[0]);
      execl(NET_PEER_BIN, NET_PEER_BIN, scenario.c_str(), tls.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
  }
  pid_t pid() const { return pid_; }
  std::vector<std::byte> read_address() {
    std::string line;
    char c;
    const auto deadline = Clock::now() + 20s;
    while (Clock::now() < deadline) {
      pollfd p{from_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      if (read(from_, &c, 1) != 1 || c == '\n') break;
      line += c;
    }
    return line.rfind("ADDR ", 0) == 0 ? from_hex(line.substr(5)) : std::vector<std::byte>{};
  }
  void write_address(const std::vector<std::byte>& a) {
    const std::string line = "ADDR " + to_hex(a) + "\n";
    EXPECT_EQ(write(to_, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }
  // The exit status within `timeout`; -1 (and the child killed) if it did not exit.
  int wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() >= deadline) return -1;
      std::this_thread::sleep_for(10ms);
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  bool reaped_ = false;
};

class NetProcess : public ::testing::TestWithParam<std::string> {
 protected:
  // Starts the child, exchanges addresses; with `hello`, also a round trip, so that the connection is established.
  void start(const std::string& scenario, bool hello) {
    t_ = make(GetParam());
    ASSERT_TRUE(t_);
    child_ = std::make_unique<Child>(scenario, GetParam());
    ASSERT_GT(child_->pid(), 0);
    const auto addr = child_->read_address();
    ASSERT_FALSE(addr.empty()) << "no address from net_transport_peer";
    auto p = t_->connect(addr, "child");
    ASSERT_TRUE(p.ok()) << p.status.message;
    peer_ = p.value;
    child_->write_address(t_->address());
    if (!hello) return;
    auto r = t_->irecv(kHello, net::tags::kExact, nullptr, 0);
    auto s = t_->isend(peer_, kHello, nullptr, 0);
    ASSERT_TRUE(r.ok() && s.ok());
    for (const auto& c : drive(*t_, {s.value, r.value}, 20s)) ASSERT_EQ(c.code, Code::kOk) << c.message;
  }
  std::unique_ptr<net::Transport> t_;
  std::unique_ptr<Child> child_;
  net::Peer peer_;
};

// Both directions between two processes: the child posts its receives late and in reverse order; this process posts
// its receives odd positions first. Sizes from 0 bytes to several MiB.
TEST_P(NetProcess, ExchangeAcrossProcesses) {
  ASSERT_NO_FATAL_FAILURE(start("exchange", false));
  std::vector<std::vector<std::uint8_t>> out(kSizes.size()), in(kSizes.size());
  std::vector<net::Req> reqs(2 * kSizes.size());
  for (std::size_t k = 0; k < kSizes.size(); ++k) {
    out[k] = payload(kToChild + k, kSizes[k]);
    auto s = t_->isend(peer_, kToChild + k, out[k].data(), out[k].size());
    ASSERT_TRUE(s.ok()) << s.status.message;
    reqs[k] = s.value;
  }
  for (std::size_t k : {1, 3, 5, 7, 0, 2, 4, 6}) {
    in[k].assign(kSizes[k], 0);
    auto r = t_->irecv(kToParent + k, net::tags::kExact, in[k].data(), in[k].size());
    ASSERT_TRUE(r.ok()) << r.status.message;
    reqs[kSizes.size() + k] = r.value;
  }
  const auto done = drive(*t_, reqs, 25s);
  for (std::size_t k = 0; k < kSizes.size(); ++k) {
    EXPECT_EQ(done[k].code, Code::kOk) << "send " << k << ": " << done[k].message;
    const auto& c = done[kSizes.size() + k];
    EXPECT_EQ(c.code, Code::kOk) << "receive " << k << ": " << c.message;
    EXPECT_EQ(c.bytes, kSizes[k]);
    EXPECT_EQ(first_mismatch(in[k].data(), kSizes[k], kToParent + k), -1) << "receive " << k;
  }
  auto bye = t_->isend(peer_, kBye, nullptr, 0);
  ASSERT_TRUE(bye.ok());
  EXPECT_EQ(drive(*t_, {bye.value}, 10s)[0].code, Code::kOk);
  int status = -1;
  for (auto end = Clock::now() + 20s; Clock::now() < end && status < 0;) {
    progress_for(*t_, 20ms);
    status = child_->wait_exit(0ms);
  }
  EXPECT_EQ(status, 0) << "net_transport_peer's exit status (3: it received wrong data)";
}

// SIGKILL of the peer process: its failure is reported (naming it) within 1 s, its pending send fails with
// kPeerFailed, and later sends to it fail at once.
TEST_P(NetProcess, KilledPeerIsReportedWithinOneSecond) {
  ASSERT_NO_FATAL_FAILURE(start("idle", true));
  const Tag never = net::tags::make(8, 0, 0, 1);
  const auto data = payload(never, 8u << 20);
  auto s = t_->isend(peer_, never, data.data(), data.size());
  ASSERT_TRUE(s.ok());
  progress_for(*t_, 100ms);
  ASSERT_TRUE(t_->take_peer_failures().empty());
  const auto t0 = Clock::now();
  ASSERT_EQ(kill(child_->pid(), SIGKILL), 0);
  std::vector<net::PeerFailure> failures;
  while (failures.empty() && Clock::now() < t0 + 5s) {
    progress_for(*t_, 1ms);
    failures = t_->take_peer_failures();
  }
  const long took = ms_since(t0);
  std::printf("peer failure reported %ld ms after SIGKILL (UCX_TLS %s)\n", took,
              GetParam().empty() ? "default" : GetParam().c_str());
  ASSERT_EQ(failures.size(), 1u) << "no peer failure within 5 s";
  EXPECT_LT(took, 1000);
  EXPECT_EQ(failures[0].peer, peer_);
  EXPECT_NE(failures[0].message.find("child"), std::string::npos) << failures[0].message;
  const auto c = drive(*t_, {s.value}, 2s)[0];
  EXPECT_EQ(c.code, Code::kPeerFailed) << c.message;
  EXPECT_EQ(t_->isend(peer_, never, nullptr, 0).status.code, Code::kPeerFailed);
  const auto t1 = Clock::now();
  EXPECT_TRUE(t_->close(peer_, net::CloseMode::kFlush, 500ms).ok());
  EXPECT_LT(ms_since(t1), 1200);
}

// A stopped (hung) peer: a close with a pending send still returns within its deadline.
TEST_P(NetProcess, CloseOfStoppedPeerReturnsWithinDeadline) {
  ASSERT_NO_FATAL_FAILURE(start("idle", true));
  ASSERT_EQ(kill(child_->pid(), SIGSTOP), 0);
  const Tag never = net::tags::make(8, 0, 0, 2);
  const auto data = payload(never, 8u << 20);
  auto s = t_->isend(peer_, never, data.data(), data.size());
  ASSERT_TRUE(s.ok());
  progress_for(*t_, 100ms);
  const auto t0 = Clock::now();
  const net::Status st = t_->close(peer_, net::CloseMode::kFlush, 500ms);
  const long took = ms_since(t0);
  std::printf("close of a stopped peer (deadline 500 ms) returned after %ld ms: %s\n", took, net::code_name(st.code));
  EXPECT_LT(took, 1200);
  EXPECT_TRUE(st.ok() || st.code == Code::kTimeout) << st.message;
  EXPECT_NE(drive(*t_, {s.value}, 2s)[0].code, Code::kPending);
}

INSTANTIATE_TEST_SUITE_P(Tls, NetProcess, ::testing::Values("tcp,self", ""), tls_name);

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!dfccl::net::transport_available() && !::testing::GTEST_FLAG(list_tests)) {
    std::printf("net_transport_test skipped: network transport %s\n", dfccl::net::transport_description().c_str());
    return 77;
  }
  return RUN_ALL_TESTS();
}
