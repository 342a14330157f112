#include "workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "scenario.h"  // common/: the simulator's layouts, for a replay

namespace dfccl::harness {
namespace {

enum class Type { Int, Float, Bool, String, Bytes, StringList, Weights };

std::string_view type_text(Type t) {
  switch (t) {
    case Type::Int: return "an integer";
    case Type::Float: return "a number";
    case Type::Bool: return "true or false";
    case Type::String: return "a string";
    case Type::Bytes: return "a size in bytes (8, 64K, 1M, 1GiB)";
    case Type::StringList: return "a list of strings (or one comma-separated string)";
    case Type::Weights: return "a table of name = weight (or a list of names)";
  }
  return "?";
}

// The settings table: every knob, its type, its default (as TOML) and its meaning. docs/harness.md mirrors it.
struct Setting {
  const char* key;
  Type type;
  const char* default_toml;  // the value, written as TOML
  const char* help;
};

const Setting kSettings[] = {
    {"name", Type::String, "''", "workload name (default: the file name without .toml)"},
    {"description", Type::String, "''", "what the workload is"},
    {"source", Type::String, "''", "where its sizes come from"},
    {"kind", Type::String, "''",
     "sweep | mix | step | replay (default: step if [[step]] entries exist, mix if [mix], replay if [sim], else sweep)"},
    {"run.backend", Type::StringList, "['auto']",
     "backends to run, in order: dfccl, dfccl-blocking, nccl, nccl-graph (NCCL, each timing span captured into a "
     "CUDA graph and replayed: nccl-tests -G), host, host-blocking; auto = dfccl,nccl with GPUs, else host"},
    {"run.iterations", Type::Int, "20", "timed iterations per trial (nccl-tests -n)"},
    {"run.warmup", Type::Int, "5", "untimed warm-up iterations per trial (nccl-tests -w)"},
    {"run.trials", Type::Int, "1", "trials per case; each trial is watched by the watchdog and may deadlock"},
    {"run.timeout", Type::Float, "60.0",
     "seconds without progress on any rank (a program step or a wait returning) before a trial is declared "
     "deadlocked"},
    {"run.seed", Type::Int, "1", "seed of the data, the mix and every random decision"},
    {"run.check", Type::Bool, "true", "run one more, untimed iteration per trial and count wrong elements"},
    {"run.diagnose", Type::Bool, "false",
     "on a trial the watchdog stops, print each rank's position in its program and its backend's state to stderr"},
    {"run.completion", Type::String, "'stream'",
     "dfccl: how the result becomes usable: stream (dfcclWait on the stream; host executor: dfcclWait) | host "
     "(dfcclSynchronize) | callback (dfcclRequestSetCallback)"},
    {"run.order", Type::String, "'stream'",
     "dfccl on GPUs: how a collective's inputs are ordered: stream (after the work queued on its stream) | host "
     "(DFCCL_NO_STREAM: ready when submitted; no CUDA call at submission; needs run.completion host or callback)"},
    {"run.streams", Type::String, "'single'", "GPU backends: single (one stream) | per_group (one per group kind)"},
    {"run.nccl_comms", Type::String, "'auto'",
     "nccl backend: blocking | nonblocking communicators; auto: blocking for sweep workloads (NCCL's fast path), "
     "nonblocking otherwise (a deadlock is then recoverable even inside an enqueue)"},
    {"run.timing", Type::String, "'iteration'",
     "iteration (a timing mark before and after every iteration) | batch (nccl-tests' method: marks only around "
     "batches of run.batch timed iterations; each iteration gets its batch's mean)"},
    {"run.batch", Type::Int, "10", "batch timing: timed iterations per batch (the last batch may be shorter)"},
    {"layout.tp", Type::Int, "1", "tensor-parallel group size"},
    {"layout.dp", Type::Int, "0", "data-parallel group size (0: world size / (tp * pp))"},
    {"layout.pp", Type::Int, "1", "pipeline-parallel group size"},
    {"data.dtype", Type::String, "'float32'",
     "int8 uint8 int32 uint32 int64 uint64 float16 float32 float64 bfloat16 (nccl-tests -d)"},
    {"data.op", Type::String, "'sum'", "sum prod max min avg (nccl-tests -o)"},
    {"data.root", Type::Int, "0", "root of broadcast and reduce, a rank of the group (nccl-tests -r)"},
    {"data.priority", Type::Int, "0", "priority of every collective (dfccl; higher runs first)"},
    {"sizes.begin", Type::Bytes, "33554432", "smallest size S in bytes (nccl-tests -b)"},
    {"sizes.end", Type::Bytes, "33554432", "largest size S in bytes (nccl-tests -e)"},
    {"sizes.factor", Type::Float, "2.0", "multiplication factor between sizes (nccl-tests -f)"},
    {"sweep.collectives", Type::StringList, "['all_reduce']",
     "collectives of the sweep: all_reduce all_gather reduce_scatter broadcast reduce"},
    {"sweep.group", Type::String, "'world'", "group of the sweep: world tp dp pp"},
    {"mix.count", Type::Int, "8", "collectives per step of a mix"},
    {"mix.collectives", Type::Weights, "{ all_reduce = 1 }", "collectives of the mix and their relative weights"},
    {"mix.groups", Type::StringList, "['world']", "groups the mix draws from (uniformly)"},
    {"mix.per_trial", Type::Bool, "true", "draw a new step for every trial (else one step for the whole run)"},
    {"mix.priority_max", Type::Int, "0", "each collective gets a random priority in [0, priority_max]"},
    {"sim.layout", Type::String, "''",
     "replay: the simulator's layout (megatron:TPxDPxPP, random:NxKxM[@S], groups:0,1;1,2;...; docs/simulator.md)"},
    {"sim.colls", Type::Int, "10", "replay: collectives per group per trial (dfccl-sim --colls)"},
    {"sim.disorder", Type::Float, "0.0", "replay: disorder probability of the scenarios (dfccl-sim --disorder)"},
    {"sim.sync", Type::Float, "0.0", "replay: sync probability after each submission (dfccl-sim --sync)"},
    {"sim.seed", Type::Int, "1", "replay: the scenarios' base seed (dfccl-sim --seed)"},
    {"sim.first_trial", Type::Int, "0", "replay: harness trial t replays the scenario's trial first_trial + t"},
    {"sim.coll", Type::String, "'all_reduce'", "replay: the collective every submission posts"},
    {"sim.bytes", Type::Bytes, "64", "replay: size S in bytes of every replayed collective"},
    {"order.probability", Type::Float, "0.0",
     "per rank and iteration: probability of a random interleaving of the groups' collectives (each group's own "
     "order is kept)"},
    {"sync.probability", Type::Float, "0.0", "probability of a forced cudaDeviceSynchronize at each placement point"},
    {"sync.placement", Type::String, "'between'",
     "between (after a submission, before the next) | before_wait (once after all submissions)"},
    {"host_alloc.probability", Type::Float, "0.0", "probability of a host allocation after each submission"},
    {"host_alloc.bytes", Type::Bytes, "1048576", "size of each host allocation"},
    {"host_alloc.kinds", Type::StringList, "['malloc_host', 'free_host', 'host_register']",
     "malloc_host (cudaMallocHost, freed after the step) | free_host (cudaMallocHost + cudaFreeHost) | "
     "host_register (cudaHostRegister + unregister)"},
    {"implicit.cuda_free_probability", Type::Float, "0.0", "probability of cudaMalloc + cudaFree after a submission"},
    {"implicit.lazy_kernel_probability", Type::Float, "0.0",
     "probability of the first launch of a not yet loaded kernel after a submission (lazy module loading)"},
    {"compute.duration_us", Type::Float, "0.0", "duration of a compute kernel between collectives (0: none)"},
    {"compute.probability", Type::Float, "1.0", "probability of a compute kernel after each submission"},
};

// Keys of a [[step]] entry.
const Setting kStepSettings[] = {
    {"coll", Type::String, "'all_reduce'", "collective (required)"},
    {"group", Type::String, "'world'", "group kind"},
    {"bytes", Type::Bytes, "0", "size S in bytes (required)"},
    {"root", Type::Int, "-1", "root (default: data.root)"},
    {"priority", Type::Int, "-1", "priority (default: data.priority)"},
    {"repeat", Type::Int, "1", "how many consecutive copies of this entry"},
    {"label", Type::String, "''", "what the entry stands for (a layer, a bucket)"},
};

const std::map<std::string, std::string> kAliases = {
    {"backend", "run.backend"},      {"backends", "run.backend"},   {"iters", "run.iterations"},
    {"iterations", "run.iterations"}, {"warmup", "run.warmup"},     {"trials", "run.trials"},
    {"timeout", "run.timeout"},      {"seed", "run.seed"},          {"check", "run.check"},
    {"diagnose", "run.diagnose"},    {"completion", "run.completion"}, {"order", "run.order"}, {"streams", "run.streams"},
    {"nccl_comms", "run.nccl_comms"}, {"timing", "run.timing"},     {"batch", "run.batch"},
    {"tp", "layout.tp"},             {"dp", "layout.dp"},           {"pp", "layout.pp"},
    {"dtype", "data.dtype"},
    {"op", "data.op"},               {"root", "data.root"},         {"priority", "data.priority"},
    {"begin", "sizes.begin"},        {"end", "sizes.end"},          {"factor", "sizes.factor"},
    {"collectives", "sweep.collectives"},
    // nccl-tests' letters
    {"b", "sizes.begin"},            {"e", "sizes.end"},            {"f", "sizes.factor"},
    {"n", "run.iterations"},         {"w", "run.warmup"},           {"d", "data.dtype"},
    {"o", "data.op"},                {"r", "data.root"},            {"c", "run.check"},
};

const Setting* find_setting(std::string_view key) {
  for (const Setting& s : kSettings)
    if (key == s.key) return &s;
  return nullptr;
}

std::pair<std::string, std::string> split_key(std::string_view key) {
  size_t dot = key.find('.');
  if (dot == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, dot)), std::string(key.substr(dot + 1))};
}

