#include "match/match_board.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "util/names.h"

namespace dfccl {
namespace {

bool reduces(core::Kind k) {
  return k == core::Kind::AllReduce || k == core::Kind::ReduceScatter || k == core::Kind::Reduce;
}
bool rooted(core::Kind k) { return k == core::Kind::Broadcast || k == core::Kind::Reduce; }

uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

// An entry of the board is a seqlock written by its rank only: its first word is the tag (0 while the other words
// are rewritten), the rest its fields. write_entry stores v into e, then fences so that the caller's reads of other
// entries come after it is visible; read_entry copies e into *out and returns whether it was stable and tagged `tag`.
template <class E>
void write_entry(E* e, const E& v) {
  static_assert(sizeof(E) % 8 == 0);
  auto* w = reinterpret_cast<uint64_t*>(e);
  const auto* src = reinterpret_cast<const uint64_t*>(&v);
  __atomic_store_n(&w[0], uint64_t(0), __ATOMIC_RELAXED);
  std::atomic_thread_fence(std::memory_order_release);
  for (size_t i = 1; i < sizeof(E) / 8; ++i) __atomic_store_n(&w[i], src[i], __ATOMIC_RELAXED);
  __atomic_store_n(&w[0], src[0], __ATOMIC_RELEASE);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
template <class E>
bool read_entry(const E* e, uint64_t tag, E* out) {
  const auto* w = reinterpret_cast<const uint64_t*>(e);
  auto* dst = reinterpret_cast<uint64_t*>(out);
  dst[0] = load(&w[0]);
  for (size_t i = 1; i < sizeof(E) / 8; ++i) dst[i] = __atomic_load_n(&w[i], __ATOMIC_RELAXED);
  std::atomic_thread_fence(std::memory_order_acquire);
  return dst[0] == tag && __atomic_load_n(&w[0], __ATOMIC_RELAXED) == tag;
}

}  // namespace

// One signature, written by its rank only, read by the others as a seqlock: `tag` (key + 1; 0 while it is
// rewritten) before and after the fields.
struct MatchBoard::Entry {
  uint64_t tag;
  uint64_t count;
  uint64_t shape;  // kind | dtype << 8 | op << 16 | uint32(root) << 32
  uint64_t pad;
};

struct MatchBoard::Header {
  uint64_t state;  // 0: no mismatch; 1: a rank is writing one; 2: `text` holds it
  char text[504];
};

// A point-to-point signature, written by its side's rank only, read as a seqlock like Entry: tag = k + 1.
struct MatchBoard::P2pEntry {
  uint64_t tag;
  uint64_t word;  // count | dtype << 56 (counts are below 2^48)
};

size_t MatchBoard::bytes(int nranks) {
  const size_t n = size_t(nranks);
  // Every lane, captured ones too: the segment is sparse, and lanes never posted take no memory.
  return sizeof(Header) + n * (kRingKeys + core::kOwnLanes) * sizeof(Entry) +
         kP2pGraphLanes * 2 * n * n * kP2pKeys * sizeof(P2pEntry);
}

MatchBoard::MatchBoard(std::shared_ptr<Bootstrap> segment, uint32_t seq_lanes)
    : segment_(std::move(segment)),
      base_(static_cast<char*>(segment_->board_area())),
      rank_(segment_->rank()),
      nranks_(segment_->nranks()),
      seq_lanes_(seq_lanes ? seq_lanes : 1) {
  names_.nranks = nranks_;
}

MatchBoard::Header* MatchBoard::header() const { return reinterpret_cast<Header*>(base_); }
MatchBoard::Entry* MatchBoard::ring(int rank) const {
  return reinterpret_cast<Entry*>(base_ + sizeof(Header)) + size_t(rank) * (kRingKeys + core::kOwnLanes);
}
MatchBoard::Entry* MatchBoard::persistent(int rank) const { return ring(rank) + kRingKeys; }
MatchBoard::Entry* MatchBoard::slot(int rank, const MatchKey& key) const {
  return key.id < 0 ? ring(rank) + key.n % kRingKeys : persistent(rank) + key.id;
}
MatchBoard::P2pEntry* MatchBoard::p2p_slot(const P2pKey& key, bool send_side) const {
  const size_t n = size_t(nranks_);
  auto* base = reinterpret_cast<P2pEntry*>(ring(nranks_));  // after every rank's ring and persistent entries
  const size_t pair = ((size_t(key.lane) * 2 + (send_side ? 0 : 1)) * n + size_t(key.src)) * n + size_t(key.dst);
  return base + pair * kP2pKeys + key.k % kP2pKeys;
}

MatchBoard::Signature MatchBoard::signature(const core::Desc& d) {
  return {d.count, uint64_t(d.kind) | uint64_t(d.dtype) << 8 | uint64_t(d.op) << 16 | uint64_t(uint32_t(d.root)) << 32};
}

uint64_t MatchBoard::p2p_signature(const core::Desc& d) { return d.count | uint64_t(d.dtype) << 56; }

std::string MatchBoard::post(const MatchKey& key, const core::Desc& d) { return place(rank_, key, signature(d)); }

std::string MatchBoard::mirror(int rank, const MatchKey& key, const Signature& sig) {
  if (rank < 0 || rank >= nranks_ || rank == rank_ || (key.id >= 0 && key.id >= int(core::kOwnLanes))) return {};
  return place(rank, key, sig);
}

// Writes rank's entry for key, then compares it with every other row's (the peers' entries are read after it is
// visible).
std::string MatchBoard::place(int rank, const MatchKey& key, const Signature& sig) {
  const Entry mine{key.n + 1, sig.count, sig.shape, 0};
  write_entry(slot(rank, key), mine);
  for (int p = 0; p < nranks_; ++p) {
    Entry theirs{};
    if (p == rank || !read_entry(slot(p, key), mine.tag, &theirs)) continue;
    std::string m = compare(key, rank, mine, p, theirs);
    if (!m.empty()) return publish_first(m);
  }
  return {};
}

std::string MatchBoard::post_p2p(const P2pKey& key, const core::Desc& d) {
  return place_p2p(key, d.kind == core::Kind::Send, p2p_signature(d));
}

std::string MatchBoard::mirror_p2p(const P2pKey& key, bool send_side, uint64_t word) {
  const int mine = send_side ? key.src : key.dst;
  if (key.lane >= kP2pGraphLanes || key.src < 0 || key.src >= nranks_ || key.dst < 0 || key.dst >= nranks_ ||
      mine == rank_)
    return {};
  return place_p2p(key, send_side, word);
}

// Writes one side's entry of a point-to-point transfer, then compares it with the other side's.
std::string MatchBoard::place_p2p(const P2pKey& key, bool sending, uint64_t word) {
  const P2pEntry mine{key.k + 1, word};
  write_entry(p2p_slot(key, sending), mine);  // the other side's entry is read after mine is visible
  P2pEntry other{};
  if (!read_entry(p2p_slot(key, !sending), mine.tag, &other) || other.word == mine.word) return {};
  const uint64_t send_word = sending ? mine.word : other.word, recv_word = sending ? other.word : mine.word;
  return publish_first(p2p_message(key, send_word, recv_word));
}

std::string MatchBoard::p2p_message(const P2pKey& key, uint64_t send_word, uint64_t recv_word) const {
  std::string field, a, b;
  if ((send_word >> 56) != (recv_word >> 56)) {
    field = "argument 'datatype'";
    a = name_of(kTypeNames, uint32_t(send_word >> 56));
    b = name_of(kTypeNames, uint32_t(recv_word >> 56));
  } else {
    field = "argument 'count'";
    a = fmt::format("{}", send_word & ((uint64_t(1) << 56) - 1));
    b = fmt::format("{}", recv_word & ((uint64_t(1) << 56) - 1));
  }
  const char* captured = p2p_captured_lane(key.lane) ? "captured " : "";
  const std::string which =
      key.lane % kP2pLanes == kP2pUser
          ? fmt::format("{}dfcclSend #{} from rank {} to rank {} and the matching dfcclRecv", captured, key.k, key.src,
                        key.dst)
          : fmt::format("the transfer from rank {} to rank {} of {}all-to-all #{}", key.src, key.dst, captured, key.k);
  return fmt::format("point-to-point mismatch on a communicator of {} ranks, {}: {} is {} on the sender (rank {}) but "
                     "{} on the receiver (rank {})",
                     nranks_, which, field, a, key.src, b, key.dst);
}

// A peer's entry below the key's tag is not here yet (pending); above it, rewritten for a later key (not comparable).
std::string MatchBoard::settled(const core::Desc& d, bool* pending) const {
  *pending = false;
  if (!across_hosts_) return {};
  if (core::is_p2p(d.kind)) return settled_p2p(d, pending);
  const MatchKey key = key_of(d);
  Entry mine{};
  if (!read_entry(slot(rank_, key), key.n + 1, &mine)) return {};  // rewritten for a later key: not comparable
  for (int p = 0; p < nranks_; ++p) {
    Entry theirs{};
    if (p == rank_) continue;
    if (read_entry(slot(p, key), key.n + 1, &theirs)) {
      if (std::string m = compare(key, rank_, mine, p, theirs); !m.empty()) return m;
    } else if (load(&slot(p, key)->tag) < key.n + 1) {
      *pending = true;  // not arrived here yet (a later key's entry cannot be compared)
    }
  }
  return {};
}

std::string MatchBoard::settled_p2p(const core::Desc& d, bool* pending) const {
  const bool sending = d.kind == core::Kind::Send;
  const P2pKey key{d.lane, sending ? rank_ : d.root, sending ? d.root : rank_, d.turn};
  P2pEntry mine{}, other{};
  if (!read_entry(p2p_slot(key, sending), key.k + 1, &mine)) return {};
  if (!read_entry(p2p_slot(key, !sending), key.k + 1, &other)) {
    *pending = load(&p2p_slot(key, !sending)->tag) < key.k + 1;
    return {};
  }
  if (other.word == mine.word) return {};
  return sending ? p2p_message(key, mine.word, other.word) : p2p_message(key, other.word, mine.word);
}

std::string MatchBoard::compare(const MatchKey& key, int rank, const Entry& mine, int peer, const Entry& theirs) const {
  const auto kind = core::Kind(mine.shape & 0xff), their_kind = core::Kind(theirs.shape & 0xff);
  std::string field, a, b;
  if (kind != their_kind) {
    field = "the collective";
    a = name_of(kKindNames, uint32_t(kind));
    b = name_of(kKindNames, uint32_t(their_kind));
  } else if ((mine.shape >> 8 & 0xff) != (theirs.shape >> 8 & 0xff)) {
    field = "argument 'datatype'";
    a = name_of(kTypeNames, uint32_t(mine.shape >> 8 & 0xff));
    b = name_of(kTypeNames, uint32_t(theirs.shape >> 8 & 0xff));
  } else if (mine.count != theirs.count) {
    field = "argument 'count'";
    a = fmt::format("{}", mine.count * names_.count_scale);
    b = fmt::format("{}", theirs.count * names_.count_scale);
  } else if (reduces(kind) && (mine.shape >> 16 & 0xff) != (theirs.shape >> 16 & 0xff)) {
    field = "argument 'op'";
    a = name_of(kOpNames, uint32_t(mine.shape >> 16 & 0xff));
    b = name_of(kOpNames, uint32_t(theirs.shape >> 16 & 0xff));
  } else if (rooted(kind) && (mine.shape >> 32) != (theirs.shape >> 32)) {
    field = "argument 'root'";
    a = fmt::format("{}", int32_t(mine.shape >> 32));
    b = fmt::format("{}", int32_t(theirs.shape >> 32));
  } else {
    return {};
  }
  std::string which = key.id < 0 ? fmt::format("collective #{} in submission order", key.n)
                                 : fmt::format("persistent collective id {} (start #{})", key.id, key.n);
  if (!names_.collective.empty()) which = fmt::format("collective #{} {}", key.n, names_.collective);
  return fmt::format("collective mismatch on a communicator of {} ranks, {}: {} is {} on rank {} but {} on rank {}",
                     names_.nranks, which, field, a, name_of_rank(rank), b, name_of_rank(peer));
}

void MatchBoard::publish(const std::string& message) {
  Header* h = header();
  uint64_t expected = 0;
  if (!__atomic_compare_exchange_n(&h->state, &expected, uint64_t(1), false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return;  // another rank's mismatch is (being) published: the first one stands
  const size_t n = std::min(message.size(), sizeof(h->text) - 1);
  std::memcpy(h->text, message.data(), n);
  h->text[n] = '\0';
  __atomic_store_n(&h->state, uint64_t(2), __ATOMIC_RELEASE);
}

std::string MatchBoard::publish_first(const std::string& message) {
  publish(message);
  const std::string first = published_wait();  // every rank reports the same, first, finding
  return first.empty() ? message : first;
}

// The published mismatch, once its writer (this rank or a peer that claimed the header first) has finished it.
std::string MatchBoard::published_wait() const {
  for (int i = 0; i < 1000000; ++i)
    if (load(&header()->state) == 2) return published();
  return published();  // "" if a writer died mid-copy: the caller reports its own finding
}

std::string MatchBoard::published() const {
  const Header* h = header();
  if (load(&h->state) != 2) return {};
  return std::string(h->text);
}

std::vector<int> MatchBoard::not_arrived(const MatchKey& key) const {
  std::vector<int> out;
  for (int p = 0; p < nranks_; ++p)
    if (load(&slot(p, key)->tag) < key.n + 1) out.push_back(p);  // keys are posted in order: a later one implies it
  return out;
}

// A Send or Recv: whether its other side has posted the matching transfer (Desc: root = the peer, lane and turn =
// the point-to-point lane and k).
MatchKey MatchBoard::key_of(const core::Desc& d) const {
  MatchKey key;
  if (d.lane < seq_lanes_) {
    key.n = d.turn * seq_lanes_ + d.lane;
  } else {
    key.id = int(d.lane - seq_lanes_);
    key.n = d.turn;
  }
  return key;
}

// A Send or Recv (Desc: root = the peer, lane and turn = the point-to-point lane and k): whether the peer has posted
// the matching other side.
bool MatchBoard::p2p_other_side_posted(const core::Desc& d) const {
  if (p2p_captured_lane(d.lane)) return true;  // compared at capture: the peer captured it (turn is a replay's)
  const bool sending = d.kind == core::Kind::Send;
  const P2pKey key{d.lane, sending ? rank_ : d.root, sending ? d.root : rank_, d.turn};
  return load(&p2p_slot(key, !sending)->tag) >= key.k + 1;  // keys are posted in order: a later one implies it
}

std::string MatchBoard::missing_p2p(const core::Desc& d) const {
  const bool sending = d.kind == core::Kind::Send;
  const int peer = d.root;
  const std::string which =
      d.lane == kP2pUser
          ? fmt::format("{} #{} {} rank {}", sending ? "dfcclSend" : "dfcclRecv", d.turn, sending ? "to" : "from", peer)
      : d.lane == kP2pAllToAll
          ? fmt::format("all-to-all #{}'s transfer {} rank {}", d.turn, sending ? "to" : "from", peer)
          : fmt::format(
                "a captured {} {} rank {} (turn {} of the graphs' transfers)",
                d.lane % kP2pLanes == kP2pUser ? (sending ? "dfcclSend" : "dfcclRecv") : "all-to-all's transfer",
                sending ? "to" : "from", peer, d.turn);
  if (p2p_captured_lane(d.lane)) return which + ", captured by both sides (its replay may not have started there)";
  if (p2p_other_side_posted(d)) return which + ", posted by both sides";
  return fmt::format("{}, not posted yet by rank {} (its {})", which, peer, sending ? "receive" : "send");
}

void MatchBoard::set_names(Names names) {
  names_ = std::move(names);
  if (names_.parent) parent_keys_ = std::make_unique<std::atomic<uint64_t>[]>(kRingKeys);  // all 0 (C++20)
}

// Stage keys are sequence keys (id -1), parent keys too (a hierarchical all-reduce is never persistent). An entry is
// rewritten only kRingKeys stage keys later, more than an engine holds pending.
void MatchBoard::set_parent_key(const MatchKey& key, const MatchKey& parent_key) {
  if (parent_keys_ && key.id < 0 && parent_key.id < 0)
    parent_keys_[key.n % kRingKeys].store(parent_key.n + 1, std::memory_order_release);
}

bool MatchBoard::parent_key_known(const MatchKey& key, MatchKey* parent) const {
  if (!parent_keys_ || key.id >= 0) return false;
  const uint64_t v = parent_keys_[key.n % kRingKeys].load(std::memory_order_acquire);
  parent->n = v - 1;
  return v != 0;
}

std::string MatchBoard::missing(const core::Desc& d) const {
  if (core::is_p2p(d.kind)) return missing_p2p(d);
  const MatchKey key = key_of(d);
  std::string text = missing_key(key);
  MatchKey parent;
  if (parent_key_known(key, &parent)) text += "; the application's collective: " + names_.parent->missing_key(parent);
  return text;
}

std::string MatchBoard::missing_key(const MatchKey& key) const {
  std::string which = key.id < 0 ? fmt::format("#{} of its communicator", key.n)
                                 : fmt::format("persistent id {} start #{}", key.id, key.n);
  if (!names_.collective.empty()) which = fmt::format("#{} {}", key.n, names_.collective);
  std::vector<int> ranks = not_arrived(key);
  for (int& r : ranks) r = name_of_rank(r);
  if (ranks.empty()) return which + ", called by every rank";
  return fmt::format("{}, not called yet by rank{} {}", which, ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", "));
}

std::vector<int> MatchBoard::missing_ranks(const core::Desc& d) const {
  if (core::is_p2p(d.kind)) return p2p_other_side_posted(d) ? std::vector<int>{} : std::vector<int>{d.root};
  const MatchKey key = key_of(d);
  std::vector<int> ranks = not_arrived(key);
  for (int& r : ranks) r = name_of_rank(r);
  MatchKey parent;
  if (parent_key_known(key, &parent)) {
    for (int r : names_.parent->not_arrived(parent)) ranks.push_back(r);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  }
  return ranks;
}

}  // namespace dfccl
