#include "bootstrap/bootstrap.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "settings/settings.h"
#include "util/error.h"
#include "util/log.h"
#include "util/process.h"

namespace dfccl {
namespace {

constexpr uint64_t kIdMagic = 0x4446434349443031ull;  // "DFCCID01"
constexpr uint64_t kSegMagic = 0x4446434253454731ull;

// The rendezvous roots this process started (make_unique_id). Each runs until its ranks have all left; finished
// ones go at the next make_unique_id, the others with the process. A forked child leaves its parent's roots alone
// (their threads and sockets are the parent's).
class Roots {
 public:
  void keep(std::shared_ptr<net::RendezvousRoot> root) {
    std::lock_guard<std::mutex> lk(mu_);
    if (getpid() != owner_) {  // a forked child: drop the parent's without touching them
      for (auto& r : live_) new std::shared_ptr<net::RendezvousRoot>(std::move(r));
      live_.clear();
      owner_ = getpid();
    }
    std::erase_if(live_, [](const auto& r) { return r->finished(); });
    live_.push_back(std::move(root));
  }
  ~Roots() {
    if (getpid() != owner_)
      for (auto& r : live_) new std::shared_ptr<net::RendezvousRoot>(std::move(r));
  }

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<net::RendezvousRoot>> live_;
  pid_t owner_ = getpid();
};

Roots& roots() {
  static Roots r;
  return r;
}

// A segment that no rank has claimed (its creator died before its claim, or every rank released its claim and died
// before removing the name) is an orphan only once this old: no live init leaves one unclaimed for long.
constexpr time_t kUnclaimedOrphanS = 600;

}  // namespace

std::string host_id() {
  if (std::string id = host_id_setting(); !id.empty()) return id;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string id = name;
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {};
    if (std::fgets(boot, sizeof(boot), f)) id += std::string(":") + boot;
    std::fclose(f);
  }
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

struct Bootstrap::Header {
  uint64_t magic;
  int64_t nranks;  // the ranks' words that follow (written by each rank that maps the segment)
  uint64_t pad[6];
};

// One per rank, after the header.
struct Bootstrap::RankWord {
  uint64_t seq;        // rounds published
  int64_t nranks;      // what this rank believes
  uint64_t owner;      // who claimed the rank: pid << 32 | a random number (0: nobody yet)
  uint64_t state;      // Bootstrap::kRunning, kAborted, kLeft or kFailed: how this rank's communicator ended
  uint64_t heartbeat;  // CLOCK_MONOTONIC ns of this rank's last beat (its PeerWatch thread)
  uint64_t pidns;      // the claimant's pid namespace (its inode; 0: unknown), in which owner's pid is meaningful
  uint64_t cause;      // kFailed: origin + 1, and the Cause << 32; written before the state
  uint64_t count;      // kLeft: the order-matched collectives it submitted; written before the state
};

Bootstrap::RankWord* Bootstrap::words() const { return reinterpret_cast<RankWord*>(static_cast<Header*>(base_) + 1); }

// kNoteSlots per rank, after the match board.
struct Bootstrap::Note {
  uint64_t posted;  // 1 once data is written
  uint64_t taken;   // readers done with it
  char data[kNoteBytes];
};

dfcclUniqueId make_unique_id() { return make_unique_id(nullptr); }

dfcclUniqueId make_unique_id(std::shared_ptr<net::RendezvousRoot>* made) {
  dfcclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  UniqueIdData d{};
  d.magic = kIdMagic;
  std::random_device rd;
  d.token = (uint64_t(rd()) << 32) ^ uint64_t(rd()) ^
            uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9e3779b97f4a7c15ull;
  d.creator_pid = uint32_t(getpid());
  std::memcpy(id.internal, &d, sizeof(d));
  try {
    auto root = std::make_shared<net::RendezvousRoot>(d.token);
    net::encode_rendezvous_id(root->id(), id);
    if (made) *made = root;
    roots().keep(std::move(root));
  } catch (const std::exception& e) {
    log(LogLevel::Warn, LogSubsys::Init, "no rendezvous root ({}): this unique id connects ranks on this host only",
        e.what());
  }
  return id;
}

dfcclUniqueId local_unique_id(uint64_t token) {
  dfcclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  UniqueIdData d{};
  d.magic = kIdMagic;
  d.token = token;
  d.creator_pid = uint32_t(getpid());
  std::memcpy(id.internal, &d, sizeof(d));
  return id;
}

UniqueIdData parse_unique_id(const dfcclUniqueId& id) {
  UniqueIdData d;
  std::memcpy(&d, id.internal, sizeof(d));
  if (d.magic != kIdMagic)
    throw Error(dfcclInvalidArgument, "argument 'commId' is not a unique id made by dfcclGetUniqueId");
  return d;
}

Bootstrap::Bootstrap(const dfcclUniqueId& id, int rank, int nranks, int timeout_ms, Areas areas,
                     const std::function<std::string()>& root_gone)
    : rank_(rank), nranks_(nranks), timeout_ms_(timeout_ms), areas_(areas) {
  const UniqueIdData d = parse_unique_id(id);
  token_ = d.token;
  const std::string host = host_id();
  host_hash_ = std::hash<std::string>{}(host);
  open_segment();
  if (!net::has_rendezvous_id(id)) return;
  try {
    rv_ = std::make_unique<net::Rendezvous>(net::parse_rendezvous_id(id), rank, nranks, host, timeout_ms, root_gone);
  } catch (...) {
    close_segment();
    throw;
  }
  hosts_ = rv_->hosts();
  if (std::all_of(hosts_.begin(), hosts_.end(), [&](const std::string& h) { return h == hosts_[0]; })) rv_.reset();
}

// Maps this host's segment of the id (creating it if this rank comes first) and claims rank_ in it. A segment this
// call created is removed again if it cannot be sized or mapped, so that a failed init leaves nothing behind.
void Bootstrap::open_segment() {
  name_ = fmt::format("/dfccl-bs-{:016x}-{:016x}", token_, host_hash_);
  remove_orphans();
  bytes_ = sizeof(Header) + sizeof(RankWord) * nranks_ + 2 * kSlotBytes * nranks_ + areas_.board_bytes +
           sizeof(Note) * kNoteSlots * nranks_ + areas_.p2p_table_bytes + areas_.agreement_bytes;
  bool created = false;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 3; ++attempt) {  // the creator may remove it between the two opens
    fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    created = fd >= 0;
    if (fd < 0 && errno == EEXIST) fd = shm_open(name_.c_str(), O_RDWR, 0600);
    if (fd < 0 && errno != ENOENT) break;
  }
  if (fd < 0) throw_system("bootstrap: shm_open " + name_);
  const auto fail = [&](const char* what) {
    const int err = errno;
    close(fd);
    if (created) shm_unlink(name_.c_str());
    errno = err;
    throw_system(fmt::format("bootstrap: {} of {} ({} bytes for {} ranks)", what, name_, bytes_, nranks_));
  };
  struct stat st;
  if (fstat(fd, &st) != 0) fail("fstat");
  if (size_t(st.st_size) < bytes_ && ftruncate(fd, off_t(bytes_)) != 0) fail("ftruncate");
  base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    fail("mmap");
  }
  close(fd);
  auto* h = static_cast<Header*>(base_);
  __atomic_store_n(&h->nranks, int64_t(nranks_), __ATOMIC_RELAXED);
  __atomic_store_n(&h->magic, kSegMagic, __ATOMIC_RELEASE);
  RankWord* words = this->words();
  // A rank is claimed once: a second caller for it (a launcher that gave two processes one rank) is refused, naming
  // the process that holds it.
  owner_ = (uint64_t(uint32_t(getpid())) << 32) | (std::random_device{}() | 1u);
  uint64_t expected = 0;
  if (!__atomic_compare_exchange_n(&words[rank_].owner, &expected, owner_, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    owner_ = 0;
    munmap(base_, bytes_);
    base_ = nullptr;
    unlinked_ = true;  // the segment is the other ranks'
    throw Error(dfcclInvalidUsage, fmt::format("communicator init: rank {} is already claimed by process {} (each "
                                               "rank of a communicator must be initialised exactly once)",
                                               rank_, expected >> 32));
  }
  __atomic_store_n(&words[rank_].pidns, pid_namespace(), __ATOMIC_RELEASE);  // 0 until now: the claim counts as alive
  __atomic_store_n(&words[rank_].state, uint64_t(kRunning), __ATOMIC_RELAXED);
  beat(now_ns());
  __atomic_store_n(&words[rank_].nranks, int64_t(nranks_), __ATOMIC_RELEASE);
}

