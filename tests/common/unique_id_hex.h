// A unique id as text, for test programs that pass it to another process on a command line or in a file.
#pragma once

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dfccl.h"

namespace dfccl::test {

// 2 * DFCCL_UNIQUE_ID_BYTES lowercase hex digits.
inline std::string id_to_hex(const dfcclUniqueId& id) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < DFCCL_UNIQUE_ID_BYTES; ++i) {
    std::snprintf(b, sizeof(b), "%02x", unsigned(uint8_t(id.internal[i])));
    s += b;
  }
  return s;
}

// Reads what id_to_hex wrote, followed by nothing but white space; false if s is anything else.
inline bool id_from_hex(const std::string& s, dfcclUniqueId* id) {
  const size_t n = 2 * DFCCL_UNIQUE_ID_BYTES;
  if (s.size() < n) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (i < n ? !std::isxdigit(uint8_t(s[i])) : !std::isspace(uint8_t(s[i]))) return false;
  for (size_t i = 0; i < DFCCL_UNIQUE_ID_BYTES; ++i)
    id->internal[i] = char(std::strtoul(s.substr(2 * i, 2).c_str(), nullptr, 16));
  return true;
}

}  // namespace dfccl::test
