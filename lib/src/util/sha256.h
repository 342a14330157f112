// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the rendezvous's proof that a client knows the unique id's
// secret without sending it (bootstrap/rendezvous_wire.h). Plain portable code: no crypto library is linked.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dfccl {

using Digest256 = std::array<uint8_t, 32>;

Digest256 sha256(std::string_view data);
Digest256 hmac_sha256(std::string_view key, std::string_view message);

// Compares two digests in time that does not depend on where they differ.
bool digest_equal(const Digest256& a, const Digest256& b);

}  // namespace dfccl