// Caller: orphaned, claimed_ranks. Maps the segment `name` read-only and, where its header is complete, calls
// visit(words, n) on its n rank words. Returns the segment's ctime, none where it cannot be opened.
template <class F>
std::optional<time_t> Bootstrap::visit_words(const std::string& name, F&& visit) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::optional<time_t> ctime;
  if (fstat(fd, &st) == 0) {
    ctime = st.st_ctime;
    void* p = size_t(st.st_size) < sizeof(Header) ? MAP_FAILED
                                                  : mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      const auto* h = static_cast<const Header*>(p);
      const bool ready = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == kSegMagic;
      const int64_t n = __atomic_load_n(&h->nranks, __ATOMIC_RELAXED);
      if (ready && n >= 1 && sizeof(Header) + size_t(n) * sizeof(RankWord) <= size_t(st.st_size))
        visit(reinterpret_cast<const RankWord*>(h + 1), n);
      munmap(p, size_t(st.st_size));
    }
  }
  close(fd);
  return ctime;
}

// Whether the segment `name` was left by an init whose processes are all gone: every rank claimed in it was claimed
// by a process of this pid namespace (`pidns`) that has exited. A claim from another namespace, or whose namespace is
// not known, counts as alive; an unclaimed segment is judged by its age.
bool Bootstrap::orphaned(const std::string& name, uint64_t pidns) {
  bool claimed = false, alive = false;
  const std::optional<time_t> ctime = visit_words(name, [&](const RankWord* w, int64_t n) {
    for (int64_t i = 0; i < n && !alive; ++i) {
      const uint64_t owner = __atomic_load_n(&w[i].owner, __ATOMIC_ACQUIRE);
      if (owner == 0) continue;
      claimed = true;
      const uint64_t ns = __atomic_load_n(&w[i].pidns, __ATOMIC_ACQUIRE);
      alive = ns == 0 || ns != pidns || !process_exited(pid_t(owner >> 32));
    }
  });
  if (!ctime) return false;
  if (claimed) return !alive;
  return time(nullptr) - *ctime > kUnclaimedOrphanS;
}

