// cub::DeviceRadixSort::SortPairs for the SIMT emulator, found before CUDA's own CUB (whose
// device code the host compiler cannot build): the same contract, done on the host, since the
// emulator's device memory is host memory. As CUB documents it: a stable sort of the pairs by
// the key bits [begin_bit, end_bit), keys ordered as numbers (signed keys too); a first call with
// d_temp_storage null only sets temp_storage_bytes.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <type_traits>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  template <class KeyT, class ValueT, class NumItemsT>
  static cudaError_t SortPairs(void* d_temp_storage, size_t& temp_storage_bytes,
                               const KeyT* d_keys_in, KeyT* d_keys_out, const ValueT* d_values_in,
                               ValueT* d_values_out, NumItemsT num_items, int begin_bit = 0,
                               int end_bit = int(sizeof(KeyT) * 8), cudaStream_t = nullptr) {
    static_assert(std::is_integral_v<KeyT>, "the emulator's SortPairs takes integer keys");
    if (d_temp_storage == nullptr) {
      temp_storage_bytes = 256;  // some storage, as CUB always asks for
      return cudaSuccess;
    }
    if (temp_storage_bytes < 256 || begin_bit < 0 || end_bit > int(sizeof(KeyT) * 8) ||
        begin_bit >= end_bit) {
      return cudaErrorInvalidValue;
    }
    using Bits = std::make_unsigned_t<KeyT>;
    const int width = end_bit - begin_bit;
    const Bits field =
        width == int(sizeof(KeyT) * 8) ? Bits(~Bits(0)) : Bits((Bits(1) << width) - 1);
    // The radix key: signed keys with the sign bit flipped order as numbers.
    auto radix = [&](KeyT k) {
      Bits b = Bits(k);
      if constexpr (std::is_signed_v<KeyT>) b ^= Bits(Bits(1) << (sizeof(KeyT) * 8 - 1));
      return Bits((b >> begin_bit) & field);
    };
    const size_t n = size_t(num_items);
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return radix(d_keys_in[a]) < radix(d_keys_in[b]); });
    std::vector<KeyT> keys(n);
    std::vector<ValueT> values(n);
    for (size_t i = 0; i < n; ++i) {
      keys[i] = d_keys_in[order[i]];
      values[i] = d_values_in[order[i]];
    }
    std::copy(keys.begin(), keys.end(), d_keys_out);
    std::copy(values.begin(), values.end(), d_values_out);
    return cudaSuccess;
  }
};

}  // namespace cub