[[noreturn]] void fail(const std::string& origin, const std::string& key, const std::string& what) {
  throw WorkloadError(fmt::format("{}: '{}': {}", origin, key, what));
}

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t next = s.find(',', pos);
    if (next == std::string_view::npos) next = s.size();
    std::string part = trim(s.substr(pos, next - pos));
    if (!part.empty()) out.push_back(part);
    pos = next + 1;
  }
  return out;
}

std::optional<int64_t> parse_int(std::string_view s) {
  std::string t = trim(s);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || ptr != t.data() + t.size() || t.empty()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  std::string t = trim(s);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Converts a command-line value into a TOML node of the setting's type.
void set_from_text(toml::table& root, const Setting& s, const std::string& key, const std::string& text,
                   const std::string& origin) {
  auto [section, name] = split_key(key);
  toml::table* tbl = &root;
  if (!section.empty()) {
    if (!root.contains(section)) root.insert(section, toml::table{});
    tbl = root[section].as_table();
    if (!tbl) fail(origin, key, fmt::format("'{}' is not a table in the workload file", section));
  }
  auto bad = [&]() { fail(origin, key, fmt::format("'{}' is not {}", text, type_text(s.type))); };
  switch (s.type) {
    case Type::Int: {
      auto v = parse_int(text);
      if (!v) bad();
      tbl->insert_or_assign(name, *v);
      break;
    }
    case Type::Float: {
      auto v = parse_double(text);
      if (!v) bad();
      tbl->insert_or_assign(name, *v);
      break;
    }
    case Type::Bool: {
      std::string t = trim(text);
      if (t == "true" || t == "1" || t == "yes" || t == "on") tbl->insert_or_assign(name, true);
      else if (t == "false" || t == "0" || t == "no" || t == "off") tbl->insert_or_assign(name, false);
      else bad();
      break;
    }
    case Type::String: tbl->insert_or_assign(name, trim(text)); break;
    case Type::Bytes: tbl->insert_or_assign(name, static_cast<int64_t>(parse_bytes(text, key))); break;
    case Type::StringList: {
      toml::array arr;
      for (auto& part : split_commas(text)) arr.push_back(part);
      tbl->insert_or_assign(name, std::move(arr));
      break;
    }
    case Type::Weights: {
      toml::table w;
      for (auto& part : split_commas(text)) {
        size_t eq = part.find('=');
        if (eq == std::string::npos) {
          w.insert_or_assign(part, 1.0);
        } else {
          auto v = parse_double(part.substr(eq + 1));
          if (!v) bad();
          w.insert_or_assign(trim(part.substr(0, eq)), *v);
        }
      }
      tbl->insert_or_assign(name, std::move(w));
      break;
    }
  }
}

// Typed readers over a node; each names the key in its error.
struct Reader {
  const std::string& origin;

  int64_t get_int(const toml::node& n, const std::string& key) const {
    if (auto v = n.value_exact<int64_t>()) return *v;
    fail(origin, key, "must be an integer");
  }
  double get_float(const toml::node& n, const std::string& key) const {
    if (n.is_integer()) return static_cast<double>(*n.value<int64_t>());
    if (auto v = n.value_exact<double>()) return *v;
    fail(origin, key, "must be a number");
  }
  bool get_bool(const toml::node& n, const std::string& key) const {
    if (auto v = n.value_exact<bool>()) return *v;
    fail(origin, key, "must be true or false");
  }
  std::string get_string(const toml::node& n, const std::string& key) const {
    if (auto v = n.value_exact<std::string>()) return *v;
    fail(origin, key, "must be a string");
  }
  uint64_t get_bytes(const toml::node& n, const std::string& key) const {
    if (auto v = n.value_exact<int64_t>()) {
      if (*v < 0) fail(origin, key, "must not be negative");
      return static_cast<uint64_t>(*v);
    }
    if (auto s = n.value_exact<std::string>()) return parse_bytes(*s, key);
    fail(origin, key, "must be a size in bytes (8, 64K, 1M, 1GiB)");
  }
  std::vector<std::string> get_list(const toml::node& n, const std::string& key) const {
    if (auto s = n.value_exact<std::string>()) return split_commas(*s);
    const toml::array* arr = n.as_array();
    if (!arr) fail(origin, key, "must be a list of strings");
    std::vector<std::string> out;
    for (const auto& el : *arr) {
      auto s = el.value_exact<std::string>();
      if (!s) fail(origin, key, "must be a list of strings");
      out.push_back(*s);
    }
    return out;
  }
  std::vector<std::pair<std::string, double>> get_weights(const toml::node& n, const std::string& key) const {
    std::vector<std::pair<std::string, double>> out;
    if (const toml::table* t = n.as_table()) {
      for (const auto& [k, v] : *t) out.emplace_back(std::string(k.str()), get_float(v, key + "." + std::string(k.str())));
      return out;
    }
    for (auto& name : get_list(n, key)) out.emplace_back(name, 1.0);
    return out;
  }
};

toml::node_view<const toml::node> lookup(const toml::table& root, const std::string& key) {
  auto [section, name] = split_key(key);
  if (section.empty()) return root[name];
  return root[section][name];
}

// Puts the canonical form of a resolved value back (bytes as integers, lists as arrays).
void store(toml::table& root, const std::string& key, auto&& value) {
  auto [section, name] = split_key(key);
  toml::table* tbl = &root;
  if (!section.empty()) {
    if (!root.contains(section)) root.insert(section, toml::table{});
    tbl = root[section].as_table();
  }
  tbl->insert_or_assign(name, std::forward<decltype(value)>(value));
}

double probability(const Reader& r, const toml::table& root, const std::string& key) {
  double p = r.get_float(*lookup(root, key).node(), key);
  if (!(p >= 0 && p <= 1)) fail(r.origin, key, fmt::format("{} is not a probability in [0, 1]", p));
  return p;
}

}  // namespace

