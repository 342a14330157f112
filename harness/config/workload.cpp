#include "workload.h"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "config/settings.h"
#include "plan/pipeline.h"
#include "scenario.h"  // common/: the simulator's layouts, for a replay

namespace dfccl::harness {
namespace {

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

// The table of a key's section (the root for a top-level key), created when missing. Null if the section exists but
// is not a table.
toml::table* section_of(toml::table& root, const std::string& section) {
  if (section.empty()) return &root;
  if (!root.contains(section)) root.insert(section, toml::table{});
  return root[section].as_table();
}

// Puts the canonical form of a resolved value back (bytes as integers, lists as arrays).
void store(toml::table& root, const std::string& key, auto&& value) {
  auto [section, name] = split_key(key);
  section_of(root, section)->insert_or_assign(name, std::forward<decltype(value)>(value));
}

toml::node_view<const toml::node> lookup(const toml::table& root, const std::string& key) {
  auto [section, name] = split_key(key);
  if (section.empty()) return root[name];
  return root[section][name];
}

// Converts a command-line value into a TOML node of the setting's type.
void set_from_text(toml::table& root, const Setting& s, const std::string& key, const std::string& text,
                   const std::string& origin) {
  auto [section, name] = split_key(key);
  toml::table* tbl = section_of(root, section);
  if (!tbl) fail(origin, key, fmt::format("'{}' is not a table in the workload file", section));
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
      for (const auto& [k, v] : *t) {
        std::string name(k.str());
        out.emplace_back(name, get_float(v, key + "." + name));
      }
      return out;
    }
    for (auto& name : get_list(n, key)) out.emplace_back(name, 1.0);
    return out;
  }
};

// "a, b or c" (last_sep " or "), or "a, b, c" (last_sep ", ").
std::string join_names(const std::vector<std::string_view>& names, std::string_view last_sep) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? std::string(last_sep) : ", ") + std::string(names[i]);
  return out;
}

std::vector<std::string_view> names_of(Choices c) { return {c.begin(), c.end()}; }

std::vector<std::string_view> group_names() {
  std::vector<std::string_view> out;
  for (int g = 0; g < kNumGroupKinds; ++g) out.push_back(group_name(static_cast<GroupKind>(g)));
  return out;
}

std::vector<std::string_view> collective_names() {
  std::vector<std::string_view> out;
  for (const Collective* c : all_collectives()) out.push_back(c->name);
  return out;
}

// Checks a name (a string value, or one element of a list or a table of weights) against the setting's Valid.
void check_name(const Valid& valid, const std::string& origin, const std::string& key, const std::string& v) {
  switch (valid.kind) {
    case Valid::OneOf:
      if (std::find(valid.choices.begin(), valid.choices.end(), v) != valid.choices.end()) return;
      if (valid.noun)
        fail(origin, key,
             fmt::format("unknown {} '{}' ({})", valid.noun, v, join_names(names_of(valid.choices), ", ")));
      fail(origin, key, fmt::format("'{}' is not {}", v, join_names(names_of(valid.choices), " or ")));
    case Valid::DataType:
      if (!parse_type(v)) fail(origin, key, fmt::format("unknown data type '{}'", v));
      return;
    case Valid::RedOp:
      if (!parse_op(v)) fail(origin, key, fmt::format("unknown reduction operator '{}'", v));
      return;
    case Valid::Group:
      if (!parse_group(v))
        fail(origin, key, fmt::format("unknown group '{}' ({})", v, join_names(group_names(), ", ")));
      return;
    case Valid::Collective:
      if (!find_collective(v))
        fail(origin, key, fmt::format("unknown collective '{}' ({})", v, join_names(collective_names(), ", ")));
      return;
    default: return;
  }
}

// Checks an integer against the setting's Valid.
void check_integer(const Valid& valid, const std::string& origin, const std::string& key, int64_t v) {
  const auto min = static_cast<int64_t>(valid.min);
  if (valid.kind == Valid::AtLeast && v < min) fail(origin, key, fmt::format("{} is less than {}", v, min));
  if (valid.kind == Valid::NotNegative && v < 0) fail(origin, key, "must not be negative");
}

