#pragma once
// Counter-based randomness for data: every random choice is a pure function of
// (seed, stream, sample index), never of hidden generator state. That is what makes a
// resumed run draw exactly the batches an uninterrupted run would, and what gives each
// data-parallel rank its own samples without communication.
//
//   Rng rng(derive_key(seed, salt, index));   // one generator per sample
//   int64_t i = rng.uniform(n);               // in [0, n), unbiased
#include <cstdint>
#include <string>

namespace lcr::data {

// SplitMix64's finaliser: a bijection on 64 bits with full avalanche. Used both as the
// generator's output function and to combine keys.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Combines a key with one more value; order matters (derive(a, b) != derive(b, a)).
inline uint64_t derive_key(uint64_t key, uint64_t value) {
  return splitmix64(key ^ splitmix64(value + 0x632BE59BD9B4E019ull));
}
template <class... R>
uint64_t derive_key(uint64_t key, uint64_t value, R... rest) {
  return derive_key(derive_key(key, value), static_cast<uint64_t>(rest)...);
}

// FNV-1a 64: a stable hash of a name (task salts) or of bytes (file checksums).
inline uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xCBF29CE484222325ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}
inline uint64_t fnv1a64(const std::string& s) { return fnv1a64(s.data(), s.size()); }

// SplitMix64 stream: state advances by a fixed odd constant, output is the finaliser.
// Small and fast; seeded by a derived key it is one sample's private generator.
class Rng {
 public:
  explicit Rng(uint64_t key) : state_(key) {}

  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t x = state_;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }

  // Uniform integer in [0, n), n >= 1, without modulo bias (Lemire's multiply-shift with
  // rejection of the few values that would make some residues more likely).
  int64_t uniform(int64_t n) {
    const uint64_t range = static_cast<uint64_t>(n);
    const uint64_t threshold = (0 - range) % range;  // 2^64 mod range
    for (;;) {
      const unsigned __int128 m = static_cast<unsigned __int128>(next()) * range;
      if (static_cast<uint64_t>(m) >= threshold) return static_cast<int64_t>(m >> 64);
    }
  }

  // Uniform integer in [lo, hi], lo <= hi.
  int64_t uniform_in(int64_t lo, int64_t hi) { return lo + uniform(hi - lo + 1); }

  // Uniform double in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  bool bernoulli(double p) { return uniform01() < p; }

 private:
  uint64_t state_;
};

// A keyed bijection of [0, n): a 4-round Feistel network on the smallest even number of
// bits covering n, cycle-walking values that land outside [0, n) (fewer than 4 steps on
// average because the Feistel domain is below 4n). permute_index(., n, key) for a fixed
// key visits every index exactly once: an epoch's shuffle without storing a permutation.
uint64_t permute_index(uint64_t i, uint64_t n, uint64_t key);

}  // namespace lcr::data