std::string_view host_alloc_name(HostAllocKind k) {
  switch (k) {
    case HostAllocKind::MallocHost: return "malloc_host";
    case HostAllocKind::FreeHost: return "free_host";
    case HostAllocKind::HostRegister: return "host_register";
  }
  return "?";
}

uint64_t parse_bytes(const std::string& text, const std::string& key) {
  std::string t = trim(text);
  size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  if (i == 0) throw WorkloadError(fmt::format("'{}': '{}' is not a size in bytes (8, 64K, 1M, 1GiB)", key, text));
  auto number = parse_int(t.substr(0, i));
  std::string unit = trim(t.substr(i));
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::toupper(c); });
  uint64_t mult = 0;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1ull << 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1ull << 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1ull << 30;
  else if (unit == "T" || unit == "TB" || unit == "TIB") mult = 1ull << 40;
  if (!number || mult == 0)
    throw WorkloadError(fmt::format("'{}': '{}' is not a size in bytes (8, 64K, 1M, 1GiB)", key, text));
  return static_cast<uint64_t>(*number) * mult;
}

const std::map<std::string, std::string>& setting_aliases() { return kAliases; }

std::string describe_settings() {
  std::string out;
  for (const Setting& s : kSettings)
    out += fmt::format("  {:<34} {:<22} {}\n", s.key, s.default_toml, s.help);
  out += "  [[step]] entries (file only):\n";
  for (const Setting& s : kStepSettings)
    out += fmt::format("    {:<32} {:<22} {}\n", s.key, s.default_toml, s.help);
  out += "  aliases: ";
  for (const auto& [a, k] : kAliases) out += fmt::format("{}{}={} ", a.size() == 1 ? "-" : "--", a, k);
  out += "\n";
  return out;
}

