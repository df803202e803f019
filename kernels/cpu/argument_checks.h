// Argument checks shared by the CPU kernels: each costs a compare on the good path and throws
// std::invalid_argument naming the kernel and the argument otherwise, e.g.
// "layernorm_forward: argument 'weight' is null" or "attention_forward: C=10 is not a multiple
// of NH=3".
#pragma once

#include <cstdint>
#include <string>

namespace tessel::kernels::cpu::detail {

[[noreturn]] void throw_null(const char* op, const char* name);
[[noreturn]] void throw_not_positive(const char* op, const char* name, int64_t value);
[[noreturn]] void throw_invalid(const char* op, const std::string& message);

inline void require_pointer(const void* p, const char* op, const char* name) {
  if (p == nullptr) [[unlikely]]
    throw_null(op, name);
}

// Shapes are counts: at least 1.
inline void require_positive(int64_t value, const char* op, const char* name) {
  if (value < 1) [[unlikely]]
    throw_not_positive(op, name, value);
}

}  // namespace tessel::kernels::cpu::detail
