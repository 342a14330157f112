// rendezvous_peer: one process of the network rendezvous tests (rendezvous_test, tests/netns/).
//   rendezvous_peer serve --id-file F [--ifname SPEC]
//       starts a root service (DFCCL_SOCKET_IFNAME unless --ifname), writes the unique id as hex to F (atomically),
//       prints "ROOT <address> <interface>" and exits 0 once every rank has left (2 after 120 s).
//   rendezvous_peer rank (--id HEX | --id-file F) --nranks N [--rank R] [--rounds K] [--timeout-ms T] [--host H]
//                   [--hang-after K]
//       registers as rank R (default: $OMPI_COMM_WORLD_RANK) with host id H (default: the host name), runs K
//       allgather rounds of rank- and round-dependent data of growing size plus a barrier each, checks every byte,
//       and prints "rank R ok hosts=<h0>,<h1>,..." (then exits 0). --hang-after K: after K rounds it prints "READY"
//       and sleeps (the test kills it).
// Exit codes: 0 right, 1 usage or set-up error, 2 a dfccl::Error (printed as "error <code>: <message>"), 3 wrong data.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/rendezvous.h"
#include "unique_id_hex.h"
#include "util/error.h"

namespace {

using namespace dfccl;
using Clock = std::chrono::steady_clock;

using dfccl::test::id_from_hex;
using dfccl::test::id_to_hex;

int usage(const std::string& why) {
  std::fprintf(stderr, "rendezvous_peer: %s\n", why.c_str());
  return 1;
}

// The id in file `path`, waiting up to 30 s for it to appear.
std::string read_id_file(const std::string& path) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    std::ifstream f(path);
    std::string hex;
    if (f >> hex && hex.size() == 2 * DFCCL_UNIQUE_ID_BYTES) return hex;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

int serve(std::map<std::string, std::string>& opt) {
  const std::string path = opt["--id-file"];
  if (path.empty()) return usage("serve needs --id-file");
  std::random_device rd;
  const uint64_t token = (uint64_t(rd()) << 32) ^ rd();
  std::unique_ptr<net::RendezvousRoot> root;
  if (opt.count("--ifname")) root = std::make_unique<net::RendezvousRoot>(token, opt["--ifname"]);
  else root = std::make_unique<net::RendezvousRoot>(token);
  dfcclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  net::encode_rendezvous_id(root->id(), id);
  {
    std::ofstream f(path + ".tmp");
    f << id_to_hex(id) << "\n";
  }
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) return usage("cannot write " + path);
  std::printf("ROOT %s %s\n", root->id().to_string().c_str(), root->interface_name().c_str());
  std::fflush(stdout);
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!root->finished() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return root->finished() ? 0 : 2;
}

uint8_t pattern(int rank, int round, size_t i) { return uint8_t(rank * 131 + round * 17 + i * 7); }

struct RankArgs {
  dfcclUniqueId id;
  int rank = -1, nranks = 0, rounds = 3, timeout_ms = 20000, hang_after = -1;
  std::string host;
};

// The rank's options; an empty string when they are complete, else what is wrong.
std::string parse_rank_args(std::map<std::string, std::string>& opt, RankArgs& a) {
  const std::string hex = opt.count("--id")        ? opt["--id"]
                          : opt.count("--id-file") ? read_id_file(opt["--id-file"])
                                                   : "";
  if (!id_from_hex(hex, &a.id)) return "rank needs --id HEX or --id-file F with a 256-digit id";
  const char* env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string rank_s = opt.count("--rank") ? opt["--rank"] : env_rank ? env_rank : "";
  if (rank_s.empty() || !opt.count("--nranks")) return "rank needs --nranks and --rank (or OMPI_COMM_WORLD_RANK)";
  auto num = [&](const char* name, int def) { return opt.count(name) ? std::atoi(opt[name].c_str()) : def; };
  a.rank = std::atoi(rank_s.c_str());
  a.nranks = num("--nranks", 0);
  a.rounds = num("--rounds", 3);
  a.timeout_ms = num("--timeout-ms", 20000);
  a.hang_after = num("--hang-after", -1);
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  a.host = opt.count("--host") ? opt["--host"] : hostname;
  return "";
}

// Round r of the rank: an allgather of rank- and round-dependent bytes, checked, then a barrier; false if wrong.
bool one_round(net::Rendezvous& rv, int r) {
  const int rank = rv.rank(), nranks = rv.nranks();
  const size_t bytes = std::min<size_t>(net::Rendezvous::kMaxBytes, size_t(r) * 509 % 4097);
  std::vector<uint8_t> mine(bytes), all(bytes * size_t(nranks));
  for (size_t i = 0; i < bytes; ++i) mine[i] = pattern(rank, r, i);
  rv.allgather(mine.data(), bytes, all.data());
  for (int q = 0; q < nranks; ++q)
    for (size_t i = 0; i < bytes; ++i)
      if (all[size_t(q) * bytes + i] != pattern(q, r, i)) {
        std::fprintf(stderr, "rank %d: round %d, rank %d's byte %zu is wrong\n", rank, r, q, i);
        return false;
      }
  rv.barrier();
  return true;
}

int run_rank(std::map<std::string, std::string>& opt) {
  RankArgs a;
  const std::string bad = parse_rank_args(opt, a);
  if (!bad.empty()) return usage(bad);
  net::Rendezvous rv(net::parse_rendezvous_id(a.id), a.rank, a.nranks, a.host, a.timeout_ms);
  for (int r = 0; r < a.rounds; ++r) {
    if (r == a.hang_after) {
      std::printf("READY\n");
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 1;
    }
    if (!one_round(rv, r)) return 3;
  }
  std::string hosts;
  for (const auto& h : rv.hosts()) hosts += (hosts.empty() ? "" : ",") + h;
  std::printf("rank %d ok hosts=%s\n", a.rank, hosts.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("usage: rendezvous_peer serve|rank [--option value]...");
  std::map<std::string, std::string> opt;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc || std::strncmp(argv[i], "--", 2) != 0) return usage(std::string("bad argument ") + argv[i]);
    opt[argv[i]] = argv[i + 1];
  }
  try {
    if (std::strcmp(argv[1], "serve") == 0) return serve(opt);
    if (std::strcmp(argv[1], "rank") == 0) return run_rank(opt);
    return usage(std::string("unknown mode ") + argv[1]);
  } catch (const Error& e) {
    std::printf("error %d: %s\n", int(e.code()), e.what());
    return 2;
  }
}
