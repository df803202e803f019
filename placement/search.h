// The placement search: the paper's hybrid genetic algorithm with its local search, and the
// baselines, all on the same cost model and the same evaluation budget.
#pragma once

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

struct SearchProgress {
  long evaluations = 0;
  double best_cost = 0;
  double elapsed_s = 0;
};

struct SearchOptions {
  Strategy strategy = Strategy::Evolutionary;
  long evaluations = 5000;  // budget in evaluated candidates (initial population included)
  double time_limit_s = 0;  // > 0: stop after this long (the budget is then unbounded if 0)
  uint64_t seed = 1;
  int threads = 0;  // 0: all cores
  int population = 100;
  int crossover_points = 5;
  // Evolutionary (not kl): after the paper's local search, each offspring also tries this many
  // random swaps on the true cost, each one an evaluation of the budget. 0: none, as the
  // paper's GA (best on the paper's scenarios under a fixed evaluation budget).
  long swap_trials = 0;
  // Evolutionary: start from two structured partitions (see search.cpp) besides random ones.
  bool structured_seeds = true;
  // Called now and then from the searching thread (for a progress line); may be empty.
  std::function<void(const SearchProgress&)> progress;
};

struct SearchResult {
  Labels best;
  double best_cost = 0;
  long evaluations = 0;
  double elapsed_s = 0;
  // (evaluations so far, best cost so far), one entry per improvement, and the last one.
  std::vector<std::pair<long, double>> convergence;
  double random_mean_cost = 0;  // random strategy: the mean of its samples
};

SearchResult search_placement(const CostModel& model, const SearchOptions& options);

// Every balanced partition of N devices into groups (groups unlabelled: the cost model orders
// them). Throws std::invalid_argument when there would be more than `limit`.
std::vector<Labels> all_balanced_partitions(const PartitionShape& shape, long limit = 2000000);

}  // namespace tessel::placement
