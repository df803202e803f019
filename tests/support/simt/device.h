// Included first (-include) into every kernels/cuda source that the SIMT emulator compiles with
// the host compiler: it makes CUDA C++ device code ordinary C++ that runs on the emulator's
// fibers. The CUDA headers already give host definitions of the vector types, dim3 and the bf16
// conversions; this adds the built-in variables, shared memory, barriers, warp shuffles,
// atomics, the device math intrinsics and the kernel launch (include/kernels/cuda/launch.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>

#include "tests/support/simt/grid.h"
#include "tests/support/simt/simt.h"

#define __launch_bounds__(...)

// One block runs at a time on the host thread, so a static is the block's shared memory.
#undef __shared__
#define __shared__ static

#define threadIdx (::tessel::simt::coordinates().thread)
#define blockIdx (::tessel::simt::coordinates().block)
#define blockDim (::tessel::simt::coordinates().block_dim)
#define gridDim (::tessel::simt::coordinates().grid_dim)

inline void __syncthreads() { ::tessel::simt::sync_threads(); }

template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 4 || sizeof(T) == 8));
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof value);
  bits = ::tessel::simt::shuffle_xor_bits(mask, bits, lane_mask, width);
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Threads of a block never run at the same time, so a plain read-modify-write is atomic.
template <class T>
T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}

inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __int_as_float(int x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
// CUDA's integer min and max for mixed operands: the usual arithmetic conversions.
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
constexpr std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
constexpr std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}

// The CUDA runtime's C++ overload, which its header gives nvcc only.
template <class... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...), cudaFuncAttribute attribute,
                                 int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}

namespace tessel::simt {

// kernel<<<grid, block, shared, stream>>>(args...), run at once on the calling thread (every
// stream of the emulator is synchronous); a refused configuration or a fault becomes the
// thread's last error, as cudaGetLastError reports it.
template <class... Params>
class Launch {
 public:
  Launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
         cudaStream_t)
      : name_(name), kernel_(kernel), config_{grid, block, shared_bytes} {}

  template <class... Args>
  void operator()(Args&&... args) const {
    // Converted to the parameter types first, as a launch copies its arguments.
    std::tuple<Params...> params(std::forward<Args>(args)...);
    std::string error;
    const LaunchResult result = run_grid(
        name_, reinterpret_cast<const void*>(kernel_), config_,
        [&] { std::apply(kernel_, params); }, error);
    record_launch_result(result, error);
  }

 private:
  const char* name_;
  void (*kernel_)(Params...);
  LaunchConfig config_;
};

}  // namespace tessel::simt
