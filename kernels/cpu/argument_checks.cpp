#include "kernels/cpu/argument_checks.h"

#include <stdexcept>

namespace tessel::kernels::cpu::detail {

void throw_null(const char* op, const char* name) {
  throw std::invalid_argument(std::string(op) + ": argument '" + name + "' is null");
}

void throw_not_positive(const char* op, const char* name, int64_t value) {
  throw std::invalid_argument(std::string(op) + ": " + name + "=" + std::to_string(value) +
                              " must be at least 1");
}

void throw_invalid(const char* op, const std::string& message) {
  throw std::invalid_argument(std::string(op) + ": " + message);
}

}  // namespace tessel::kernels::cpu::detail