// Checks a floating-point number against the setting's Valid (NaN is never valid where there is a bound).
void check_float(const Valid& valid, const std::string& origin, const std::string& key, double v) {
  switch (valid.kind) {
    case Valid::AtLeast:
      if (!(v >= valid.min)) fail(origin, key, fmt::format("must be at least {}", valid.min));
      return;
    case Valid::NotNegative:
      if (!(v >= 0)) fail(origin, key, "must not be negative");
      return;
    case Valid::Positive:
      if (!(v > 0)) fail(origin, key, "must be positive");
      return;
    case Valid::Probability:
      if (!(v >= 0 && v <= 1)) fail(origin, key, fmt::format("{} is not a probability in [0, 1]", v));
      return;
    default: return;
  }
}

// The resolved configuration's values, typed and validated by their settings' rows: every getter checks the value's
// type and Valid, naming the key in its error. bytes() and names() put the canonical form back.
class Values {
 public:
  Values(toml::table& root, const std::string& origin) : root_(root), origin_(origin), r_{origin} {}

  const std::string& origin() const { return origin_; }
  int64_t integer(const std::string& key) const {
    const int64_t v = r_.get_int(node(key), key);
    check_integer(row(key).valid, origin_, key, v);
    return v;
  }
  int small(const std::string& key) const { return static_cast<int>(integer(key)); }
  double number(const std::string& key) const {
    const double v = r_.get_float(node(key), key);
    check_float(row(key).valid, origin_, key, v);
    return v;
  }
  bool boolean(const std::string& key) const { return r_.get_bool(node(key), key); }
  std::string raw_text(const std::string& key) const { return r_.get_string(node(key), key); }
  std::string text(const std::string& key) const {
    std::string v = raw_text(key);
    check_name(row(key).valid, origin_, key, v);
    return v;
  }
  // An enum-valued setting: the index of its value among the row's choices.
  template <class E>
  E choice(const std::string& key) const {
    const std::string v = text(key);
    const Choices c = row(key).valid.choices;
    return static_cast<E>(std::find(c.begin(), c.end(), v) - c.begin());
  }
  uint64_t bytes(const std::string& key) {
    const uint64_t v = r_.get_bytes(node(key), key);
    store(root_, key, static_cast<int64_t>(v));
    return v;
  }
  std::vector<std::string> list(const std::string& key) const {
    std::vector<std::string> v = r_.get_list(node(key), key);
    for (const auto& name : v) check_name(row(key).valid, origin_, key, name);
    return v;
  }
  std::vector<std::pair<std::string, double>> weights(const std::string& key) const {
    auto v = r_.get_weights(node(key), key);
    for (const auto& [name, weight] : v) {
      if (!(weight >= 0)) fail(origin_, key + "." + name, "weight must not be negative");
      check_name(row(key).valid, origin_, key, name);
    }
    return v;
  }
  template <class E>
  std::vector<E> choices(const std::string& key) const {
    std::vector<E> out;
    const Choices c = row(key).valid.choices;
    for (const auto& name : list(key)) out.push_back(static_cast<E>(std::find(c.begin(), c.end(), name) - c.begin()));
    return out;
  }
  toml::table& root() { return root_; }

 private:
  const toml::node& node(const std::string& key) const { return *lookup(root_, key).node(); }
  static const Setting& row(const std::string& key) { return *find_setting(key); }
  toml::table& root_;
  const std::string& origin_;
  Reader r_;
};

// 1. Every key of the file must be known.
void check_keys(const toml::table& root, const std::string& origin) {
  std::set<std::string> sections;
  for (const Setting& s : settings()) sections.insert(split_key(s.key).first);
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
        bool known = std::any_of(step_settings().begin(), step_settings().end(),
                                 [&](const Setting& s) { return name == s.key; });
        if (!known) fail(origin, fmt::format("step[{}].{}", i, name), "unknown key of a [[step]] entry");
      }
    }
  }
}

