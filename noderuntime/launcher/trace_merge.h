// The ranks' Chrome traces (step_trace.h: one process per rank, one thread per stream) merged
// into one timeline, times shifted so the earliest event starts at 0. Every rank shares one
// steady clock, so the events line up across processes. Opens in ui.perfetto.dev.
#pragma once

#include <string>
#include <vector>

namespace tessel::launcher {

struct TraceMergeResult {
  int merged = 0;                    // rank files read
  std::vector<std::string> missing;  // rank files that did not exist (a rank that failed early)
};

// Throws std::runtime_error naming the file that is not a Chrome trace, or the output that
// cannot be written.
TraceMergeResult merge_traces(const std::vector<std::string>& rank_files,
                              const std::string& output);

}  // namespace tessel::launcher
