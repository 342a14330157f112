// The network rendezvous (lib/src/bootstrap/rendezvous.h): a root service and its clients as threads of this process, a
// client process that exits without a goodbye (fork) and one killed with SIGKILL (rendezvous_peer, RDV_PEER_BIN).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
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
#include "bootstrap/rendezvous_wire.h"
#include "util/error.h"
#include "util/sha256.h"

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
    const std::string challenge = frame_bytes(6, 0, 0, std::string(32, 'n'));
    [[maybe_unused]] const ssize_t said = send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL);
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

std::string hex(const Digest256& d) {
  std::string s;
  char b[3];
  for (uint8_t x : d) {
    std::snprintf(b, sizeof(b), "%02x", unsigned(x));
    s += b;
  }
  return s;
}

// FIPS 180-4 examples and RFC 4231 test cases 1, 2 and 6 (a key longer than a block).
TEST(RendezvousAuth, Sha256AndHmacVectors) {
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(sha256(std::string(1000000, 'a'))), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

// A raw TCP connection to the root at `id`, or -1.
int raw_connect(const net::RendezvousId& id) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(id.port);
  std::memcpy(&a.sin_addr, id.addr, 4);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The next frame from fd within 2 s (type 0 if none).
net::wire::Frame raw_frame(int fd) {
  std::string in;
  net::wire::Frame f;
  char buf[4096];
  for (;;) {
    if (net::wire::take_frame(in, f, 1 << 20)) return f;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 2000) <= 0) return {};
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return {};
    in.append(buf, size_t(n));
  }
}

// A HELLO body for `nonce`: the proof made with `key`, then rank 0 of 1, timeout 2000 ms, host "h".
std::string hello_body(const std::string& key, const std::string& nonce) {
  std::string fields;
  net::wire::put(fields, 0, 4);
  net::wire::put(fields, 1, 4);
  net::wire::put(fields, 2000, 4);
  fields += "h";
  const Digest256 mac = net::wire::hello_mac(key, nonce, fields);
  return std::string(reinterpret_cast<const char*>(mac.data()), mac.size()) + fields;
}

bool send_frame(int fd, uint16_t type, const std::string& body) {
  const std::string f = frame_bytes(type, 0, 0, body);
  return send(fd, f.data(), f.size(), MSG_NOSIGNAL) == ssize_t(f.size());
}

// The registration proves the secret without sending it: the bytes a client sends to a (fake) root hold neither the
// token nor the secret; a HELLO made for another connection's challenge (a replay), one with a wrong secret and one
// in the old form (the token in clear) are refused; the right proof on its own connection registers.
TEST(RendezvousAuth, ChallengeProvesTheSecretAndRefusesReplays) {
  RendezvousRoot root(0x5ec7e75ec7e7ull, "=lo");
  const net::RendezvousId& id = root.id();
  const std::string key = net::wire::auth_key(id.token, id.secret, sizeof(id.secret));
  EXPECT_NE(std::string(reinterpret_cast<const char*>(id.secret), 16), std::string(16, '\0'));

  // What a client sends: read by a fake root that speaks first with a challenge.
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(listen(lfd, 1), 0);
  ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  net::RendezvousId fake = id;
  fake.port = ntohs(a.sin_port);
  auto sniffed = std::async(std::launch::async, [&] {
    const int fd = accept(lfd, nullptr, nullptr);
    send_frame(fd, 6, std::string(32, 'n'));
    const net::wire::Frame f = raw_frame(fd);
    close(fd);
    return f;
  });
  run_rank([&] { Rendezvous rv(fake, 0, 1, "h", 2000); });
  const net::wire::Frame hello = sniffed.get();
  close(lfd);
  ASSERT_EQ(hello.type, 1);
  std::string token_bytes;
  net::wire::put(token_bytes, id.token, 8);
  EXPECT_EQ(hello.body.find(token_bytes), std::string::npos) << "the token travels in clear";
  for (size_t at = 0; at + 4 <= sizeof(id.secret); ++at)
    EXPECT_EQ(hello.body.find(std::string(reinterpret_cast<const char*>(id.secret) + at, 4)), std::string::npos)
        << "secret bytes " << at << ".. travel in clear";
  EXPECT_EQ(hello.body, hello_body(key, std::string(32, 'n'))) << "the proof is not HMAC(key, challenge, fields)";

  auto refused = [&](const std::string& body, const char* what) {
    const int fd = raw_connect(id);
    ASSERT_GE(fd, 0);
    const net::wire::Frame challenge = raw_frame(fd);
    EXPECT_EQ(challenge.type, 6) << what;
    EXPECT_EQ(challenge.body.size(), 32u) << what;
    ASSERT_TRUE(send_frame(fd, 1, body)) << what;
    const net::wire::Frame answer = raw_frame(fd);
    EXPECT_EQ(answer.type, 5) << what << ": not refused";
    EXPECT_EQ(answer.code, dfcclInvalidArgument) << what;
    EXPECT_NE(answer.body.find("does not prove the unique id's secret"), std::string::npos) << answer.body;
    close(fd);
  };
  const int first = raw_connect(id);
  ASSERT_GE(first, 0);
  const net::wire::Frame challenge = raw_frame(first);
  ASSERT_EQ(challenge.type, 6);
  refused(hello_body(key, challenge.body), "a HELLO made for another connection's challenge");
  std::string wrong = key;
  wrong.back() ^= 1;
  refused(hello_body(wrong, std::string(32, 'x')), "a HELLO with a wrong secret");
  std::string clear;  // the old registration: token, rank, nranks, timeout, host
  net::wire::put(clear, id.token, 8);
  clear += hello_body(key, "").substr(32);
  clear.resize(44, '\0');
  refused(clear, "a HELLO with the token in clear");
  ASSERT_TRUE(send_frame(first, 1, hello_body(key, challenge.body)));
  const net::wire::Frame result = raw_frame(first);
  EXPECT_EQ(result.type, 4) << "the right proof was refused: " << result.body;
  close(first);
}