std::vector<uint64_t> Workload::sizes() const {
  std::vector<uint64_t> out;
  double s = static_cast<double>(begin);
  while (true) {
    uint64_t v = static_cast<uint64_t>(std::llround(s));
    if (v > end) break;
    if (out.empty() || out.back() != v) out.push_back(v);
    if (factor <= 1) break;
    s *= factor;
  }
  return out;
}

Workload parse_workload(const std::string& text, const std::string& origin, const Overrides& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw WorkloadError(fmt::format("{}:{}:{}: {}", origin, e.source().begin.line, e.source().begin.column,
                                    e.description()));
  }

  // 1. Every key of the file must be known.
  std::set<std::string> sections;
  for (const Setting& s : kSettings) sections.insert(split_key(s.key).first);
  for (const auto& [k, node] : root) {
    std::string key(k.str());
    if (key == "step") {
      if (!node.is_array_of_tables()) fail(origin, "step", "must be an array of tables ([[step]])");
      continue;
    }
    if (node.is_table()) {
      if (!sections.contains(key)) fail(origin, key, "unknown section");
      for (const auto& [k2, n2] : *node.as_table()) {
        std::string full = key + "." + std::string(k2.str());
        if (!find_setting(full)) fail(origin, full, "unknown key (dfccl-harness --list-keys lists them)");
      }
    } else if (!find_setting(key)) {
      fail(origin, key, "unknown key (dfccl-harness --list-keys lists them)");
    }
  }
  if (const toml::array* steps = root["step"].as_array()) {
    for (size_t i = 0; i < steps->size(); ++i) {
      for (const auto& [k, n] : *steps->at(i).as_table()) {
        std::string name(k.str());
        bool known = std::any_of(std::begin(kStepSettings), std::end(kStepSettings),
                                 [&](const Setting& s) { return name == s.key; });
        if (!known) fail(origin, fmt::format("step[{}].{}", i, name), "unknown key of a [[step]] entry");
      }
    }
  }

  const bool file_has_mix = root.contains("mix");
  const bool file_has_sim = root.contains("sim");

  // 2. Overrides from the command line.
  for (const auto& [raw_key, value] : overrides) {
    std::string key = raw_key;
    if (auto it = kAliases.find(key); it != kAliases.end()) key = it->second;
    if (key.starts_with("step")) fail("command line", raw_key, "[[step]] entries can only be set in the workload file");
    const Setting* s = find_setting(key);
    if (!s) fail("command line", raw_key, "unknown option (dfccl-harness --list-keys lists them)");
    set_from_text(root, *s, key, value, "command line");
  }

  // 3. Defaults for every missing key.
  for (const Setting& s : kSettings) {
    if (lookup(root, s.key).node()) continue;
    toml::table def = toml::parse(std::string("v = ") + s.default_toml);
    store(root, s.key, *def["v"].node());
  }

  // 4. Typed, validated values.
  Reader r{origin};
  auto node = [&](const std::string& key) -> const toml::node& { return *lookup(root, key).node(); };
  auto get_int = [&](const std::string& key) { return r.get_int(node(key), key); };
  auto get_float = [&](const std::string& key) { return r.get_float(node(key), key); };
  auto get_string = [&](const std::string& key) { return r.get_string(node(key), key); };
  auto positive = [&](const std::string& key, int64_t min) {
    int64_t v = get_int(key);
    if (v < min) fail(origin, key, fmt::format("{} is less than {}", v, min));
    return static_cast<int>(v);
  };
  auto parse_type_at = [&](const std::string& key) {
    std::string v = get_string(key);
    auto t = parse_type(v);
    if (!t) fail(origin, key, fmt::format("unknown data type '{}'", v));
    return *t;
  };
  auto parse_op_at = [&](const std::string& key) {
    std::string v = get_string(key);
    auto o = parse_op(v);
    if (!o) fail(origin, key, fmt::format("unknown reduction operator '{}'", v));
    return *o;
  };
  auto parse_group_at = [&](const std::string& key, const std::string& v) {
    auto g = parse_group(v);
    if (!g) fail(origin, key, fmt::format("unknown group '{}' (world, tp, dp, pp)", v));
    return *g;
  };
  auto parse_coll_at = [&](const std::string& key, const std::string& v) {
    const Collective* c = find_collective(v);
    if (!c)
      fail(origin, key,
           fmt::format("unknown collective '{}' (all_reduce, all_gather, reduce_scatter, broadcast, reduce)", v));
    return c;
  };

  Workload w;
  w.name = get_string("name");
  if (w.name.empty()) {
    w.name = std::filesystem::path(origin).stem().string();
    store(root, "name", w.name);
  }
  w.description = get_string("description");
  w.source = get_string("source");

  w.backends = r.get_list(node("run.backend"), "run.backend");
  if (w.backends.empty()) fail(origin, "run.backend", "no backend given");
  for (const auto& b : w.backends)
    if (b != "auto" && b != "dfccl" && b != "dfccl-blocking" && b != "nccl" && b != "nccl-graph" && b != "host" &&
        b != "host-blocking")
      fail(origin, "run.backend",
           fmt::format("unknown backend '{}' (dfccl, dfccl-blocking, nccl, nccl-graph, host, host-blocking, auto)",
                       b));
  store(root, "run.backend", [&] {
    toml::array a;
    for (auto& b : w.backends) a.push_back(b);
    return a;
  }());
  w.iterations = positive("run.iterations", 1);
  w.warmup = positive("run.warmup", 0);
  w.trials = positive("run.trials", 1);
  w.timeout_s = get_float("run.timeout");
  if (!(w.timeout_s > 0)) fail(origin, "run.timeout", "must be positive");
  int64_t seed = get_int("run.seed");
  if (seed < 0) fail(origin, "run.seed", "must not be negative");
  w.seed = static_cast<uint64_t>(seed);
  w.check = r.get_bool(node("run.check"), "run.check");
  w.diagnose = r.get_bool(node("run.diagnose"), "run.diagnose");
  w.completion = get_string("run.completion");
  if (w.completion != "stream" && w.completion != "host" && w.completion != "callback")
    fail(origin, "run.completion", fmt::format("'{}' is not stream, host or callback", w.completion));
  w.order = get_string("run.order");
  if (w.order != "stream" && w.order != "host")
    fail(origin, "run.order", fmt::format("'{}' is not stream or host", w.order));
  if (w.order == "host" && w.completion == "stream")
    fail(origin, "run.order",
         "'host' needs run.completion 'host' or 'callback' (a stream's events cannot time a collective the stream "
         "does not order)");
  w.nccl_comms = get_string("run.nccl_comms");
  if (w.nccl_comms != "auto" && w.nccl_comms != "blocking" && w.nccl_comms != "nonblocking")
    fail(origin, "run.nccl_comms", fmt::format("'{}' is not auto, blocking or nonblocking", w.nccl_comms));
  w.streams = get_string("run.streams");
  if (w.streams != "single" && w.streams != "per_group")
    fail(origin, "run.streams", fmt::format("'{}' is not single or per_group", w.streams));
  w.timing = get_string("run.timing");
  if (w.timing != "iteration" && w.timing != "batch")
    fail(origin, "run.timing", fmt::format("'{}' is not iteration or batch", w.timing));
  w.batch = positive("run.batch", 1);

  w.tp = positive("layout.tp", 1);
  w.dp = positive("layout.dp", 0);
  w.pp = positive("layout.pp", 1);

  w.dtype = parse_type_at("data.dtype");
  w.op = parse_op_at("data.op");
  w.root = positive("data.root", 0);
  w.priority = static_cast<int>(get_int("data.priority"));

  w.begin = r.get_bytes(node("sizes.begin"), "sizes.begin");
  w.end = r.get_bytes(node("sizes.end"), "sizes.end");
  store(root, "sizes.begin", static_cast<int64_t>(w.begin));
  store(root, "sizes.end", static_cast<int64_t>(w.end));
  w.factor = get_float("sizes.factor");
  if (!(w.factor >= 1)) fail(origin, "sizes.factor", "must be at least 1");
  if (w.begin > w.end) fail(origin, "sizes.begin", fmt::format("{} is larger than sizes.end ({})", w.begin, w.end));

  for (const auto& c : r.get_list(node("sweep.collectives"), "sweep.collectives"))
    w.sweep_collectives.push_back(parse_coll_at("sweep.collectives", c));
  w.sweep_group = parse_group_at("sweep.group", get_string("sweep.group"));

  w.mix_count = positive("mix.count", 1);
  for (const auto& [name, weight] : r.get_weights(node("mix.collectives"), "mix.collectives")) {
    if (!(weight >= 0)) fail(origin, "mix.collectives." + name, "weight must not be negative");
    w.mix_weights.emplace_back(parse_coll_at("mix.collectives", name), weight);
  }
  for (const auto& g : r.get_list(node("mix.groups"), "mix.groups"))
    w.mix_groups.push_back(parse_group_at("mix.groups", g));
  w.mix_per_trial = r.get_bool(node("mix.per_trial"), "mix.per_trial");
  w.mix_priority_max = positive("mix.priority_max", 0);

  w.sim_layout = get_string("sim.layout");
  w.sim_colls = positive("sim.colls", 1);
  w.sim_disorder = probability(r, root, "sim.disorder");
  w.sim_sync = probability(r, root, "sim.sync");
  int64_t sim_seed = get_int("sim.seed");
  if (sim_seed < 0) fail(origin, "sim.seed", "must not be negative");
  w.sim_seed = static_cast<uint64_t>(sim_seed);
  w.sim_first_trial = static_cast<uint64_t>(positive("sim.first_trial", 0));
  w.sim_coll = parse_coll_at("sim.coll", get_string("sim.coll"));
  w.sim_bytes = r.get_bytes(node("sim.bytes"), "sim.bytes");
  store(root, "sim.bytes", static_cast<int64_t>(w.sim_bytes));

  w.order_probability = probability(r, root, "order.probability");
  w.sync_probability = probability(r, root, "sync.probability");
  std::string placement = get_string("sync.placement");
  if (placement == "between") w.sync_placement = SyncPlacement::Between;
  else if (placement == "before_wait") w.sync_placement = SyncPlacement::BeforeWait;
  else fail(origin, "sync.placement", fmt::format("'{}' is not between or before_wait", placement));
  w.host_alloc_probability = probability(r, root, "host_alloc.probability");
  w.host_alloc_bytes = r.get_bytes(node("host_alloc.bytes"), "host_alloc.bytes");
  store(root, "host_alloc.bytes", static_cast<int64_t>(w.host_alloc_bytes));
  for (const auto& k : r.get_list(node("host_alloc.kinds"), "host_alloc.kinds")) {
    if (k == "malloc_host") w.host_alloc_kinds.push_back(HostAllocKind::MallocHost);
    else if (k == "free_host") w.host_alloc_kinds.push_back(HostAllocKind::FreeHost);
    else if (k == "host_register") w.host_alloc_kinds.push_back(HostAllocKind::HostRegister);
    else fail(origin, "host_alloc.kinds", fmt::format("'{}' is not malloc_host, free_host or host_register", k));
  }
  if (w.host_alloc_probability > 0 && w.host_alloc_kinds.empty())
    fail(origin, "host_alloc.kinds", "is empty while host_alloc.probability > 0");
  w.cuda_free_probability = probability(r, root, "implicit.cuda_free_probability");
  w.lazy_kernel_probability = probability(r, root, "implicit.lazy_kernel_probability");
  w.compute_us = get_float("compute.duration_us");
  if (!(w.compute_us >= 0)) fail(origin, "compute.duration_us", "must not be negative");
  w.compute_probability = probability(r, root, "compute.probability");
  // nccl-graph captures the iterations it times into CUDA graphs: nothing that cannot be captured may happen in them.
  if (std::find(w.backends.begin(), w.backends.end(), "nccl-graph") != w.backends.end()) {
    const std::pair<const char*, double> uncapturable[] = {
        {"sync.probability", w.sync_probability},
        {"host_alloc.probability", w.host_alloc_probability},
        {"implicit.cuda_free_probability", w.cuda_free_probability},
        {"implicit.lazy_kernel_probability", w.lazy_kernel_probability}};
    for (const auto& [key, p] : uncapturable)
      if (p > 0)
        fail(origin, key,
             "must be 0 with backend nccl-graph (a CUDA graph cannot capture a synchronization or an allocation)");
    if (w.nccl_comms == "nonblocking")
      fail(origin, "run.nccl_comms", "must not be nonblocking with backend nccl-graph (it captures blocking calls)");
  }

  // [[step]] entries
  if (const toml::array* steps = root["step"].as_array()) {
    for (size_t i = 0; i < steps->size(); ++i) {
      const toml::table& t = *steps->at(i).as_table();
      auto key = [&](const char* k) { return fmt::format("step[{}].{}", i, k); };
      if (!t.contains("coll")) fail(origin, key("coll"), "is required");
      if (!t.contains("bytes")) fail(origin, key("bytes"), "is required");
      StepEntry e;
      e.coll = parse_coll_at(key("coll"), r.get_string(*t["coll"].node(), key("coll")));
      e.group = t.contains("group") ? parse_group_at(key("group"), r.get_string(*t["group"].node(), key("group")))
                                    : GroupKind::World;
      e.bytes = r.get_bytes(*t["bytes"].node(), key("bytes"));
      e.dtype = w.dtype;
      e.op = w.op;
      e.root = t.contains("root") ? static_cast<int>(r.get_int(*t["root"].node(), key("root"))) : w.root;
      if (e.root < 0) fail(origin, key("root"), "must not be negative");
      e.priority = t.contains("priority") ? static_cast<int>(r.get_int(*t["priority"].node(), key("priority")))
                                          : w.priority;
      e.label = t.contains("label") ? r.get_string(*t["label"].node(), key("label")) : "";
      int64_t repeat = t.contains("repeat") ? r.get_int(*t["repeat"].node(), key("repeat")) : 1;
      if (repeat < 1) fail(origin, key("repeat"), "must be at least 1");
      for (int64_t k = 0; k < repeat; ++k) w.step.push_back(e);
    }
  }

  std::string kind = get_string("kind");
  if (kind.empty()) {
    kind = !w.step.empty() ? "step" : file_has_mix ? "mix" : file_has_sim ? "replay" : "sweep";
    store(root, "kind", kind);
  }
  if (kind == "sweep") {
    w.kind = Workload::Kind::Sweep;
    if (w.sweep_collectives.empty()) fail(origin, "sweep.collectives", "is empty");
  } else if (kind == "mix") {
    w.kind = Workload::Kind::Mix;
    double total = 0;
    for (auto& [c, wt] : w.mix_weights) total += wt;
    if (!(total > 0)) fail(origin, "mix.collectives", "has no positive weight");
    if (w.mix_groups.empty()) fail(origin, "mix.groups", "is empty");
  } else if (kind == "step") {
    w.kind = Workload::Kind::Step;
    if (w.step.empty()) fail(origin, "kind", "is step but the file has no [[step]] entry");
  } else if (kind == "replay") {
    w.kind = Workload::Kind::Replay;
    if (w.sim_layout.empty()) fail(origin, "sim.layout", "is required for a replay (e.g. 'megatron:2x2x2')");
    // The layout must parse, and every group must get at least one element per rank of the collective.
    try {
      scenario::Layout layout = scenario::Layout::parse(w.sim_layout, w.sim_colls);
      for (const auto& g : layout.groups) {
        const int n = static_cast<int>(g.size());
        if (w.sim_coll->count_from_bytes(w.sim_bytes, n, type_size(w.dtype)) == 0)
          fail(origin, "sim.bytes",
               fmt::format("{} bytes give a count of 0 for {} on a group of {} ranks", w.sim_bytes, w.sim_coll->name, n));
      }
    } catch (const std::invalid_argument& e) {
      fail(origin, "sim.layout", e.what());
    }
  } else {
    fail(origin, "kind", fmt::format("'{}' is not sweep, mix, step or replay", kind));
  }
  if (w.kind != Workload::Kind::Step && w.kind != Workload::Kind::Replay && w.sizes().empty())
    fail(origin, "sizes.begin", "the size range is empty");

  std::ostringstream os;
  os << root;
  w.resolved_toml = os.str();
  return w;
}

Workload load_workload(const std::string& path, const Overrides& overrides) {
  std::ifstream in(path);
  if (!in) throw WorkloadError(fmt::format("--workload: cannot read '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_workload(ss.str(), path, overrides);
}

}  // namespace dfccl::harness
