// The layout of a dfcclUniqueId's first bytes (bootstrap.cpp writes and reads them; bootstrap/rendezvous.h places the
// rendezvous root's address after them).
#pragma once

#include <cstdint>

#include "dfccl.h"

namespace dfccl {

struct UniqueIdData {
  uint64_t magic;
  uint64_t token;  // random: names the rendezvous segment
  uint32_t creator_pid;
  uint32_t pad;
};
static_assert(sizeof(UniqueIdData) <= DFCCL_UNIQUE_ID_BYTES);

}  // namespace dfccl