// Idle connections cannot hold the port: 1100 connections that never register, from another process, while this
// process may hold only 1024 files. The root keeps at most RendezvousRoot::kMaxUnregistered of them and closes each
// after RendezvousRoot::kHelloMs; two ranks still register; once they have, the root no longer listens; its thread
// does not spin meanwhile.
TEST(RendezvousAuth, IdleConnectionsAreCappedAndClosed) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = std::min<rlim_t>(old.rlim_cur, 1024);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  constexpr int kFlood = 1100;
  {
    RendezvousRoot root(0xf100d, "=lo");
    int report[2];
    ASSERT_EQ(pipe(report), 0);
    const pid_t pid = fork();
    if (pid == 0) {                      // the flood: connect, never speak, count the connections the root closes
      for (int fd = 3; fd < 1024; ++fd)  // the root's listening socket among them: only the parent may hold it
        if (fd != report[1]) close(fd);
      setrlimit(RLIMIT_NOFILE, &old);
      std::vector<pollfd> fds;
      for (int i = 0; i < kFlood; ++i) {
        const int fd = raw_connect(root.id());
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
      }
      int n = int(fds.size());
      [[maybe_unused]] ssize_t w = write(report[1], &n, sizeof(n));
      int closed = 0;
      const auto limit = Clock::now() + 15s;
      while (closed < n && Clock::now() < limit) {
        poll(fds.data(), fds.size(), 100);
        for (auto& p : fds) {
          if (p.fd < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
          char buf[256];
          const ssize_t r = recv(p.fd, buf, sizeof(buf), MSG_DONTWAIT);
          if (r > 0) continue;  // the challenge
          close(p.fd);
          p.fd = -1;
          ++closed;
        }
      }
      w = write(report[1], &closed, sizeof(closed));
      _exit(0);
    }
    close(report[1]);
    int connected = 0, closed = 0;
    ASSERT_EQ(read(report[0], &connected, sizeof(connected)), ssize_t(sizeof(connected)));
    EXPECT_EQ(connected, kFlood);
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(1s);
    getrusage(RUSAGE_SELF, &after);
    const double cpu =
        double(after.ru_utime.tv_sec - before.ru_utime.tv_sec + after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
        double(after.ru_utime.tv_usec - before.ru_utime.tv_usec + after.ru_stime.tv_usec - before.ru_stime.tv_usec) *
            1e-6;
    EXPECT_LT(cpu, 0.3) << "the root's thread spun during the flood";
    // Idle connections end after kHelloMs (with or without the flood).
    std::vector<int> idle;
    for (int i = 0; i < 3; ++i) idle.push_back(raw_connect(root.id()));
    const auto t1 = Clock::now();
    for (int fd : idle) {
      ASSERT_GE(fd, 0);
      EXPECT_EQ(raw_frame(fd).type, 6);
      char c = 0;
      pollfd p{fd, POLLIN, 0};
      EXPECT_EQ(poll(&p, 1, RendezvousRoot::kHelloMs + 1500), 1);
      EXPECT_EQ(recv(fd, &c, 1, MSG_DONTWAIT), 0) << "an idle connection was not closed";
      close(fd);
    }
    const double idle_s = std::chrono::duration<double>(Clock::now() - t1).count();
    EXPECT_GT(idle_s, RendezvousRoot::kHelloMs / 1000.0 - 0.5);
    const auto out = run_ranks({0, 1}, [&](int rank) {
      Rendezvous rv(root.id(), rank, 2, host_of(rank), 3000);
      rv.barrier();
    });
    for (const auto& o : out) EXPECT_EQ(o.code, dfcclSuccess) << o.message;
    const int late = raw_connect(root.id());
    EXPECT_LT(late, 0) << "the root still listens after its group registered";
    if (late >= 0) close(late);
    ASSERT_EQ(read(report[0], &closed, sizeof(closed)), ssize_t(sizeof(closed)));
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(closed, connected) << "idle connections left open after " << s << " s";
    std::printf("%d idle connections: root CPU %.3f s in the first second; all closed within %.1f s; one idle "
                "connection closed after %.2f s\n",
                connected, cpu, s, idle_s);
    close(report[0]);
    waitpid(pid, nullptr, 0);
  }
  setrlimit(RLIMIT_NOFILE, &old);
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
