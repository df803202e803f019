// Device buffers and input helpers for the CUDA op cases.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/check.h"
#include "tests/cuda/host_bf16.h"
#include "tests/cuda/op_registry.h"

namespace tessel::kernels::cuda::testing {

// One device allocation, freed at scope exit. Copies are synchronous on the legacy default
// stream, which the cases' Context also uses, so they see the ops' results.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t count) : count_(count) {
    TESSEL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), size_t(count) * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& values) : DeviceBuffer(int64_t(values.size())) {
    upload(values);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  int64_t size() const { return count_; }
  void upload(const std::vector<T>& values) {
    TESSEL_CUDA_CHECK(
        cudaMemcpy(data_, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> values(static_cast<size_t>(count_));
    TESSEL_CUDA_CHECK(
        cudaMemcpy(values.data(), data_, values.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return values;
  }
  // All bytes 0xFF: NaN as fp32 and as bf16, so an element the op does not write fails.
  void poison() { TESSEL_CUDA_CHECK(cudaMemset(data_, 0xFF, size_t(count_) * sizeof(T))); }

 private:
  T* data_ = nullptr;
  int64_t count_;
};

// bf16 device data, held as bit patterns.
class Bf16Buffer : public DeviceBuffer<uint16_t> {
 public:
  using DeviceBuffer<uint16_t>::DeviceBuffer;
  explicit Bf16Buffer(const std::vector<float>& values) : DeviceBuffer(int64_t(values.size())) {
    upload_floats(values);
  }
  bf16* bf16_data(int64_t offset = 0) const { return reinterpret_cast<bf16*>(get() + offset); }
  void upload_floats(const std::vector<float>& values) {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = to_bf16_bits(values[i]);
    upload(bits);
  }
  std::vector<float> download_floats() const {
    const std::vector<uint16_t> bits = download();
    std::vector<float> values(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) values[i] = from_bf16_bits(bits[i]);
    return values;
  }
};

// Uniform values in [lo, hi), rounded to bf16 when `bf16` (what a bf16 input holds).
inline std::vector<float> random_values(Rng& rng, int64_t n, float lo, float hi, bool bf16) {
  std::vector<float> v = cpu::testing::random_floats(rng, n, lo, hi);
  return bf16 ? round_to_bf16(std::move(v)) : v;
}

inline double rms(const std::vector<float>& v) {
  double sum = 0;
  for (const float x : v) sum += double(x) * x;
  return v.empty() ? 0 : std::sqrt(sum / double(v.size()));
}

// Start values for a gradient the op adds into: random with the RMS of the increment, so that
// neither the start nor the increment hides errors in the other; bf16 values for a bf16 buffer.
inline std::vector<float> accumulation_start(Rng& rng, const std::vector<float>& increment,
                                             bool bf16) {
  const float scale = float(rms(increment)) + 1e-3f;
  return random_values(rng, int64_t(increment.size()), -scale, scale, bf16);
}

inline std::vector<float> sum(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> s(a.size());
  for (size_t i = 0; i < a.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

inline Comparison compare(const char* output, const std::vector<float>& actual,
                          const std::vector<float>& expected, double tolerance) {
  return {output, relative_error(actual, expected), tolerance};
}

}  // namespace tessel::kernels::cuda::testing
