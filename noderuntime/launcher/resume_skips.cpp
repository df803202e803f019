#include "noderuntime/launcher/resume_skips.h"

#include <algorithm>
#include <fstream>
#include <string_view>

namespace tessel::launcher {

namespace {

constexpr std::string_view kPrefix = "tessel-stage ";
constexpr std::string_view kMarker = ": resume: skipping ";

}  // namespace

std::vector<std::string> resume_skips(const std::vector<std::string>& log_paths) {
  std::vector<std::string> faults;  // "step N: <file>: <fault>", each once
  std::vector<std::string> lines;
  size_t more = 0;
  for (const std::string& path : log_paths) {
    std::ifstream in(path, std::ios::binary);
    for (std::string line; std::getline(in, line);) {
      if (in.eof()) break;  // no newline yet: a line still being written
      // "tessel-stage rank R (stage s replica d): resume: skipping step N: ..."
      const size_t at = line.find(kMarker);
      if (line.rfind(kPrefix, 0) != 0 || at == std::string::npos) continue;
      const std::string fault = line.substr(at + kMarker.size());
      if (std::find(faults.begin(), faults.end(), fault) != faults.end()) continue;
      faults.push_back(fault);
      const size_t rank_end = line.find(" (", kPrefix.size());  // "rank R"
      const std::string rank = line.substr(kPrefix.size(), std::min(rank_end, at) - kPrefix.size());
      if (lines.size() < kMaxResumeSkips) {
        lines.push_back(fault + " (" + rank + ")");
      } else {
        ++more;
      }
    }
  }
  if (more > 0) lines.push_back("and " + std::to_string(more) + " more (the logs say them)");
  return lines;
}

}  // namespace tessel::launcher
