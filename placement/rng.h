// A small, fast, portable random generator (xoshiro256**, seeded by SplitMix64). The
// standard distributions are implementation-defined, so every draw the search makes goes
// through these helpers: the same seed gives the same placement on every platform.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tessel::placement {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : state_) s = splitmix(seed);
  }
  // A generator for sub-stream `stream` of `seed` (one per trial, thread-count independent).
  static Rng stream(uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (0x9E3779B97F4A7C15ULL * (stream + 1));
    return Rng(splitmix(x));
  }

  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  // Uniform in [0, n), 1 <= n < 2^31 (multiply-shift on 32 random bits; the bias of at most
  // n / 2^32 is irrelevant here).
  int below(int n) { return static_cast<int>(((next() >> 32) * uint64_t(n)) >> 32); }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (int i = static_cast<int>(v.size()) - 1; i > 0; --i) std::swap(v[i], v[below(i + 1)]);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  uint64_t state_[4];
};

}  // namespace tessel::placement
