// A descriptor moved as 16-byte packs (kDescPacks of them), shared by the blocks' pick-up and the prefetcher.
#pragma once

#include "../desc.h"
#include "../primitives/copy.h"

namespace dfccl::core {

inline constexpr int kDescPacks = int(sizeof(Desc) / sizeof(Pack));

// Caller: one thread. Loads descriptor d into v[0 .. kDescPacks), every load issued before any is used.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void load_desc(const Desc& d, Pack* v) {
  const Pack* src = reinterpret_cast<const Pack*>(&d);
  for (int i = 0; i < kDescPacks; ++i) v[i] = X::ld16(src + i);
}

// Caller: one thread. Stores v into d (16-byte aligned), pack by pack; nothing orders the stores.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void store_desc(Desc& d, const Pack* v) {
  Pack* dst = reinterpret_cast<Pack*>(&d);
  for (int i = 0; i < kDescPacks; ++i) X::st16(dst + i, v[i]);
}

// Caller: one thread. Stores v into d, then, behind a device-scope fence, `tag` into *ready. Invariant: a block that
// reads *ready == tag with acquire sees the whole copy.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void publish_desc(Desc& d, const Pack* v, u64* ready, u64 tag) {
  store_desc<X>(d, v);
  X::fence_device();
  X::store_relaxed(ready, tag);
}

}  // namespace dfccl::core
