#include "noderuntime/stage/parameter_init.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/cpu/threading.h"

namespace tessel::stage {
namespace {

// SplitMix64's finaliser: a bijective mix of all 64 bits.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: never 0, so log() below is finite.
double unit_interval(uint64_t bits) { return double((bits >> 11) + 1) * 0x1.0p-53; }

}  // namespace

uint64_t parameter_stream(uint64_t seed, std::string_view key) {
  uint64_t h = 0xCBF29CE484222325ULL;  // FNV-1a over the key, then mixed with the seed
  for (char c : key) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
  return mix64(h ^ mix64(seed + 0x9E3779B97F4A7C15ULL));
}

float standard_normal_at(uint64_t stream, int64_t index) {
  const uint64_t pair = static_cast<uint64_t>(index) / 2;
  const double u1 = unit_interval(mix64(stream + 0x9E3779B97F4A7C15ULL * (2 * pair + 1)));
  const double u2 = unit_interval(mix64(stream + 0x9E3779B97F4A7C15ULL * (2 * pair + 2)));
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  return static_cast<float>(index % 2 == 0 ? radius * std::cos(angle) : radius * std::sin(angle));
}

void initialize_parameters(const ParameterLayout& layout, uint64_t seed, float* params) {
  for (const ParameterTensor& t : layout.tensors()) {
    float* out = params + t.offset;
    switch (t.init) {
      case ParameterInit::kZeros:
        std::fill(out, out + t.size, 0.0f);
        break;
      case ParameterInit::kOnes:
        std::fill(out, out + t.size, 1.0f);
        break;
      case ParameterInit::kNormal: {
        const uint64_t stream = parameter_stream(seed, t.init_key);
        kernels::cpu::parallel_for(t.size, kernels::cpu::kChunkElements,
                                   [&](int64_t begin, int64_t end) {
                                     for (int64_t i = begin; i < end; ++i) {
                                       out[i] = t.stddev * standard_normal_at(stream, i);
                                     }
                                   });
        break;
      }
    }
  }
}

}  // namespace tessel::stage