// 2. Overrides from the command line.
void apply_overrides(toml::table& root, const Overrides& overrides) {
  for (const auto& [raw_key, value] : overrides) {
    std::string key = raw_key;
    if (auto it = setting_aliases().find(key); it != setting_aliases().end()) key = it->second;
    if (key.starts_with("step")) fail("command line", raw_key, "[[step]] entries can only be set in the workload file");
    const Setting* s = find_setting(key);
    if (!s) fail("command line", raw_key, "unknown option (dfccl-harness --list-keys lists them)");
    set_from_text(root, *s, key, value, "command line");
  }
}

// 3. Defaults for every missing key.
void apply_defaults(toml::table& root) {
  for (const Setting& s : settings()) {
    if (lookup(root, s.key).node()) continue;
    toml::table def = toml::parse(std::string("v = ") + s.default_toml);
    store(root, s.key, *def["v"].node());
  }
}

// 4. Typed, validated values, in this order (the first problem is reported).
void read_run(Values& v, Workload& w) {
  w.name = v.raw_text("name");
  if (w.name.empty()) {
    w.name = std::filesystem::path(v.origin()).stem().string();
    store(v.root(), "name", w.name);
  }
  w.description = v.raw_text("description");
  w.source = v.raw_text("source");

  w.backends = v.list("run.backend");
  if (w.backends.empty()) fail(v.origin(), "run.backend", "no backend given");
  for (size_t i = 0; i < w.backends.size(); ++i)  // each backend's results are one group of the file
    if (std::find(w.backends.begin(), w.backends.begin() + i, w.backends[i]) != w.backends.begin() + i)
      fail(v.origin(), "run.backend", fmt::format("{} is given twice (each backend runs once)", w.backends[i]));
  store(v.root(), "run.backend", [&] {
    toml::array a;
    for (auto& b : w.backends) a.push_back(b);
    return a;
  }());
  w.iterations = v.small("run.iterations");
  w.warmup = v.small("run.warmup");
  w.trials = v.small("run.trials");
  w.timeout_s = v.number("run.timeout");
  w.seed = static_cast<uint64_t>(v.integer("run.seed"));
  w.check = v.boolean("run.check");
  w.diagnose = v.boolean("run.diagnose");
  w.completion = v.choice<Completion>("run.completion");
  w.order = v.choice<SubmitOrder>("run.order");
  if (w.order == SubmitOrder::Host && w.completion == Completion::Stream)
    fail(v.origin(), "run.order",
         "'host' needs run.completion 'host' or 'callback' (a stream's events cannot time a collective the stream "
         "does not order)");
  w.nccl_comms = v.choice<NcclComms>("run.nccl_comms");
  w.in_place = v.choice<InPlace>("run.in_place");
  w.streams = v.choice<Streams>("run.streams");
  w.timing = v.choice<TimingMode>("run.timing");
  w.batch = v.small("run.batch");
  w.graph_replays = v.small("run.graph_replays");
}

void read_layout_data_sizes(Values& v, Workload& w) {
  w.tp = v.small("layout.tp");
  w.dp = v.small("layout.dp");
  w.pp = v.small("layout.pp");

  w.dtype = *parse_type(v.text("data.dtype"));
  w.op = *parse_op(v.text("data.op"));
  w.root = v.small("data.root");
  w.priority = v.small("data.priority");

  for (const auto& c : v.list("sweep.collectives")) w.sweep_collectives.push_back(find_collective(c));
  w.sweep_group = *parse_group(v.text("sweep.group"));
}

