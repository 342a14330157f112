// A descriptor moved as 16-byte packs: loaded all at once, and published for other blocks behind a ready flag.
#pragma once

#include "../desc.h"
#include "../primitives/copy.h"

namespace dfccl::core {

// A descriptor as nine 16-byte packs: all loads issued first (one round trip), and a copy published for other blocks
// (the stores, a device-scope fence, then the ready flag naming the submission).
inline constexpr int kDescPacks = int(sizeof(Desc) / sizeof(Pack));
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void load_desc(const Desc& d, Pack* v) {
  const Pack* src = reinterpret_cast<const Pack*>(&d);
  for (int i = 0; i < kDescPacks; ++i) v[i] = X::ld16(src + i);
}
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void publish_desc(Desc& d, const Pack* v, u64* ready, u64 tag) {
  Pack* dst = reinterpret_cast<Pack*>(&d);
  for (int i = 0; i < kDescPacks; ++i) X::st16(dst + i, v[i]);
  X::fence_device();
  X::store_relaxed(ready, tag);
}

}  // namespace dfccl::core
