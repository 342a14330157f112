// The network rendezvous (lib/src/bootstrap/rendezvous.h): a root service and its clients as threads of this process, a
// client process that exits without a goodbye (fork) and one killed with SIGKILL (rendezvous_peer, RDV_PEER_BIN).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "util/error.h"

namespace {

using namespace dfccl;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using net::Rendezvous;
using net::RendezvousRoot;

// What one rank's body ended with: its error code (dfcclSuccess if none) and message.
struct Outcome {
  dfcclResult_t code = dfcclSuccess;
  std::string message;
  double seconds = 0;  // from the start of the body to its end
};

Outcome run_rank(const std::function<void()>& body) {
  const auto t0 = Clock::now();
  Outcome o;
  try {
    body();
  } catch (const Error& e) {
    o.code = e.code();
    o.message = e.what();
  }
  o.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return o;
}

// Runs body(rank) for each listed rank on its own thread; the outcomes in the same order.
std::vector<Outcome> run_ranks(const std::vector<int>& ranks, const std::function<void(int)>& body) {
  std::vector<std::future<Outcome>> f;
  for (int r : ranks) f.push_back(std::async(std::launch::async, [&, r] { return run_rank([&] { body(r); }); }));
  std::vector<Outcome> out;
  for (auto& x : f) out.push_back(x.get());
  return out;
}

std::string host_of(int rank) { return "host" + std::to_string(rank); }

uint8_t pattern(int rank, int round, size_t i) {
  return uint8_t(rank * 131 + round * 17 + i * 7);
}  // as rendezvous_peer's

bool wait_finished(const RendezvousRoot& root, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!root.finished() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  return root.finished();
}

TEST(RendezvousId, RoundTripAndErrors) {
  RendezvousRoot root(0x1234567890abcdefull, "=lo");
  dfcclUniqueId id;
  std::memset(&id, 0x5a, sizeof(id));
  net::encode_rendezvous_id(root.id(), id);
  for (size_t i = 0; i < net::kRendezvousIdOffset; ++i) ASSERT_EQ(uint8_t(id.internal[i]), 0x5a) << "byte " << i;
  const net::RendezvousId back = net::parse_rendezvous_id(id);
  EXPECT_EQ(back.token, 0x1234567890abcdefull);
  EXPECT_EQ(back.port, root.id().port);
  EXPECT_NE(back.port, 0);
  EXPECT_EQ(back.to_string(), root.id().to_string());
  EXPECT_EQ(back.to_string().rfind("127.0.0.1:", 0), 0u) << back.to_string();

  auto expect_bad = [](dfcclUniqueId bad, const std::string& what) {
    try {
      net::parse_rendezvous_id(bad);
      ADD_FAILURE() << "accepted an id with " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), dfcclInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("commId"), std::string::npos) << e.what();
    }
  };
  dfcclUniqueId bad = id;
  bad.internal[net::kRendezvousIdOffset] ^= 1;  // magic
  expect_bad(bad, "a wrong magic");
  bad = id;
  bad.internal[net::kRendezvousIdOffset + 16] = 5;  // family
  expect_bad(bad, "family 5");
  bad = id;
  bad.internal[net::kRendezvousIdOffset + 18] = bad.internal[net::kRendezvousIdOffset + 19] = 0;  // port
  expect_bad(bad, "port 0");
}

TEST(RendezvousInterface, Selection) {
  EXPECT_TRUE(net::pick_interface("=lo").loopback);
  EXPECT_EQ(net::pick_interface("lo").name, "lo");
  const net::Interface any = net::pick_interface("");
  EXPECT_EQ(any.addr.ss_family, AF_INET) << any.name;
  try {
    net::pick_interface("nosuchif");
    ADD_FAILURE() << "no error for an interface that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), dfcclInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("DFCCL_SOCKET_IFNAME='nosuchif'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lo 127.0.0.1"), std::string::npos) << e.what();
  }
}

class RendezvousRanks : public ::testing::TestWithParam<int> {};

