#include "plan.h"

#include <toml++/toml.h>
#include <sstream>
#include <stdexcept>

#include "scenario.h"

namespace dfccl::sim {

namespace {

template <typename T>
std::vector<T> read_array(const toml::table& t, std::string_view key, const std::vector<T>& fallback,
                          const std::string& where) {
  const toml::node* n = t.get(key);
  if (!n) return fallback;
  std::vector<T> out;
  auto one = [&](const toml::node& e) {
    if constexpr (std::is_same_v<T, std::string>) {
      if (auto v = e.value<std::string>()) return out.push_back(*v);
    } else if constexpr (std::is_same_v<T, double>) {
      if (auto v = e.value<double>()) return out.push_back(*v);  // integers convert too
    } else {
      if (auto v = e.value<int64_t>()) return out.push_back(static_cast<T>(*v));
    }
    throw std::runtime_error(where + ": key '" + std::string(key) + "' has a value of the wrong type");
  };
  if (const auto* arr = n->as_array()) {
    for (const auto& e : *arr) one(e);
  } else {
    one(*n);
  }
  if (out.empty()) throw std::runtime_error(where + ": key '" + std::string(key) + "' is an empty list");
  return out;
}

template <typename T>
T read_scalar(const toml::table& t, std::string_view key, T fallback, const std::string& where) {
  const toml::node* n = t.get(key);
  if (!n) return fallback;
  if (auto v = n->value<T>()) return *v;
  throw std::runtime_error(where + ": key '" + std::string(key) + "' has a value of the wrong type");
}

void check_keys(const toml::table& t, std::initializer_list<std::string_view> known, const std::string& where) {
  for (const auto& [k, v] : t) {
    bool ok = false;
    for (auto kk : known) ok |= k.str() == kk;
    if (!ok) throw std::runtime_error(where + ": unknown key '" + std::string(k.str()) + "'");
  }
}

template <typename T>
toml::array to_array(const std::vector<T>& v) {
  toml::array a;
  for (const auto& x : v) {
    if constexpr (std::is_same_v<T, int>) a.push_back(static_cast<int64_t>(x));
    else a.push_back(x);
  }
  return a;
}

}  // namespace

Plan Plan::from_toml_file(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << path << ": " << e.description() << " at " << e.source().begin;
    throw std::runtime_error(os.str());
  }
  check_keys(root, {"seed", "first_trial", "threads", "per_trial", "verify_cycles", "sweep"}, path);
  Plan p;
  p.seed = static_cast<uint64_t>(read_scalar<int64_t>(root, "seed", 1, path));
  p.first_trial = static_cast<uint64_t>(read_scalar<int64_t>(root, "first_trial", 0, path));
  p.threads = static_cast<int>(read_scalar<int64_t>(root, "threads", 0, path));
  p.per_trial = read_scalar<bool>(root, "per_trial", false, path);
  p.verify_cycles = read_scalar<bool>(root, "verify_cycles", false, path);
  const auto* sweeps = root.get_as<toml::array>("sweep");
  if (!sweeps || sweeps->empty()) throw std::runtime_error(path + ": no [[sweep]] block");
  int i = 0;
  for (const auto& node : *sweeps) {
    const auto* t = node.as_table();
    const std::string where = path + " [[sweep]] #" + std::to_string(i++);
    if (!t) throw std::runtime_error(where + ": not a table");
    check_keys(*t, {"name", "models", "limits", "layouts", "colls", "disorder", "sync", "zip", "trials"}, where);
    SweepBlock b;
    b.name = read_scalar<std::string>(*t, "name", "sweep" + std::to_string(i - 1), where);
    b.models = read_array<std::string>(*t, "models", b.models, where);
    b.limits = read_array<int>(*t, "limits", b.limits, where);
    b.layouts = read_array<std::string>(*t, "layouts", b.layouts, where);
    b.colls = read_array<int>(*t, "colls", b.colls, where);
    b.disorder = read_array<double>(*t, "disorder", b.disorder, where);
    b.sync = read_array<double>(*t, "sync", b.sync, where);
    b.zip = read_scalar<bool>(*t, "zip", false, where);
    b.trials = read_scalar<int64_t>(*t, "trials", b.trials, where);
    p.blocks.push_back(std::move(b));
  }
  return p;
}

std::string Plan::to_toml() const {
  toml::table root;
  root.insert("seed", static_cast<int64_t>(seed));
  root.insert("first_trial", static_cast<int64_t>(first_trial));
  root.insert("threads", static_cast<int64_t>(threads));
  root.insert("per_trial", per_trial);
  root.insert("verify_cycles", verify_cycles);
  toml::array sweeps;
  for (const auto& b : blocks) {
    toml::table t;
    t.insert("name", b.name);
    t.insert("models", to_array(b.models));
    t.insert("limits", to_array(b.limits));
    t.insert("layouts", to_array(b.layouts));
    t.insert("colls", to_array(b.colls));
    t.insert("disorder", to_array(b.disorder));
    t.insert("sync", to_array(b.sync));
    t.insert("zip", b.zip);
    t.insert("trials", b.trials);
    sweeps.push_back(std::move(t));
  }
  root.insert("sweep", std::move(sweeps));
  std::ostringstream os;
  os << toml::toml_formatter{root} << "\n";
  return os.str();
}

std::vector<Setting> expand(const Plan& plan) {
  std::vector<Setting> out;
  for (const auto& b : plan.blocks) {
    if (b.trials < 1) throw std::invalid_argument("block '" + b.name + "': trials must be >= 1");
    if (b.zip && b.disorder.size() != b.sync.size())
      throw std::invalid_argument("block '" + b.name + "': zip needs as many disorder as sync probabilities");
    std::vector<std::pair<double, double>> probs;
    if (b.zip) {
      for (size_t i = 0; i < b.disorder.size(); ++i) probs.emplace_back(b.disorder[i], b.sync[i]);
    } else {
      for (double d : b.disorder)
        for (double s : b.sync) probs.emplace_back(d, s);
    }
    for (auto [d, s] : probs) {
      Bernoulli{d};  // validates the range
      Bernoulli{s};
    }
    std::vector<ModelSpec> models;
    for (const auto& m : b.models) {
      const auto probe = ModelSpec::parse(m, 1);
      if (probe.model == Model::stream_limit) {
        for (int r : b.limits) models.push_back(ModelSpec::parse(m, r));
      } else {
        models.push_back(probe);
      }
    }
    for (const auto& layout : b.layouts) {
      for (int c : b.colls) {
        Layout::parse(layout, c);  // validates
        for (auto [d, s] : probs)
          for (const auto& m : models) out.push_back({b.name, layout, c, d, s, m, b.trials});
      }
    }
  }
  return out;
}

}  // namespace dfccl::sim