// [sizes]: the sweep must grow (a factor > 1 or a step > 0) from a size of at least 1 byte, and stay below
// kMaxSizes sizes. factor_given: sizes.factor was set by the file or the command line (not by its default).
void read_sizes(Values& v, Workload& w, bool factor_given) {
  constexpr double kMaxSizes = 10000;
  const std::string& origin = v.origin();
  w.begin = v.bytes("sizes.begin");
  w.end = v.bytes("sizes.end");
  w.factor = v.number("sizes.factor");
  w.step_bytes = v.bytes("sizes.step");
  if (w.begin == 0) fail(origin, "sizes.begin", "must be at least 1 byte (-b)");
  if (w.begin > w.end)
    fail(origin, "sizes.begin", fmt::format("{} is larger than sizes.end ({}) (-b, -e)", w.begin, w.end));
  if (w.step_bytes > 0 && factor_given && w.factor != 1)
    fail(origin, "sizes.step",
         fmt::format("cannot be combined with sizes.factor {} (a sweep grows by a step or by a factor; -i, -f)",
                     w.factor));
  if (w.step_bytes == 0 && w.begin < w.end && w.factor <= 1)
    fail(origin, "sizes.factor",
         fmt::format("{} never grows from sizes.begin ({}) to sizes.end ({}): give a factor > 1 (-f) or a step "
                     "(sizes.step, -i)",
                     w.factor, w.begin, w.end));
  if (w.step_bytes > 0) {
    w.factor = 1;
    store(v.root(), "sizes.factor", 1.0);
  }
  const double n = w.begin == w.end   ? 1
                   : w.step_bytes > 0 ? static_cast<double>(w.end - w.begin) / static_cast<double>(w.step_bytes) + 1
                                      : std::log(static_cast<double>(w.end) / w.begin) / std::log(w.factor) + 1;
  if (n > kMaxSizes)
    fail(origin, w.step_bytes > 0 ? "sizes.step" : "sizes.factor",
         fmt::format("gives {:.0f} sizes from {} to {} bytes, more than {:.0f}", n, w.begin, w.end, kMaxSizes));
}

void read_mix_and_sim(Values& v, Workload& w) {
  w.mix_count = v.small("mix.count");
  for (const auto& [name, weight] : v.weights("mix.collectives"))
    w.mix_weights.emplace_back(find_collective(name), weight);
  for (const auto& g : v.list("mix.groups")) w.mix_groups.push_back(*parse_group(g));
  w.mix_per_trial = v.boolean("mix.per_trial");
  w.mix_priority_max = v.small("mix.priority_max");

  w.sim_layout = v.raw_text("sim.layout");
  w.sim_colls = v.small("sim.colls");
  w.sim_disorder = v.number("sim.disorder");
  w.sim_sync = v.number("sim.sync");
  w.sim_seed = static_cast<uint64_t>(v.integer("sim.seed"));
  w.sim_first_trial = static_cast<uint64_t>(v.integer("sim.first_trial"));
  w.sim_coll = find_collective(v.text("sim.coll"));
  w.sim_bytes = v.bytes("sim.bytes");

  w.fault_kill_max_ms = v.small("fault.kill_max_ms");
  w.fault_after = v.small("fault.after");
  w.fault_inflight = v.small("fault.inflight");
}

// [order], [sync], [host_alloc], [implicit], [compute]: what disturbs a rank's program.
void read_disturbances(Values& v, Workload& w) {
  w.order_probability = v.number("order.probability");
  w.sync_probability = v.number("sync.probability");
  w.sync_placement = v.choice<SyncPlacement>("sync.placement");
  w.host_alloc_probability = v.number("host_alloc.probability");
  w.host_alloc_bytes = v.bytes("host_alloc.bytes");
  w.host_alloc_kinds = v.choices<HostAllocKind>("host_alloc.kinds");
  if (w.host_alloc_probability > 0 && w.host_alloc_kinds.empty())
    fail(v.origin(), "host_alloc.kinds", "is empty while host_alloc.probability > 0");
  w.cuda_free_probability = v.number("implicit.cuda_free_probability");
  w.lazy_kernel_probability = v.number("implicit.lazy_kernel_probability");
  w.compute_us = v.number("compute.duration_us");
  w.compute_probability = v.number("compute.probability");
}