// Every rank gets every rank's bytes, in order, for sizes from 0 to kMaxBytes over many rounds, with barriers in
// between; the host ids come back in rank order; the service ends once every rank has left.
TEST_P(RendezvousRanks, AllgatherAndBarrierExact) {
  const int n = GetParam();
  RendezvousRoot root(42, "=lo");
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(r);
  std::atomic<int> wrong{0};
  const auto out = run_ranks(ranks, [&](int rank) {
    Rendezvous rv(root.id(), rank, n, host_of(rank), 10000);
    for (int q = 0; q < n; ++q)
      if (rv.hosts()[size_t(q)] != host_of(q)) ++wrong;
    for (int round = 0; round < 12; ++round) {
      const size_t bytes = round == 11 ? Rendezvous::kMaxBytes : size_t(round) * 373;
      std::vector<uint8_t> mine(bytes), all(bytes * size_t(n), 0xee);
      for (size_t i = 0; i < bytes; ++i) mine[i] = pattern(rank, round, i);
      rv.allgather(mine.data(), bytes, all.data());
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < bytes; ++i)
          if (all[size_t(q) * bytes + i] != pattern(q, round, i)) ++wrong;
      rv.barrier();
    }
  });
  for (const auto& o : out) EXPECT_EQ(o.code, dfcclSuccess) << o.message;
  EXPECT_EQ(wrong, 0);
  EXPECT_TRUE(wait_finished(root, 1000ms));
}

INSTANTIATE_TEST_SUITE_P(N, RendezvousRanks, ::testing::Values(1, 2, 5));

void expect_failed(const Outcome& o, dfcclResult_t code, const std::string& text) {
  EXPECT_EQ(o.code, code) << o.message;
  EXPECT_NE(o.message.find(text), std::string::npos) << "'" << o.message << "' does not say '" << text << "'";
}

// A rank that never registers: the others fail within the timeout (plus scheduling), naming it.
TEST(Rendezvous, MissingRankAtRegistration) {
  RendezvousRoot root(7, "=lo");
  const auto out = run_ranks({0, 1}, [&](int rank) { Rendezvous rv(root.id(), rank, 4, host_of(rank), 300); });
  for (const auto& o : out) {
    expect_failed(o, dfcclTimeout, "ranks 2, 3 of 4 never arrived within 300 ms");
    EXPECT_LT(o.seconds, 1.5);
  }
  // The id may be used again once the failed group is gone.
  const auto again = run_ranks({0, 1}, [&](int rank) { Rendezvous rv(root.id(), rank, 2, host_of(rank), 3000); });
  for (const auto& o : again) EXPECT_EQ(o.code, dfcclSuccess) << o.message;
}

// A rank that registers but never enters an allgather: the others' round fails naming it.
TEST(Rendezvous, MissingRankInRound) {
  RendezvousRoot root(8, "=lo");
  const auto out = run_ranks({0, 1, 2}, [&](int rank) {
    Rendezvous rv(root.id(), rank, 3, host_of(rank), 5000);
    if (rank == 1) {
      std::this_thread::sleep_for(1500ms);  // leaves after the others' round failed
      return;
    }
    int x = rank, all[3];
    rv.allgather(&x, sizeof(x), all, 300);
  });
  expect_failed(out[0], dfcclTimeout, "rank 1 of 3 never arrived within 300 ms");
  expect_failed(out[2], dfcclTimeout, "rank 1 of 3 never arrived within 300 ms");
  EXPECT_LT(out[0].seconds, 1.3);
}

TEST(Rendezvous, DuplicateRankRefused) {
  RendezvousRoot root(9, "=lo");
  std::promise<void> first_in;
  auto first = std::async(std::launch::async, [&] {
    return run_rank([&] {
      Rendezvous rv(root.id(), 0, 2, "first", 5000);
      rv.barrier();
    });
  });
  std::this_thread::sleep_for(200ms);  // the first rank 0 is registered by now
  expect_failed(run_rank([&] { Rendezvous rv(root.id(), 0, 2, "second", 5000); }), dfcclInvalidUsage,
                "rank 0 is already registered by host first");
  // The group completes with the first rank 0.
  const Outcome one = run_rank([&] {
    Rendezvous rv(root.id(), 1, 2, "one", 5000);
    EXPECT_EQ(rv.hosts()[0], "first");
    rv.barrier();
  });
  EXPECT_EQ(one.code, dfcclSuccess) << one.message;
  EXPECT_EQ(first.get().code, dfcclSuccess);
}

TEST(Rendezvous, NranksDisagreementRefused) {
  RendezvousRoot root(10, "=lo");
  auto first = std::async(std::launch::async,
                          [&] { return run_rank([&] { Rendezvous rv(root.id(), 0, 2, host_of(0), 5000); }); });
  std::this_thread::sleep_for(200ms);
  const Outcome second = run_rank([&] { Rendezvous rv(root.id(), 1, 3, host_of(1), 5000); });
  expect_failed(second, dfcclInvalidUsage, "rank 1 (host host1) was initialised with nranks=3 but rank 0");
  const Outcome o = first.get();
  expect_failed(o, dfcclInvalidUsage, "nranks=3 but rank 0 (host host0) with nranks=2");
  EXPECT_LT(o.seconds, 2.0);
}

