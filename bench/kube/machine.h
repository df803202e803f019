// What the benchmark ran on, for the header of its table: the cores and CPU model, and the load
// average (other work on a shared machine moves every number).
#pragma once

#include <string>

namespace tessel::bench {

// "2 cores (AMD EPYC 7B13)".
std::string cpu_summary();
// The 1, 5 and 15 minute load averages: "1.52 1.20 0.98".
std::string load_average();

}  // namespace tessel::bench
