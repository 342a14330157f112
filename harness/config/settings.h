// The settings table: every workload key with its type, its default, the values it accepts and its meaning. Parsing
// and validation (config/workload.cpp), `dfccl-harness --list-keys` and docs/harness.md all come from it.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>

namespace dfccl::harness {

// The TOML type of a value (the command line's text is converted to it).
enum class Type { Int, Float, Bool, String, Bytes, StringList, Weights };
std::string_view type_text(Type t);  // "an integer", ... for messages

using Choices = std::span<const char* const>;

// What a value must be beyond its type; for a list or a table of weights, what each name must be.
struct Valid {
  enum Kind {
    Any,
    AtLeast,      // a number >= min ("<value> is less than <min>" for integers, "must be at least <min>" for floats)
    NotNegative,  // a number >= 0
    Positive,     // a number > 0
    Probability,  // a number in [0, 1]
    OneOf,        // one of `choices`; an enum-valued setting parses to the choice's index
    DataType,     // a data type name or alias (verify/types.h)
    RedOp,        // a reduction operator name
    Group,        // a group kind: world tp dp pp
    Collective,   // a collective name (colls/collective.h)
  };
  Kind kind = Any;
  double min = 0;
  Choices choices = {};
  const char* noun = nullptr;  // OneOf: "unknown <noun> 'x' (a, b, c)" instead of "'x' is not a, b or c"
};

struct Setting {
  const char* key;  // "section.key", or "key" at the top level
  Type type;
  const char* default_toml;  // the default value, written as TOML
  Valid valid;
  const char* help;
};

// Every workload key, in --list-keys order.
std::span<const Setting> settings();
// The keys of a [[step]] entry (file only; their defaults refer to other settings).
std::span<const Setting> step_settings();
const Setting* find_setting(std::string_view key);  // nullptr if unknown
// Short aliases accepted on the command line -> their full key.
const std::map<std::string, std::string>& setting_aliases();
// The table as text (for --list-keys and the docs).
std::string describe_settings();

}  // namespace dfccl::harness
