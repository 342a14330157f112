// The shrink's agreement across hosts (lib/src/comm/shrink_net.h) with ranks as threads on loopback: ranks of one key
// agree and the decision carries the coordinator's new id whole (its hidden secret restored); a rank whose messages
// lack the others' MAC is never heard: each side drops the other's connections, so each gives the other up.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "comm/shrink_net.h"
#include "util/error.h"

namespace {

using dfccl::ShrinkDecision;
using dfccl::ShrinkListener;
using dfccl::ShrinkNetAgreement;

// An id with a rendezvous payload whose secret is 1..16 (no root behind it: the test only compares bytes).
dfcclUniqueId known_id() {
  dfccl::net::RendezvousId rid;
  rid.token = 0x1234;
  for (int i = 0; i < 16; ++i) rid.secret[i] = uint8_t(i + 1);
  rid.family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", rid.addr);
  rid.port = 5;
  dfcclUniqueId id{};
  dfccl::net::encode_rendezvous_id(rid, id);
  return id;
}

// Two ranks on loopback, with keys `keys`, both proposing no one; returns each rank's decision.
std::vector<ShrinkDecision> agree_two(const std::vector<std::string>& keys) {
  std::vector<std::unique_ptr<ShrinkListener>> ls;
  for (const std::string& k : keys) {
    ls.push_back(std::make_unique<ShrinkListener>("=lo"));
    ls.back()->key = k;
  }
  for (auto& l : ls)
    for (auto& other : ls) l->endpoints.push_back(other->endpoint());
  std::vector<ShrinkDecision> out(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      ShrinkNetAgreement a(*ls[size_t(r)], 0, r, 2);
      ShrinkNetAgreement::Hooks h;
      h.make_id = known_id;
      out[size_t(r)] = a.agree({0, 0}, h, 10000);
    });
  for (auto& t : threads) t.join();
  for (auto& d : out) d.close_links();
  return out;
}

TEST(ShrinkNet, RanksOfOneKeyAgreeAndTheDecisionCarriesTheIdWhole) {
  const std::vector<ShrinkDecision> d = agree_two({"key", "key"});
  const dfcclUniqueId want = known_id();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(d[size_t(r)].excluded, (std::vector<uint8_t>{0, 0})) << "rank " << r;
    EXPECT_EQ(d[size_t(r)].coordinator, 0) << "rank " << r;
    EXPECT_EQ(std::memcmp(&d[size_t(r)].id, &want, sizeof(want)), 0) << "rank " << r << "'s id differs";
  }
}

TEST(ShrinkNet, MessagesWithoutTheKeysMacAreNotTaken) {
  const std::vector<ShrinkDecision> d = agree_two({"key", "another key"});
  EXPECT_EQ(d[0].excluded, (std::vector<uint8_t>{0, 1})) << "rank 0 took a message of another key";
  EXPECT_EQ(d[1].excluded, (std::vector<uint8_t>{1, 0})) << "rank 1 took a message of another key";
}

}  // namespace
