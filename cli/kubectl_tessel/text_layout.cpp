#include "cli/kubectl_tessel/text_layout.h"

#include <cmath>
#include <cstdio>

namespace tessel::kubectl_tessel {

std::string abbreviate(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  if (width < 3) return text.substr(0, width);
  const size_t head = (width - 1) / 2, tail = width - 1 - head;
  return text.substr(0, head) + "~" + text.substr(text.size() - tail);
}

std::string cell(const std::string& text, size_t width) {
  std::string out = abbreviate(text, width);
  out.resize(width, ' ');
  return out;
}

std::string right(const std::string& text, size_t width) {
  const std::string shown = abbreviate(text, width);
  return std::string(width - shown.size(), ' ') + shown;
}

std::string number(double value, int digits) {
  if (!std::isfinite(value)) return "?";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
  std::string out = buffer;
  // %g writes 1e+04 for 10000 at 4 digits: show whole numbers whole.
  if (out.find('e') != std::string::npos && std::fabs(value) >= 1) {
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
    out = buffer;
  }
  return out;
}

std::vector<std::string> wrap_words(const std::vector<std::string>& words, size_t width,
                                    const std::string& separator) {
  std::vector<std::string> lines;
  std::string line;
  for (const std::string& word : words) {
    if (!line.empty() && line.size() + separator.size() + word.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : separator) + word;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string paragraph(const std::string& text, size_t width) {
  std::string out, line;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(' ', start), text.size());
    const std::string word = text.substr(start, end - start);
    start = end + 1;
    if (word.empty()) continue;
    const size_t room = out.empty() ? width : width - 2;  // lines after the first are indented
    if (!line.empty() && line.size() + 1 + word.size() > room) {
      out += (out.empty() ? "" : "  ") + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += (out.empty() ? "" : "  ") + line + "\n";
  return out;
}

std::string trim_right(std::string line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

}  // namespace tessel::kubectl_tessel
