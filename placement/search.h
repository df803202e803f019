// The placement search: the paper's hybrid genetic algorithm with its local search, and the
// baselines, all on the same cost model and the same evaluation budget.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "placement/cost_model.h"
#include "placement/local_search.h"

namespace tessel::placement {

enum class Strategy { Evolutionary, Random, Ordered, KernighanLin, Exhaustive };
const char* to_string(Strategy s);
Strategy parse_strategy(const std::string& s);  // throws std::invalid_argument naming it

// Limits search_placement checks before it starts (std::invalid_argument naming the option,
// the value and the limit). The evaluation rate varies a hundredfold with the topology (about
// 14000 a second on 64 devices, 300 on 1024, one thread), so no count bounds the time: the
// caller can estimate it from SearchProgress (budget / rate) and stop the search by `cancel`.
// 10^7 evaluations is 2000 times the default and 50 times the longest benchmark run (178148
// evaluations in 600 s on 1024 devices, within 1% of its best after 3675).
inline constexpr long kMaxSearchEvaluations = 10'000'000;
// A time limit of more than a day is a typo (and every run can be stopped by `cancel`).
inline constexpr double kMaxSearchSeconds = 86400;
// Each thread owns a cost-model scratch (caches of up to 2^20 entries each); more threads than
// this is a typo, not a machine.
inline constexpr int kMaxSearchThreads = 1024;
// Population: every member is N labels, kept for the whole search.
inline constexpr int kMaxSearchPopulation = 100'000;

struct SearchProgress {
  long evaluations = 0;
  double best_cost = 0;
  double elapsed_s = 0;
  long budget = 0;  // the evaluation budget; 0 when only the time limit bounds the search
};

struct SearchOptions {
  Strategy strategy = Strategy::Evolutionary;
  // Budget in evaluated candidates (initial population included), 1..kMaxSearchEvaluations;
  // 0 only with a time limit (the budget is then unbounded).
  long evaluations = 5000;
  double time_limit_s = 0;  // > 0: stop after this long (at most kMaxSearchSeconds)
  uint64_t seed = 1;
  int threads = 0;       // 0: all cores; at most kMaxSearchThreads
  int population = 100;  // 2..kMaxSearchPopulation
  int crossover_points = 5;
  // Evolutionary (not kl): after the paper's local search, each offspring also tries this many
  // random swaps on the true cost, each one an evaluation of the budget. 0: none, as the
  // paper's GA (best on the paper's scenarios under a fixed evaluation budget).
  long swap_trials = 0;
  // Evolutionary: start from two structured partitions (see search.cpp) besides random ones.
  bool structured_seeds = true;
  // Called now and then from the searching thread (for a progress line); may be empty.
  std::function<void(const SearchProgress&)> progress;
  // When set and *cancel becomes true (from any thread, or a signal handler: it is lock-free),
  // the search stops after the batch it is evaluating (at most 16 candidates, or 1024 for
  // exhaustive) and returns the best placement so far with `interrupted` set. At least one
  // batch is always evaluated, so there is a best placement to return.
  const std::atomic<bool>* cancel = nullptr;
};

struct SearchResult {
  Labels best;
  double best_cost = 0;
  long evaluations = 0;
  double elapsed_s = 0;
  // (evaluations so far, best cost so far), one entry per improvement, and the last one.
  std::vector<std::pair<long, double>> convergence;
  double random_mean_cost = 0;  // random strategy: the mean of its samples
  bool interrupted = false;     // stopped by options.cancel before the budget was spent
};

// Checks options against the limits above and the model's shape (std::invalid_argument), then
// searches. An exception thrown in a worker thread (by the cost model, an allocation...) stops
// the other workers, every thread is joined, and it is rethrown here to the caller.
SearchResult search_placement(const CostModel& model, const SearchOptions& options);

// The checks search_placement makes, for callers that want them before loading anything else.
void check_search_options(const SearchOptions& options);

// Every balanced partition of N devices into groups (groups unlabelled: the cost model orders
// them). Throws std::invalid_argument when there would be more than `limit`.
std::vector<Labels> all_balanced_partitions(const PartitionShape& shape, long limit = 2000000);

}  // namespace tessel::placement
