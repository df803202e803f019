#include "bench/kube/machine.h"

#include <fstream>
#include <string>
#include <thread>

namespace tessel::bench {
namespace {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto value = line.find_first_not_of(" \t", line.find(':') + 1);
    if (value != std::string::npos) return line.substr(value);
  }
  return "unknown CPU";
}

}  // namespace

std::string cpu_summary() {
  return std::to_string(std::thread::hardware_concurrency()) + " cores (" + cpu_model() + ")";
}

std::string load_average() {
  std::ifstream loadavg("/proc/loadavg");
  std::string one, five, fifteen;
  loadavg >> one >> five >> fifteen;
  return loadavg ? one + " " + five + " " + fifteen : "unknown";
}

}  // namespace tessel::bench
