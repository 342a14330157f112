#include "comm/comm_shrink.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/rendezvous.h"
#include "comm/comm_failure.h"
#include "comm/comm_init.h"
#include "comm/peer_watch.h"
#include "comm/shrink_agreement.h"
#include "comm/shrink_net.h"
#include "util/error.h"
#include "util/log.h"

namespace dfccl {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The token of shrink number `shrink` of the communicator with `token`: its agreement's segment (epoch -1) or the
// communicator made in `epoch`. Every survivor derives the same one; nothing hosts it.
uint64_t derived_token(uint64_t token, uint32_t shrink, int epoch) {
  return mix(token ^ mix((uint64_t(shrink) << 8 | uint64_t(epoch + 1)) ^ 0x5348524b00000000ull));
}

// The ranks this rank's communicator found failed: the rank its dfcclRemoteError named, and every peer whose
// process has exited.
std::vector<uint8_t> found_failed(dfcclComm* c) {
  std::vector<uint8_t> set(size_t(c->nranks), 0);
  const int named = c->failed_rank.load();
  if (c->fail_code.load() == dfcclRemoteError && named >= 0 && named < c->nranks) set[size_t(named)] = 1;
  for (int r = 0; r < c->nranks; ++r)
    if (r != c->rank && PeerWatch::exited(c, r)) set[size_t(r)] = 1;
  return set;
}

// The old communicator after a shrink that excluded `rank` (its lowest excluded rank, or this rank itself): it
// leaves the peer watch (whose thread could fail it at the same time) and, unless it has ended already, fails with
// dfcclRemoteError naming `rank`, so that its pending collectives end and its destroy does not wait for the
// excluded ranks.
void end_old(dfcclComm* c, int rank, const std::string& reason) {
  PeerWatch::remove(c);
  if (!c->alive.load() || c->fail_code.load() != dfcclSuccess) return;
  comm_fail(c, rank, reason, Bootstrap::kCauseOther);
}

std::string rank_list(const std::vector<uint8_t>& set) {
  std::string s;
  for (size_t r = 0; r < set.size(); ++r)
    if (set[r]) s += (s.empty() ? "" : ",") + std::to_string(r);
  return "[" + s + "]";
}

// Whether the connection fd has ended (its other end's process exited or closed it); data waiting is no end.
bool ended(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (fd < 0 || poll(&p, 1, 0) <= 0) return false;
  char b;
  const ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// The coordinator's watch over its reporters while the new communicator is made: a reporter whose connection ends
// (its process exited) before the new id's group has registered fails that registration at once, so that no
// survivor waits for it until the init timeout. Stops with the object.
class ReporterWatch {
 public:
  ReporterWatch(const ShrinkDecision& d, std::shared_ptr<net::RendezvousRoot> root) {
    if (d.reporters.empty() || !root) return;
    thread_ = std::thread([this, reporters = d.reporters, root] {
      while (!stop_.load()) {
        for (const auto& [rank, fd] : reporters) {
          if (!ended(fd)) continue;
          root->fail_registration(fmt::format(
              "rank {} of the communicator being shrunk exited before the new communicator was made", rank));
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  ~ReporterWatch() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The ranks a decision keeps, in order (their new ranks are their places), and its lowest excluded rank (-1: none).
std::vector<int> members_of(const std::vector<uint8_t>& excluded, int* first) {
  std::vector<int> members;
  *first = -1;
  for (int r = 0; r < int(excluded.size()); ++r) {
    if (!excluded[size_t(r)]) members.push_back(r);
    else if (*first < 0) *first = r;
  }
  return members;
}

// This rank's place among `members` (it is one of them): its rank in the new communicator.
int new_rank_of(const dfcclComm* c, const std::vector<int>& members) {
  int new_rank = 0;
  while (members[size_t(new_rank)] != c->rank) ++new_rank;
  return new_rank;
}

// The new communicator's init watch (comm_init's `gone`): a member whose process has exited, by its old rank.
std::function<std::string(int)> member_exited(dfcclComm* c, const std::vector<int>& members) {
  return [c, members](int r) -> std::string {
    const int old = members[size_t(r)];
    if (old == c->rank || !PeerWatch::exited(c, old)) return {};
    return fmt::format("(rank {} of the communicator being shrunk) exited", old);
  };
}

// The shrink of a communicator whose connections use the network: the agreement over the ranks' shrink sockets
// (shrink_net.h), whose decision brings the new communicator's id (its rendezvous in the coordinator's process);
// a member that goes before the new communicator is made fails its init on every survivor, which agree again.
dfcclComm* shrink_across_hosts(dfcclComm* c, std::vector<uint8_t> proposal, const dfcclConfig_t* config, int timeout_ms,
                               uint32_t shrink) {
  ShrinkNetAgreement agreement(*c->shrink_listener, shrink, c->rank, c->nranks);
  std::shared_ptr<net::RendezvousRoot> root;
  ShrinkNetAgreement::Hooks hooks;
  hooks.gone = [c](int r) { return r != c->rank && PeerWatch::exited(c, r); };
  hooks.make_id = [&root] { return make_unique_id(&root); };
  for (int attempt = 0; attempt < ShrinkAgreement::kEpochs; ++attempt) {
    root.reset();
    ShrinkDecision d = agreement.agree(proposal, hooks, timeout_ms);
    int first = -1;
    const std::vector<int> members = members_of(d.excluded, &first);
    if (d.excluded[size_t(c->rank)]) {
      d.close_links();
      end_old(c, c->rank, "was excluded by the dfcclCommShrink of its peers");
      return nullptr;
    }
    const int new_rank = new_rank_of(c, members);
    const dfcclConfig_t cfg = config ? resolve_config(config, new_rank) : c->config;
    try {
      ReporterWatch watch(d, d.coordinator == c->rank ? root : nullptr);
      const int link = d.link;
      const int coordinator = d.coordinator;
      dfcclComm* made = comm_init(
          int(members.size()), d.id, new_rank, cfg, member_exited(c, members), [link, coordinator]() -> std::string {
            if (!ended(link)) return {};
            return fmt::format("its host, rank {} of the communicator being shrunk (the shrink's coordinator), exited",
                               coordinator);
          });
      d.close_links();
      if (first >= 0) end_old(c, first, "was excluded by dfcclCommShrink");
      log(LogLevel::Info, LogSubsys::Init,
          "dfcclCommShrink: rank {} of {} is rank {} of {} of the new communicator; excluded: {} (decided by rank {}, "
          "attempt {})",
          c->rank, c->nranks, new_rank, members.size(), rank_list(d.excluded), d.coordinator, attempt);
      return made;
    } catch (const Error& e) {
      d.close_links();
      if (e.code() != dfcclRemoteError) throw;
      for (int r = 0; r < c->nranks; ++r) proposal[size_t(r)] |= d.excluded[size_t(r)];
      log(LogLevel::Info, LogSubsys::Init, "dfcclCommShrink: rank {}: {}; agreeing again", c->rank, e.what());
    }
  }
  throw Error(dfcclRemoteError, fmt::format("dfcclCommShrink: ranks kept failing while the shrunk communicator was "
                                            "made ({} attempts); excluded so far: {}",
                                            ShrinkAgreement::kEpochs, rank_list(proposal)));
}

}  // namespace

dfcclComm* comm_shrink(dfcclComm* c, const int* exclude, int n, const dfcclConfig_t* config) {
  if (c->nranks > ShrinkAgreement::kMaxRanks)
    throw Error(dfcclNotSupported, fmt::format("dfcclCommShrink: the communicator has {} ranks; a shrink supports at "
                                               "most {}",
                                               c->nranks, ShrinkAgreement::kMaxRanks));
  if (config) resolve_config(config, c->rank);  // its checks, before any other rank waits for this one
  std::vector<uint8_t> proposal(size_t(c->nranks), 0);
  if (exclude) {
    for (int i = 0; i < n; ++i) proposal[size_t(exclude[i])] = 1;
  } else {
    proposal = found_failed(c);
  }
  const uint32_t shrink = c->shrinks++;
  if (proposal[size_t(c->rank)]) {
    end_old(c, c->rank, "was excluded by dfcclCommShrink");
    return nullptr;
  }
  const int timeout_ms = config && config->initTimeoutMs > 0 ? config->initTimeoutMs : c->config.initTimeoutMs;
  if (c->shrink_listener) return shrink_across_hosts(c, proposal, config, timeout_ms, shrink);
  auto gone = [c](int r) { return r != c->rank && PeerWatch::exited(c, r); };
  Bootstrap segment(local_unique_id(derived_token(c->token, shrink, -1)), c->rank, c->nranks, timeout_ms,
                    Bootstrap::Areas{0, 0, ShrinkAgreement::bytes(c->nranks)});
  ShrinkAgreement agreement(segment.agreement_area(), c->nranks, c->rank);
  for (int epoch = 0; epoch < ShrinkAgreement::kEpochs; ++epoch) {
    const std::vector<uint8_t> excluded = agreement.agree(epoch, proposal, gone, timeout_ms);
    segment.unlink();  // every rank the decision keeps has it mapped: it arrived before the decision was made
    int first = -1;
    const std::vector<int> members = members_of(excluded, &first);
    if (excluded[size_t(c->rank)]) {
      end_old(c, c->rank, "was excluded by the dfcclCommShrink of its peers");
      return nullptr;
    }
    const int new_rank = new_rank_of(c, members);
    const dfcclConfig_t cfg = config ? resolve_config(config, new_rank) : c->config;
    try {
      dfcclComm* made = comm_init(int(members.size()), local_unique_id(derived_token(c->token, shrink, epoch)),
                                  new_rank, cfg, member_exited(c, members));
      if (first >= 0) end_old(c, first, "was excluded by dfcclCommShrink");
      log(LogLevel::Info, LogSubsys::Init,
          "dfcclCommShrink: rank {} of {} is rank {} of {} of the new communicator; excluded: {} (epoch {})", c->rank,
          c->nranks, new_rank, members.size(), rank_list(excluded), epoch);
      return made;
    } catch (const Error& e) {
      if (e.code() != dfcclRemoteError) throw;
      bool went = false;  // a member that went while the communicator was made: agree again without it
      for (int r : members) {
        if (!gone(r)) continue;
        proposal[size_t(r)] = 1;
        went = true;
      }
      if (!went) throw;
      for (int r = 0; r < c->nranks; ++r) proposal[size_t(r)] |= excluded[size_t(r)];
      log(LogLevel::Info, LogSubsys::Init, "dfcclCommShrink: rank {}: {}; agreeing again without {}", c->rank, e.what(),
          rank_list(proposal));
    }
  }
  throw Error(dfcclRemoteError, fmt::format("dfcclCommShrink: ranks kept failing while the shrunk communicator was "
                                            "made ({} attempts); excluded so far: {}",
                                            ShrinkAgreement::kEpochs, rank_list(proposal)));
}

}  // namespace dfccl