TEST(Rendezvous, DifferentRoundsRefused) {
  RendezvousRoot root(11, "=lo");
  const auto out = run_ranks({0, 1}, [&](int rank) {
    Rendezvous rv(root.id(), rank, 2, host_of(rank), 5000);
    int x = 0, all[2];
    if (rank == 0) rv.barrier();
    else rv.allgather(&x, sizeof(x), all);
  });
  for (const auto& o : out) expect_failed(o, dfcclInvalidUsage, "called");
}

// A rank destroyed while the others wait in a round: they fail at once, naming it.
TEST(Rendezvous, LeaveDuringRound) {
  RendezvousRoot root(12, "=lo");
  const auto out = run_ranks({0, 1, 2}, [&](int rank) {
    Rendezvous rv(root.id(), rank, 3, host_of(rank), 10000);
    if (rank == 2) {
      std::this_thread::sleep_for(300ms);
      return;
    }
    rv.barrier();
  });
  expect_failed(out[0], dfcclInvalidUsage, "rank 2 (host host2) left");
  expect_failed(out[1], dfcclInvalidUsage, "rank 2 (host host2) left");
  EXPECT_LT(out[0].seconds, 3.0);
}

// A rank whose connection drops without a goodbye (a process that exits while the others wait in a round): the
// others fail with dfcclRemoteError naming it, well before the round's timeout.
TEST(Rendezvous, DropDuringRound) {
  RendezvousRoot root(13, "=lo");
  const pid_t child = fork();
  if (child == 0) {
    try {
      Rendezvous rv(root.id(), 2, 3, host_of(2), 10000);
      usleep(300000);
      _exit(0);  // before the destructor's goodbye: the kernel closes the socket
    } catch (...) {
    }
    _exit(1);
  }
  const auto out = run_ranks({0, 1}, [&](int rank) {
    Rendezvous rv(root.id(), rank, 3, host_of(rank), 10000);
    rv.barrier();
  });
  waitpid(child, nullptr, 0);
  for (const auto& o : out) {
    expect_failed(o, dfcclRemoteError, "rank 2 (host host2, ");
    expect_failed(o, dfcclRemoteError, "dropped its connection");
    EXPECT_LT(o.seconds, 3.0);
  }
}

// The root's process ends its service while ranks wait: they fail naming the root instead of waiting.
TEST(Rendezvous, RootGoneDuringRound) {
  auto root = std::make_unique<RendezvousRoot>(14, "=lo");
  const net::RendezvousId id = root->id();
  auto waiter = std::async(std::launch::async, [&] {
    return run_rank([&] {
      Rendezvous rv(id, 0, 1, host_of(0), 10000);
      rv.barrier();
      std::this_thread::sleep_for(300ms);
      rv.barrier();  // the root is gone by now
    });
  });
  std::this_thread::sleep_for(150ms);
  const auto t0 = Clock::now();
  root.reset();
  EXPECT_LT(Clock::now() - t0, 500ms);
  expect_failed(waiter.get(), dfcclRemoteError, "the root at " + id.to_string());
}

TEST(Rendezvous, BadArguments) {
  RendezvousRoot root(15, "=lo");
  expect_failed(run_rank([&] { Rendezvous(root.id(), 2, 2, "h", 100); }), dfcclInvalidArgument, "'rank' = 2");
  expect_failed(run_rank([&] { Rendezvous(root.id(), 0, 0, "h", 100); }), dfcclInvalidArgument, "'nranks' = 0");
  net::RendezvousId wrong = root.id();
  wrong.token ^= 1;
  expect_failed(run_rank([&] { Rendezvous(wrong, 0, 1, "h", 1000); }), dfcclInvalidArgument, "token");
  const Outcome big = run_rank([&] {
    Rendezvous rv(root.id(), 0, 1, "h", 1000);
    std::vector<char> b(Rendezvous::kMaxBytes + 1), all(b.size());
    rv.allgather(b.data(), b.size(), all.data());
  });
  expect_failed(big, dfcclInvalidArgument, "4097 bytes");
}

// A fake root that answers the registration and, in the same write, sends a group failure: the client must keep
// the failure for its next round (a message that follows another in one read is not lost).
std::string frame_bytes(uint16_t type, uint16_t code, uint32_t seq, const std::string& body) {
  std::string s;
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s.push_back(char(uint8_t(v >> (8 * i))));
  };
  put(0x56524644u, 4);  // "DFRV"
  put(type, 2);
  put(code, 2);
  put(seq, 4);
  put(body.size(), 4);
  return s + body;
}

