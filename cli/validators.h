// Checks of flag values on their text, before CLI11 converts them: CLI11's PositiveNumber lets
// "nan" through and an unsigned option wraps "-1" to 2^64 - 1. Each refusal names the limit;
// CLI11 puts the flag in front ("--seed: must be ...").
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "placement/limits.h"

namespace tessel::cli {

// An integer in [min, max]; `why` (may be empty) says where the limit comes from.
inline CLI::Validator count_in(int64_t min, int64_t max, const std::string& why = "") {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, error] = std::from_chars(text.data(), end, value);
        if (text.empty() || error != std::errc() || ptr != end || value < min || value > max) {
          return "must be an integer in " + range + (why.empty() ? "" : " (" + why + ")") +
                 ", got '" + text + "'";
        }
        return "";
      },
      range);
}

// A finite number in [min, max] (or (min, max] when min_exclusive), in `unit`.
inline CLI::Validator number_in(double min, double max, bool min_exclusive,
                                const std::string& unit) {
  const std::string range = (min_exclusive ? "(" : "[") + placement::number_text(min) + ", " +
                            placement::number_text(max) + "] " + unit;
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        const bool parsed = !text.empty() && end == text.c_str() + text.size();
        const bool low = min_exclusive ? !(value > min) : !(value >= min);
        if (!parsed || !std::isfinite(value) || low || value > max) {
          return "must be a finite number in " + range + ", got '" + text + "'";
        }
        return "";
      },
      range);
}

// A random seed: decimal digits only, at most 2^64 - 1 (no sign: "-1" is not a seed).
inline CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, error] = std::from_chars(text.data(), end, value);
        if (text.empty() || text.front() < '0' || text.front() > '9' || error != std::errc() ||
            ptr != end) {
          return "must be an integer in [0, " + std::to_string(UINT64_MAX) + "], got '" + text +
                 "'";
        }
        return "";
      },
      "[0, 2^64-1]");
}

}  // namespace tessel::cli