// nccl-graph and dfccl-graph capture the iterations they time into CUDA graphs: nothing that cannot be captured may
// happen in them; dfccl-graph captures its waits too (stream completion, hence stream order).
void check_graph_backends(const Workload& w, const std::string& origin) {
  const auto has = [&](const char* name) {
    return std::find(w.backends.begin(), w.backends.end(), name) != w.backends.end();
  };
  for (const char* name : {"nccl-graph", "dfccl-graph"}) {
    if (!has(name)) continue;
    const std::pair<const char*, double> uncapturable[] = {
        {"sync.probability", w.sync_probability},
        {"host_alloc.probability", w.host_alloc_probability},
        {"implicit.cuda_free_probability", w.cuda_free_probability},
        {"implicit.lazy_kernel_probability", w.lazy_kernel_probability}};
    for (const auto& [key, p] : uncapturable)
      if (p > 0)
        fail(origin, key,
             fmt::format("must be 0 with backend {} (a CUDA graph cannot capture a synchronization or an allocation)",
                         name));
  }
  if (w.graph_replays > 1 && !has("nccl-graph") && !has("dfccl-graph"))
    fail(origin, "run.graph_replays",
         fmt::format("{} replays of each span's graph apply to the graph backends (nccl-graph, dfccl-graph), and "
                     "run.backend has neither",
                     w.graph_replays));
  if (has("nccl-graph") && w.nccl_comms == NcclComms::Nonblocking)
    fail(origin, "run.nccl_comms", "must not be nonblocking with backend nccl-graph (it captures blocking calls)");
  if (!has("dfccl-graph")) return;
  if (w.completion != Completion::Stream)
    fail(origin, "run.completion", "must be stream with backend dfccl-graph (it captures dfcclWait on the stream)");
}

// A [[step]] entry's src and dst (p2p entries only): ranks of the group, taken modulo its size later.
void read_p2p_ranks(const toml::table& t, const Reader& r, size_t i, StepEntry& e) {
  for (auto [k, field] : {std::pair{"src", &e.src}, std::pair{"dst", &e.dst}}) {
    if (!t.contains(k)) continue;
    const std::string key = fmt::format("step[{}].{}", i, k);
    if (!e.coll->pairwise) fail(r.origin, key, fmt::format("is only for p2p entries, not {}", e.coll->name));
    const int64_t v = r.get_int(*t[k].node(), key);
    if (v < 0 || v > 1 << 20) fail(r.origin, key, fmt::format("{} is not a rank (0 .. 2^20)", v));
    *field = static_cast<int>(v);
  }
}

// [[step]] entries: root and priority default to data.root and data.priority.
void read_steps(const toml::table& root, Workload& w, const std::string& origin) {
  const toml::array* steps = root["step"].as_array();
  if (!steps) return;
  Reader r{origin};
  auto row = [](const char* k) -> const Valid& {
    return std::find_if(step_settings().begin(), step_settings().end(),
                        [&](const Setting& s) { return std::string_view(s.key) == k; })
        ->valid;
  };
  for (size_t i = 0; i < steps->size(); ++i) {
    const toml::table& t = *steps->at(i).as_table();
    auto key = [&](const char* k) { return fmt::format("step[{}].{}", i, k); };
    auto name = [&](const char* k) {
      std::string v = r.get_string(*t[k].node(), key(k));
      check_name(row(k), origin, key(k), v);
      return v;
    };
    if (!t.contains("coll")) fail(origin, key("coll"), "is required");
    if (!t.contains("bytes")) fail(origin, key("bytes"), "is required");
    StepEntry e;
    e.coll = find_collective(name("coll"));
    e.group = t.contains("group") ? *parse_group(name("group")) : GroupKind::World;
    e.bytes = r.get_bytes(*t["bytes"].node(), key("bytes"));
    e.dtype = w.dtype;
    e.op = w.op;
    e.root = t.contains("root") ? static_cast<int>(r.get_int(*t["root"].node(), key("root"))) : w.root;
    if (e.root < 0) fail(origin, key("root"), "must not be negative");
    e.priority =
        t.contains("priority") ? static_cast<int>(r.get_int(*t["priority"].node(), key("priority"))) : w.priority;
    e.label = t.contains("label") ? r.get_string(*t["label"].node(), key("label")) : "";
    read_p2p_ranks(t, r, i, e);
    int64_t repeat = t.contains("repeat") ? r.get_int(*t["repeat"].node(), key("repeat")) : 1;
    if (repeat < 1) fail(origin, key("repeat"), "must be at least 1");
    for (int64_t k = 0; k < repeat; ++k) w.step.push_back(e);
  }
}

