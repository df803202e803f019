// What the `tessel local` benchmarks share: a scratch folder, the command line (--steps,
// --stage-binary, --keep), and running one job through the launcher silently.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "noderuntime/launcher/launcher.h"

namespace tessel::bench {

struct BenchOptions {
  int steps = 6;
  std::string stage_binary;  // empty: $TESSEL_STAGE_BINARY or next to the benchmark
  bool keep = false;         // keep the run folders (reports, traces) for a look
  bool trace = false;
  std::string scratch;  // where the run folders go
};

// Parses --steps N, --stage-binary PATH, --keep, --trace; `extra` handles the benchmark's own
// options (returns false for one it does not know). Exits with usage on a bad argument.
template <typename Extra>
BenchOptions parse_bench_options(int argc, char** argv, const char* usage, Extra&& extra) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--steps" && has_value && (o.steps = std::atoi(argv[i + 1])) >= 2) {
      ++i;
    } else if (arg == "--stage-binary" && has_value) {
      o.stage_binary = argv[++i];
    } else if (arg == "--keep") {
      o.keep = true;
    } else if (arg == "--trace") {
      o.trace = true;
    } else if (!extra(arg, has_value ? argv[i + 1] : nullptr, i)) {
      std::fprintf(stderr, "usage: %s\n", usage);
      std::exit(2);
    }
  }
  char pattern[] = "/tmp/tessel-bench-XXXXXX";
  if (!mkdtemp(pattern)) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  o.scratch = pattern;
  return o;
}

// Runs the job silently into scratch/<name>; exits with the message if it does not finish.
inline launcher::LocalRunResult run_job(const launcher::LocalJob& job, const BenchOptions& o,
                                        const std::string& name) {
  launcher::LocalRunOptions run;
  run.output_dir = (std::filesystem::path(o.scratch) / name).string();
  run.stage_binary = o.stage_binary;
  run.trace = o.trace;
  run.out = nullptr;
  run.grace_s = 10;
  std::fprintf(stderr, "  running %s ...\n", name.c_str());
  launcher::LocalRunResult result = launcher::run_local_job(job, run);
  if (result.status != launcher::RunStatus::kDone || !result.measured_iteration_s) {
    std::fprintf(stderr, "%s: the run did not finish: %s\n", name.c_str(), result.message.c_str());
    std::exit(1);
  }
  return result;
}

// Removes the scratch folder unless --keep; says where it is otherwise.
inline void finish_scratch(const BenchOptions& o) {
  if (o.keep) {
    std::printf("\nrun folders (reports, traces): %s\n", o.scratch.c_str());
  } else {
    std::filesystem::remove_all(o.scratch);
  }
}

// Mean over the steps after the first of the slowest rank's compute time.
inline double compute_s(const launcher::LocalRunResult& r) {
  double slowest = 0;
  for (const launcher::RankRecord& rank : r.ranks) {
    double sum = 0;
    for (size_t i = 1; i < rank.steps.size(); ++i) sum += rank.steps[i].compute_s;
    slowest = std::max(slowest, sum / double(rank.steps.size() - 1));
  }
  return slowest;
}

}  // namespace tessel::bench