int Bootstrap::claimed_ranks(const std::string& name) {
  int claimed = 0;
  visit_words(name, [&](const RankWord* w, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      claimed +=
          __atomic_load_n(&w[i].owner, __ATOMIC_ACQUIRE) != 0 && __atomic_load_n(&w[i].pidns, __ATOMIC_ACQUIRE) != 0;
  });
  return claimed;
}

void Bootstrap::remove_orphans() const {
  const std::string own = name_.substr(1), suffix = fmt::format("-{:016x}", host_hash_);
  const uint64_t ns = pid_namespace();
  remove_dev_shm_orphans(
      [&](const std::string& n) {
        return n.size() == own.size() && n != own && n.starts_with("dfccl-bs-") && n.ends_with(suffix) &&
               orphaned("/" + n, ns);
      },
      "left by an init whose processes are gone");
}

uint64_t Bootstrap::now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Ends `rank`'s word with `state` unless it has ended already; `extra` (cause or count, per state) is written first.
static void end_word(uint64_t* state_word, uint64_t* extra_word, uint64_t state, uint64_t extra) {
  uint64_t seen = __atomic_load_n(state_word, __ATOMIC_ACQUIRE);
  if (seen != Bootstrap::kRunning && seen != 0) return;
  if (extra_word) __atomic_store_n(extra_word, extra, __ATOMIC_RELEASE);
  __atomic_compare_exchange_n(state_word, &seen, state, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void Bootstrap::set_state(uint64_t state) { set_peer_state(rank_, state); }

void Bootstrap::set_failed(int origin, Cause cause) { set_peer_failed(rank_, origin, cause); }

void Bootstrap::set_left(uint64_t collectives) { set_peer_left(rank_, collectives); }

void Bootstrap::beat(uint64_t now) { __atomic_store_n(&words()[rank_].heartbeat, now, __ATOMIC_RELEASE); }

void* Bootstrap::board_area() const {
  return static_cast<char*>(base_) + sizeof(Header) + sizeof(RankWord) * size_t(nranks_) +
         2 * kSlotBytes * size_t(nranks_);
}

void* Bootstrap::p2p_area() const {
  return static_cast<char*>(board_area()) + areas_.board_bytes + sizeof(Note) * kNoteSlots * size_t(nranks_);
}

void* Bootstrap::agreement_area() const { return static_cast<char*>(p2p_area()) + areas_.p2p_table_bytes; }

Bootstrap::Note* Bootstrap::note(int rank, int slot) const {
  if (slot < 0 || slot >= kNoteSlots || rank < 0 || rank >= nranks_)
    throw Error(dfcclInternalError, fmt::format("bootstrap: note {} of rank {} does not exist", slot, rank));
  auto* notes = reinterpret_cast<Note*>(static_cast<char*>(board_area()) + areas_.board_bytes);
  return notes + size_t(rank) * kNoteSlots + size_t(slot);
}

void Bootstrap::post_note(int slot, const void* data, size_t bytes) {
  if (bytes > kNoteBytes) throw Error(dfcclInternalError, "bootstrap: note too large");
  Note* n = note(rank_, slot);
  std::memcpy(n->data, data, bytes);
  __atomic_store_n(&n->posted, uint64_t(1), __ATOMIC_RELEASE);
}

bool Bootstrap::read_note(int rank, int slot, void* out, size_t bytes) const {
  const Note* n = note(rank, slot);
  if (__atomic_load_n(&n->posted, __ATOMIC_ACQUIRE) == 0) return false;
  std::memcpy(out, n->data, std::min(bytes, kNoteBytes));
  return true;
}

uint64_t Bootstrap::take_note(int rank, int slot) {
  return __atomic_add_fetch(&note(rank, slot)->taken, uint64_t(1), __ATOMIC_ACQ_REL);
}

uint64_t Bootstrap::peer_state(int rank) const { return __atomic_load_n(&words()[rank].state, __ATOMIC_ACQUIRE); }

void Bootstrap::set_peer_state(int rank, uint64_t state) { end_word(&words()[rank].state, nullptr, state, 0); }

void Bootstrap::set_peer_failed(int rank, int origin, Cause cause) {
  end_word(&words()[rank].state, &words()[rank].cause, kFailed, uint64_t(uint32_t(origin + 1)) | uint64_t(cause) << 32);
}

void Bootstrap::set_peer_left(int rank, uint64_t collectives) {
  end_word(&words()[rank].state, &words()[rank].count, kLeft, collectives);
}

Bootstrap::PeerCause Bootstrap::peer_cause(int rank) const {
  const uint64_t w = __atomic_load_n(&words()[rank].cause, __ATOMIC_ACQUIRE);
  return {int(uint32_t(w)) - 1, Cause(uint32_t(w >> 32))};
}

uint64_t Bootstrap::peer_count(int rank) const { return __atomic_load_n(&words()[rank].count, __ATOMIC_ACQUIRE); }

uint64_t Bootstrap::peer_heartbeat(int rank) const {
  return __atomic_load_n(&words()[rank].heartbeat, __ATOMIC_ACQUIRE);
}

Bootstrap::~Bootstrap() {
  rv_.reset();
  close_segment();
}

// Releases the claim (a failed init may be retried with the same id), unmaps the segment and removes its name.
void Bootstrap::close_segment() {
  if (base_ && owner_) {  // release the claim: a failed init may be retried with the same id
    RankWord* words = this->words();
    uint64_t mine = owner_;
    __atomic_compare_exchange_n(&words[rank_].owner, &mine, uint64_t(0), false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  if (base_) munmap(base_, bytes_);
  base_ = nullptr;
  if (!unlinked_) shm_unlink(name_.c_str());  // harmless if another rank already did
  unlinked_ = true;
}

void Bootstrap::unlink() {
  if (!unlinked_) shm_unlink(name_.c_str());
  unlinked_ = true;
}

// Waits until every rank of the segment has stored round `seq`'s contribution; dfcclTimeout naming the missing ranks
// after timeout_ms, dfcclInvalidUsage when ranks disagree on nranks.
void Bootstrap::wait_round(uint64_t seq, int timeout_ms) const {
  RankWord* words = this->words();
  auto missing = [&] {
    std::vector<int> who;
    for (int i = 0; i < nranks_; ++i)
      if (__atomic_load_n(&words[i].seq, __ATOMIC_ACQUIRE) < seq) who.push_back(i);
    return who;
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto sleep = std::chrono::microseconds(1);
  auto watched = t0;
  for (std::vector<int> who = missing(); !who.empty(); who = missing()) {
    if (gone_ && std::chrono::steady_clock::now() - watched > std::chrono::milliseconds(5)) {
      watched = std::chrono::steady_clock::now();
      for (int i : who) {
        const std::string why = gone_(i);
        // Read again after the answer: a rank that entered the round before it went is not missing.
        if (!why.empty() && __atomic_load_n(&words[i].seq, __ATOMIC_ACQUIRE) < seq)
          throw Error(dfcclRemoteError,
                      fmt::format("bootstrap: rank {} of {} {} before entering round {}", i, nranks_, why, seq));
      }
    }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(timeout_ms)) {
      std::string list;
      for (size_t k = 0; k < who.size() && k < 16; ++k) list += (k ? "," : "") + std::to_string(who[k]);
      throw Error(dfcclTimeout,
                  fmt::format("bootstrap: rank {} of {} waited {} ms for ranks [{}]{} (do all ranks call init with "
                              "the same id and nranks? timeout: DFCCL_INIT_TIMEOUT_MS or config.initTimeoutMs)",
                              rank_, nranks_, timeout_ms, list, who.size() > 16 ? ",..." : ""));
    }
    std::this_thread::sleep_for(sleep);
    if (sleep < std::chrono::microseconds(200)) sleep *= 2;
  }
  for (int i = 0; i < nranks_; ++i) {
    const int64_t theirs = __atomic_load_n(&words[i].nranks, __ATOMIC_ACQUIRE);
    if (theirs != nranks_)
      throw Error(dfcclInvalidUsage,
                  fmt::format("bootstrap: rank {} was initialised with nranks={} but rank {} with nranks={}", rank_,
                              nranks_, i, theirs));
  }
}

void Bootstrap::allgather(const void* mine, size_t bytes, void* all, int timeout_ms) {
  if (bytes > kSlotBytes) throw Error(dfcclInternalError, "bootstrap: allgather contribution too large");
  if (rv_) return rv_->allgather(mine, bytes, all, timeout_ms);
  RankWord* words = this->words();
  char* data = reinterpret_cast<char*>(words + nranks_);
  const uint64_t r = round_++;
  char* buf = data + (r % 2) * kSlotBytes * nranks_;
  std::memcpy(buf + size_t(rank_) * kSlotBytes, mine, bytes);
  __atomic_store_n(&words[rank_].seq, r + 1, __ATOMIC_RELEASE);
  wait_round(r + 1, timeout_ms < 0 ? timeout_ms_ : timeout_ms);
  for (int i = 0; i < nranks_; ++i)
    std::memcpy(static_cast<char*>(all) + size_t(i) * bytes, buf + size_t(i) * kSlotBytes, bytes);
}

void Bootstrap::barrier(int timeout_ms) {
  if (rv_) return rv_->barrier(timeout_ms);
  char c = 0;
  std::vector<char> all(static_cast<size_t>(nranks_));
  allgather(&c, 1, all.data(), timeout_ms);
}

}  // namespace dfccl