TEST(RendezvousProtocol, MessageAfterResultKeptForNextRound) {
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(listen(lfd, 1), 0);
  ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  net::RendezvousId id;
  id.token = 77;
  id.family = AF_INET;
  std::memcpy(id.addr, &a.sin_addr, 4);
  id.port = ntohs(a.sin_port);
  std::promise<void> client_done;
  auto fake_root = std::async(std::launch::async, [&] {
    const int fd = accept(lfd, nullptr, nullptr);
    char buf[512];
    [[maybe_unused]] const ssize_t got = recv(fd, buf, sizeof(buf), 0);  // the registration (one small message)
    const std::string result = frame_bytes(4, 0, 0, std::string("\x01\0\0\0h", 5));       // RESULT: host "h"
    const std::string failure = frame_bytes(5, dfcclRemoteError, 0, "injected failure");  // FAIL
    const std::string both = result + failure;
    [[maybe_unused]] const ssize_t sent = send(fd, both.data(), both.size(), MSG_NOSIGNAL);
    client_done.get_future().wait_for(5s);  // answers nothing more
    close(fd);
  });
  const Outcome o = run_rank([&] {
    Rendezvous rv(id, 0, 1, "h", 200);
    EXPECT_EQ(rv.hosts(), std::vector<std::string>{"h"});
    rv.barrier();
  });
  client_done.set_value();
  expect_failed(o, dfcclRemoteError, "injected failure");
  EXPECT_LT(o.seconds, 1.0);
  fake_root.get();
  close(lfd);
}

// rendezvous_peer as rank 1; it finishes `rounds` rounds with the others, then sleeps until it is killed.
pid_t spawn_peer(const net::RendezvousId& rid, int rank, int nranks, int hang_after) {
  dfcclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  net::encode_rendezvous_id(rid, id);
  std::string hex;
  char b[3];
  for (char c : id.internal) {
    std::snprintf(b, sizeof(b), "%02x", unsigned(uint8_t(c)));
    hex += b;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string r = std::to_string(rank), n = std::to_string(nranks), h = std::to_string(hang_after);
    execl(RDV_PEER_BIN, RDV_PEER_BIN, "rank", "--id", hex.c_str(), "--rank", r.c_str(), "--nranks", n.c_str(),
          "--rounds", "100", "--hang-after", h.c_str(), "--host", "peerhost", static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// A rank process killed with SIGKILL while the others wait in a round: they fail naming it within 2 s of the kill.
TEST(RendezvousProcess, KilledRankNamed) {
  RendezvousRoot root(16, "=lo");
  const pid_t peer = spawn_peer(root.id(), 1, 3, 2);
  ASSERT_GT(peer, 0);
  std::atomic<int> in_round{0};
  auto killer = std::async(std::launch::async, [&] {
    const auto limit = Clock::now() + 20s;  // the ranks may fail before they get there
    while (in_round < 2 && Clock::now() < limit) std::this_thread::sleep_for(5ms);
    std::this_thread::sleep_for(200ms);
    kill(peer, SIGKILL);
    return Clock::now();
  });
  std::vector<Clock::time_point> failed_at(3);
  const auto out = run_ranks({0, 2}, [&](int rank) {
    Rendezvous rv(root.id(), rank, 3, host_of(rank), 20000);
    for (int round = 0; round < 2; ++round) {  // the peer's rounds: allgather and barrier each
      const size_t bytes = size_t(round) * 509;
      std::vector<uint8_t> mine(bytes), all(bytes * 3);
      for (size_t i = 0; i < bytes; ++i) mine[i] = pattern(rank, round, i);
      rv.allgather(mine.data(), bytes, all.data());
      rv.barrier();
    }
    ++in_round;
    try {
      rv.barrier();
    } catch (...) {
      failed_at[size_t(rank)] = Clock::now();
      throw;
    }
  });
  const auto killed = killer.get();
  int status = 0;
  waitpid(peer, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  for (int i : {0, 1}) {
    expect_failed(out[size_t(i)], dfcclRemoteError, "rank 1 (host peerhost, ");
    const double after = std::chrono::duration<double>(failed_at[size_t(2 * i)] - killed).count();
    EXPECT_LT(after, 2.0);
    std::printf("rank %d failed %.3f s after the kill: %s\n", 2 * i, after, out[size_t(i)].message.c_str());
  }
}

}  // namespace
