// The placement search as the commands run it: a progress line on a terminal, a warning with
// the estimated time when the budget will take long, and, where the command asks for it,
// Ctrl-C (SIGINT) stopping the search with the best placement found so far.
#pragma once

#include "cli/plan_options.h"
#include "placement/search.h"

namespace tessel::cli {

// After this long the evaluation rate is measured and the time the budget needs estimated;
// when it is more than kSearchWarnAfterS, stderr says so once, with the figure.
inline constexpr double kSearchEstimateAfterS = 1.0;
inline constexpr double kSearchWarnAfterS = 60.0;

// Searches with in.search. interruptible: while the search runs, the first SIGINT stops it
// after its current batch (result.interrupted; a second SIGINT ends the process as usual), and
// the previous SIGINT disposition is restored afterwards. command names the command in the
// lines on stderr ("tessel plan").
placement::SearchResult run_search(const PlanInputs& in, const char* command, bool interruptible);

// "3.4 h", "12 min", "45 s".
std::string duration_text(double seconds);

}  // namespace tessel::cli