// [pipeline] with micro_batches > 0: the step of a 1F1B schedule (plan/pipeline.h), instead of [[step]] entries.
void read_pipeline(Values& v, Workload& w) {
  w.pipeline_micro_batches = v.small("pipeline.micro_batches");
  w.pipeline_activation_bytes = v.bytes("pipeline.activation_bytes");
  w.pipeline_tp_per_pass = v.small("pipeline.tp_per_pass");
  w.pipeline_tp_bytes = v.bytes("pipeline.tp_bytes");
  w.pipeline_dp_buckets = v.small("pipeline.dp_buckets");
  w.pipeline_dp_bytes = v.bytes("pipeline.dp_bytes");
  w.pipeline = w.pipeline_micro_batches > 0;
  if (!w.pipeline) return;
  const std::string& origin = v.origin();
  if (!w.step.empty()) fail(origin, "pipeline", "cannot be combined with [[step]] entries (it makes the step)");
  if (w.pp < 2) fail(origin, "layout.pp", fmt::format("is {}: a [pipeline] needs at least 2 stages", w.pp));
  const std::pair<const char*, uint64_t> sizes[] = {{"pipeline.activation_bytes", w.pipeline_activation_bytes},
                                                    {"pipeline.tp_bytes", w.pipeline_tp_bytes},
                                                    {"pipeline.dp_bytes", w.pipeline_dp_bytes}};
  for (const auto& [key, bytes] : sizes)
    if (bytes < type_size(w.dtype))
      fail(origin, key, fmt::format("{} bytes is less than one {} element", bytes, type_name(w.dtype)));
  program::PipelineShape shape{w.pp,
                               w.pipeline_micro_batches,
                               w.tp > 1 ? w.pipeline_tp_per_pass : 0,
                               w.pipeline_dp_buckets,
                               w.pipeline_activation_bytes,
                               w.pipeline_tp_bytes,
                               w.pipeline_dp_bytes,
                               w.dtype,
                               w.op,
                               w.priority};
  w.step = program::pipeline_step(shape);
}

// A replay's layout must parse, and every group must get at least one element per rank of the collective.
void check_replay(const Workload& w, const std::string& origin) {
  if (w.sim_layout.empty()) fail(origin, "sim.layout", "is required for a replay (e.g. 'megatron:2x2x2')");
  if (w.sim_coll->pairwise)
    fail(origin, "sim.coll",
         fmt::format("{} is a transfer between two ranks, not a collective of the group", w.sim_coll->name));
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
}

// A fault workload runs on the backends whose communicators shrink (dfcclCommShrink): host and dfccl, preemptive.
void check_fault(const Workload& w, const std::string& origin) {
  for (const std::string& b : w.backends)
    if (b != "host" && b != "dfccl" && b != "auto")  // auto: checked again once resolved
      fail(origin, "run.backend",
           fmt::format("has '{}': a fault workload runs on host and dfccl only (their communicators shrink)", b));
}

