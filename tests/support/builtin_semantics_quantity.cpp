#include "tests/support/builtin_semantics_quantity.h"

#include <cmath>
#include <map>
#include <regex>

namespace tessel::testing {

std::optional<long double> parse_quantity(const std::string& text) {
  static const std::regex pattern("^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$");
  static const std::map<std::string, long double> suffixes = {{"", 1.0L},
                                                              {"n", 1e-9L},
                                                              {"u", 1e-6L},
                                                              {"m", 1e-3L},
                                                              {"k", 1e3L},
                                                              {"M", 1e6L},
                                                              {"G", 1e9L},
                                                              {"T", 1e12L},
                                                              {"P", 1e15L},
                                                              {"E", 1e18L},
                                                              {"Ki", 1024.0L},
                                                              {"Mi", 1048576.0L},
                                                              {"Gi", std::pow(1024.0L, 3)},
                                                              {"Ti", std::pow(1024.0L, 4)},
                                                              {"Pi", std::pow(1024.0L, 5)},
                                                              {"Ei", std::pow(1024.0L, 6)}};
  std::smatch m;
  if (!std::regex_match(text, m, pattern)) return std::nullopt;
  const std::string number = m[1];
  const std::string suffix = m[2];
  if (number.find('.') != number.rfind('.') || number == "." || number == "+." || number == "-.") {
    return std::nullopt;
  }
  long double value = std::stold(number);
  if (const auto it = suffixes.find(suffix); it != suffixes.end()) return value * it->second;
  static const std::regex exponent("^[eE][-+]?[0-9]+$");
  if (std::regex_match(suffix, exponent))
    return value * std::pow(10.0L, std::stoi(suffix.substr(1)));
  return std::nullopt;
}

}  // namespace tessel::testing
