// Random streams of the scenario generator (docs/simulator.md, "Random streams").
//
// Every random decision of a scenario comes from a SplitMix64 stream whose starting state is derived by hashing the
// tuple (seed, trial, rank, purpose). Nothing depends on which thread or process generates a program, so the simulator
// (any --threads) and the harness (one process per rank) produce bit-identical programs.
#pragma once

#include <cmath>
#include <cstdint>

namespace dfccl::scenario {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// The SplitMix64 output function: a bijective 64-bit mixer.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Derives a child key from a parent key and a value (order-sensitive, not symmetric).
constexpr uint64_t derive(uint64_t parent, uint64_t value) { return mix64(parent ^ (mix64(value) + kGolden)); }

// SplitMix64 generator: state advances by the golden gamma, output is mix64(state).
class SplitMix64 {
 public:
  constexpr explicit SplitMix64(uint64_t state) : state_(state) {}
  constexpr uint64_t next() {
    state_ += kGolden;
    return mix64(state_);
  }
  // Uniform integer in [0, n) (n > 0), by 128-bit multiply (Lemire, without the rejection step: bias < n/2^64).
  constexpr uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

// An event of probability p: it happens when the next 64-bit draw is below floor(p * 2^64); p >= 1 always happens
// (and still consumes one draw), p <= 0 never happens and consumes no draw.
class Bernoulli {
 public:
  constexpr Bernoulli() = default;
  explicit Bernoulli(double p);
  bool never() const { return !always_ && threshold_ == 0; }
  bool test(SplitMix64& rng) const {
    if (never()) return false;
    const uint64_t x = rng.next();
    return always_ || x < threshold_;
  }

 private:
  uint64_t threshold_ = 0;
  bool always_ = false;
};

// The number of failures before the first success in independent trials of probability p (geometric on 0, 1, ...),
// from one draw: floor(ln(u) / ln(1 - p)) with u = (top 53 bits + 1) / 2^53 in (0, 1]. p <= 0 gives kNever without a
// draw; p >= 1 gives 0 (and still consumes one draw).
class Geometric {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;
  Geometric() = default;
  explicit Geometric(double p);
  uint64_t draw(SplitMix64& rng) const {
    if (never_) return kNever;
    const double u = static_cast<double>((rng.next() >> 11) + 1) * 0x1.0p-53;
    if (always_) return 0;
    const double g = std::floor(std::log(u) * inv_log_q_);
    return g >= 1.8e19 ? kNever : static_cast<uint64_t>(g);
  }

 private:
  double inv_log_q_ = 0.0;  // 1 / ln(1 - p), negative
  bool never_ = true, always_ = false;
};

// Stream purposes (the last component of a stream key).
enum class Stream : uint64_t { disorder = 1, sync = 2, layout = 3 };

// Key of one trial: derive(mix64(seed ^ "dfcclsim"), trial).
constexpr uint64_t trial_key(uint64_t seed, uint64_t trial) {
  return derive(mix64(seed ^ 0x6466636C6C73696Dull), trial);
}
// Starting state of a rank's stream in one trial.
constexpr uint64_t stream_state(uint64_t trial_key_value, uint64_t rank, Stream purpose) {
  return derive(derive(trial_key_value, rank), static_cast<uint64_t>(purpose));
}

}  // namespace dfccl::scenario
