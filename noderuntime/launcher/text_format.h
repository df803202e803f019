// printf into a std::string, for the launcher's messages and report.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace tessel::launcher {

[[gnu::format(printf, 1, 2)]] inline std::string printf_text(const char* pattern, ...) {
  va_list args;
  va_start(args, pattern);
  va_list again;
  va_copy(again, args);
  const int length = std::vsnprintf(nullptr, 0, pattern, args);
  va_end(args);
  std::string text(length > 0 ? static_cast<size_t>(length) : 0, '\0');
  std::vsnprintf(text.data(), text.size() + 1, pattern, again);
  va_end(again);
  return text;
}

}  // namespace tessel::launcher
