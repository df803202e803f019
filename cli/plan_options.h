// Options shared by `tessel plan` and `tessel simulate`: what to place, on what, how.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "placement/full_cost.h"
#include "placement/paper_cost.h"
#include "placement/search.h"
#include "placement/topology.h"
#include "placement/workload.h"

namespace tessel::cli {

// --c-dp-gb and --c-pp-gb: at most a petabyte of gradients or activations.
inline constexpr double kMaxPaperGb = 1e6;

struct PlanOptions {
  std::string topology_file;
  int stages = 0;
  int replicas = 0;
  std::string model_file;
  std::string preset = "gpt3-1.3b";
  std::string cost_model = "full";
  std::optional<double> c_dp_gb;
  std::optional<double> c_pp_gb;
  std::string schedule = "1f1b";
  int chunks = 2;
  bool no_overlap = false;
  std::string strategy = "evolutionary";
  long evaluations = 5000;
  double time_limit_s = 0;
  uint64_t seed = 1;
  int threads = 0;
  long swap_trials = 0;
  bool no_seeds = false;
  // The data-parallel mode (placement/data_parallel_mode.h); unset: the workload's.
  std::optional<std::string> data_parallel;
  // "auto" (the planner chooses: placement/sync_period.h) or a number; unset: the model file's,
  // else auto.
  std::optional<std::string> sync_every;
  std::optional<std::string> delta_bits;
  std::optional<double> sync_overhead;  // with sync_every auto: the tolerance
  bool blocking_sync = false;

  void add_to(CLI::App& cmd, bool with_search);
};

// Everything loaded and checked, ready to search or simulate.
struct PlanInputs {
  placement::Topology topology;
  placement::Workload workload;
  placement::PartitionShape shape;
  std::unique_ptr<placement::FullCostModel> full;    // always (it predicts iteration time)
  std::unique_ptr<placement::PaperCostModel> paper;  // with --cost-model paper
  placement::SearchOptions search;

  const placement::CostModel& objective() const {
    return paper ? static_cast<const placement::CostModel&>(*paper) : *full;
  }
};

PlanInputs load_plan_inputs(const PlanOptions& options);

}  // namespace tessel::cli
