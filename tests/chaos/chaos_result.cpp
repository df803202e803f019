#include "tests/chaos/chaos_result.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace tessel::testing {

std::string results_path() {
  if (const char* path = std::getenv("TESSEL_CHAOS_RESULTS"); path && *path) return path;
  return TESSEL_CHAOS_RESULTS;
}

nlohmann::json to_json(const ChaosResult& r) {
  return {{"case", r.case_name},
          {"fault", r.fault},
          {"outcome", r.outcome},
          {"last_step", r.last_step},
          {"resumed_from", r.resumed_from},
          {"steps_lost", r.steps_lost},
          {"bound", r.bound},
          {"recover_s", r.recover_s},
          {"duplicates", r.duplicates},
          {"leaked", r.leaked},
          {"note", r.note}};
}

namespace {

std::string figure(int64_t value) { return value < 0 ? "-" : std::to_string(value); }

}  // namespace

void record_result(const ChaosResult& r) {
  char recover[32] = "-";
  if (r.recover_s >= 0) std::snprintf(recover, sizeof recover, "%.1f s", r.recover_s);
  std::ostringstream row;
  row << "chaos | " << r.case_name << " | " << r.outcome << " | last step " << figure(r.last_step)
      << " | resumed from " << figure(r.resumed_from) << " | lost " << figure(r.steps_lost)
      << " (bound " << figure(r.bound) << ") | recovered in " << recover << " | duplicates "
      << r.duplicates << " | leaked " << r.leaked << " | " << r.fault
      << (r.note.empty() ? "" : " (" + r.note + ")") << "\n";
  std::cout << row.str() << std::flush;

  const std::string path = results_path();
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  // O_APPEND and one write: lines of cases run side by side do not interleave.
  const std::string line = to_json(r).dump() + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + path + " to append the chaos results");
  const ssize_t written = ::write(fd, line.data(), line.size());
  ::close(fd);
  if (written != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("cannot append the chaos results to " + path);
  std::cout << "chaos results appended to " << path << "\n";
}

}  // namespace tessel::testing