// The kind: given, or inferred from what the file has; then what that kind needs.
void resolve_kind(Values& v, Workload& w, bool file_has_mix, bool file_has_sim, bool file_has_fault) {
  const std::string& origin = v.origin();
  if (v.raw_text("kind").empty()) {
    w.kind = !w.step.empty()  ? Workload::Kind::Step
             : file_has_mix   ? Workload::Kind::Mix
             : file_has_sim   ? Workload::Kind::Replay
             : file_has_fault ? Workload::Kind::Fault
                              : Workload::Kind::Sweep;
    store(v.root(), "kind", std::string(name_of(w.kind, Workload::kKindNames)));
  } else {
    w.kind = v.choice<Workload::Kind>("kind");
  }
  switch (w.kind) {
    case Workload::Kind::Sweep:
      if (w.sweep_collectives.empty()) fail(origin, "sweep.collectives", "is empty");
      break;
    case Workload::Kind::Mix: {
      double total = 0;
      for (auto& [c, wt] : w.mix_weights) total += wt;
      if (!(total > 0)) fail(origin, "mix.collectives", "has no positive weight");
      if (w.mix_groups.empty()) fail(origin, "mix.groups", "is empty");
      break;
    }
    case Workload::Kind::Step:
      if (w.step.empty()) fail(origin, "kind", "is step but the file has no [[step]] entry");
      break;
    case Workload::Kind::Replay: check_replay(w, origin); break;
    case Workload::Kind::Fault: check_fault(w, origin); break;
  }
  if (w.kind != Workload::Kind::Step && w.kind != Workload::Kind::Replay && w.sizes().empty())
    fail(origin, "sizes.begin", "the size range is empty");
}

// run.in_place auto, once the kind is known: both for a sweep (nccl-tests' behaviour), off for the other kinds.
void resolve_in_place(Values& v, Workload& w) {
  if (w.in_place == InPlace::Only && w.kind == Workload::Kind::Sweep)
    for (const Collective* c : w.sweep_collectives)
      if (c->out_of_place_only)
        fail(v.origin(), "run.in_place",
             fmt::format("is 'only', but {} has no in-place variant (it runs out of place only)", c->name));
  if (w.in_place != InPlace::Auto) return;
  w.in_place = w.kind == Workload::Kind::Sweep ? InPlace::Both : InPlace::Off;
  store(v.root(), "run.in_place", std::string(name_of(w.in_place, kInPlaceNames)));
}

}  // namespace

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

std::vector<uint64_t> Workload::sizes() const {
  std::vector<uint64_t> out;
  if (begin == 0) return out;  // parse_workload refuses it; a sweep from 0 would never grow
  if (step_bytes > 0) {
    for (uint64_t v = begin; v <= end; v += step_bytes) {
      out.push_back(v);
      if (end - v < step_bytes) break;
    }
    return out;
  }
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
    throw WorkloadError(
        fmt::format("{}:{}:{}: {}", origin, e.source().begin.line, e.source().begin.column, e.description()));
  }
  check_keys(root, origin);
  const bool file_has_mix = root.contains("mix");
  const bool file_has_sim = root.contains("sim");
  const bool file_has_fault = root.contains("fault");
  apply_overrides(root, overrides);
  const bool factor_given = static_cast<bool>(lookup(root, "sizes.factor").node());
  apply_defaults(root);

  Workload w;
  Values v(root, origin);
  read_run(v, w);
  read_layout_data_sizes(v, w);
  read_sizes(v, w, factor_given);
  read_mix_and_sim(v, w);
  read_disturbances(v, w);
  check_graph_backends(w, origin);
  read_steps(root, w, origin);
  read_pipeline(v, w);
  resolve_kind(v, w, file_has_mix, file_has_sim, file_has_fault);
  resolve_in_place(v, w);

  std::ostringstream os;
  os << root;
  w.resolved_toml = os.str();
  return w;
}

Workload load_workload(const std::string& path, const Overrides& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw WorkloadError(fmt::format("--workload: '{}' is a folder, not a workload file (workloads/<name>.toml)", path));
  std::ifstream in(path);
  if (!in) throw WorkloadError(fmt::format("--workload: cannot read '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_workload(ss.str(), path, overrides);
}

}  // namespace dfccl::harness
