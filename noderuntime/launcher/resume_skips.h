// What the stage processes of a resumed run skipped on their way to the checkpoint step they
// resumed from: the "tessel-stage rank R (stage s replica d): resume: skipping step N: <file>:
// <fault>" lines of their logs (checkpoint_resume.h), so `tessel local` and its report can say
// why a run resumed from an older step than the newest.
#pragma once

#include <string>
#include <vector>

namespace tessel::launcher {

// A resume's skip lines of every log (in the order given, a log's in its order), each as
// "step N: <file>: <fault>" with the rank that said it: "... (rank R)". A fault every rank
// says alike (a step's manifest) is listed once, naming the first rank that said it. Logs that
// cannot be read, and lines still being written, are left out. At most kMaxResumeSkips
// lines: the rest are counted in a last one.
std::vector<std::string> resume_skips(const std::vector<std::string>& log_paths);

// A dir keeps 3 steps by default and each rank says a skip of its own file: more lines than
// this say little more.
inline constexpr size_t kMaxResumeSkips = 16;

}  // namespace tessel::launcher
