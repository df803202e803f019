// One row of the fault-injection suite's figures: what a case did, how the job came out, and what
// it lost. record_result() prints the row (a table line every case prints alike) and appends it as
// one JSON line to results_path(), the file docs/reliability.md's table is made from.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace tessel::testing {

struct ChaosResult {
  std::string case_name;  // "kill-stage"
  std::string fault;      // what was done, in words ("SIGKILL of rank 2's tessel-stage")
  std::string outcome;    // "recovered", or "failed: <reason of the job's Failed condition>"
  // Training steps: the newest step the job's status showed before the fault, the checkpoint
  // step the stages resumed from, their difference, and the bound it is held to; -1 where a case
  // does not restart the stages.
  int64_t last_step = -1;
  int64_t resumed_from = -1;
  int64_t steps_lost = -1;
  int64_t bound = -1;
  double recover_s = -1;  // fault -> Running again and past the resume step; -1: not measured
  int duplicates = 0;     // moments two pods of one tasklet were alive at once
  int leaked = 0;         // objects of the deleted job left in any cluster
  std::string note;       // anything the figures need said (a seed, a duration)
};

// $TESSEL_CHAOS_RESULTS, else <build>/tests/chaos/results.jsonl.
std::string results_path();

// The row as JSON (the keys are the struct's fields).
nlohmann::json to_json(const ChaosResult& result);

// Prints the row ("chaos | <case> | <outcome> | ...") and appends its JSON line to
// results_path() (the folder is created; a line is written whole by one write call).
void record_result(const ChaosResult& result);

}  // namespace tessel::testing
