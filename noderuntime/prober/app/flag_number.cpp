#include "noderuntime/prober/app/flag_number.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace tessel::prober {

std::optional<double> parse_flag_number(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace tessel::prober
