#include "cli/plan_comparison.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "cli/search_run.h"
#include "placement/data_parallel_choice.h"
#include "placement/island_sync.h"
#include "placement/iteration_model.h"
#include "placement/outer_sync_cost.h"

namespace tessel::cli {
namespace {

using namespace tessel::placement;

struct Priced {
  double iteration_s = 0;
  double comm_per_step_s = 0;
  double bytes_per_step = 0;
};

// A layout priced by a cost model (one mode): its iteration in the closed form, its amortised
// data-parallel communication per step and the bytes a rank receives for it per step.
Priced price(const FullCostModel& model, const Topology& topology, const Placement& layout) {
  std::vector<int> split;
  const PipelineTiming timing = model.pipeline_timing(layout.pipelines, &split);
  Priced p;
  p.iteration_s = predict_iteration_s(model.schedule(), timing);
  p.comm_per_step_s = data_parallel_comm_per_step_s(timing);
  p.bytes_per_step = data_parallel_bytes_per_step(topology, model.workload(), layout.stages, split,
                                                  timing.outer_sync.sync_every);
  return p;
}

int sites_in(const std::vector<int>& devices, const Topology& topology) {
  std::set<std::string> sites;
  for (int d : devices) sites.insert(topology.devices[d].site);
  return static_cast<int>(sites.size());
}

// "pipelines over 1.0 sites (max 1), stage groups over 8.0 sites (max 8)"
std::string spread(const Placement& layout, const Topology& topology) {
  auto mean_max = [&](const std::vector<std::vector<int>>& groups) {
    double sum = 0;
    int most = 0;
    for (const auto& g : groups) {
      const int n = sites_in(g, topology);
      sum += n;
      most = std::max(most, n);
    }
    char text[64];
    std::snprintf(text, sizeof text, "%.1f sites (max %d)", sum / double(groups.size()), most);
    return std::string(text);
  };
  return "pipelines over " + mean_max(layout.pipelines) + ", stage groups over " +
         mean_max(layout.stages);
}

// Each replica's pipeline as its sites in stage order, runs collapsed: "Oregon x3, Virginia".
std::string pipeline_sites(const std::vector<int>& pipeline, const Topology& topology) {
  std::string text;
  for (size_t s = 0; s < pipeline.size();) {
    const std::string& site = topology.devices[pipeline[s]].site;
    size_t run = 1;
    while (s + run < pipeline.size() && topology.devices[pipeline[s + run]].site == site) ++run;
    text += (text.empty() ? "" : ", ") + site + (run > 1 ? " x" + std::to_string(run) : "");
    s += run;
  }
  return text;
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f s", s);
  return text;
}

std::string megabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MB", bytes / 1e6);
  return text;
}

}  // namespace

std::string data_parallel_comparison(const PlanOptions& options, const PlanInputs& mode,
                                     const Placement& planned, const DataParallelMode& priced_at,
                                     const char* command) {
  PlanOptions synchronous_options = options;
  synchronous_options.data_parallel = "synchronous";
  synchronous_options.sync_every.reset();
  synchronous_options.delta_bits.reset();
  synchronous_options.sync_overhead.reset();
  synchronous_options.blocking_sync = false;
  const PlanInputs synchronous = load_plan_inputs(synchronous_options);
  const SearchResult result = run_search(synchronous, command, false);
  const Placement synchronous_planned = build_placement(
      synchronous.topology, synchronous.objective(), *synchronous.full, result, synchronous.search);
  // Both layouts in the mode at the planned layout's H and bits, given or chosen (a chosen H
  // would otherwise be chosen again for the synchronous layout).
  PlanOptions fixed_options = options;
  fixed_options.sync_every = std::to_string(priced_at.sync_every);
  fixed_options.delta_bits = std::to_string(priced_at.delta_bits);
  fixed_options.sync_overhead.reset();
  const PlanInputs fixed = load_plan_inputs(fixed_options);

  const DataParallelMode& m = priced_at;
  const std::string mode_title = data_parallel_name(m);
  const Placement* layouts[2] = {&synchronous_planned, &planned};
  const FullCostModel* models[2] = {synchronous.full.get(), fixed.full.get()};
  const char* model_names[2] = {"synchronous", mode_title.c_str()};
  const char* layout_names[2] = {"synchronous", "low-communication"};

  std::ostringstream o;
  o << "\ndata parallelism: synchronous against " << mode_title
    << (m.delayed ? " (the exchange overlaps the next inner step)" : " (the exchange is waited)")
    << ", each layout planned by its own search (same budget and seed)\n"
    << "the outer sync is amortised over its H steps: iteration = inner step + stall per sync / "
       "H; data-parallel communication per step = the per-step all-reduces (inside each site in "
       "the mode) + the delta exchange / H, the busiest stage's; MB received per rank and step\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-34s %-19s %12s %15s %12s\n", "priced as",
                "layout planned for", "iteration", "DP comm/step", "DP MB/step");
  o << line;
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) {
      const Priced p = price(*models[a], mode.topology, *layouts[b]);
      std::snprintf(line, sizeof line, "%-34s %-19s %12s %15s %12s\n", model_names[a],
                    layout_names[b], seconds(p.iteration_s).c_str(),
                    seconds(p.comm_per_step_s).c_str(), megabytes(p.bytes_per_step).c_str());
      o << line;
    }
  }
  for (int b = 0; b < 2; ++b) {
    o << "\nlayout planned for " << layout_names[b] << ": " << spread(*layouts[b], mode.topology)
      << "\n";
    for (size_t r = 0; r < layouts[b]->pipelines.size(); ++r)
      o << "  replica " << r << ": " << pipeline_sites(layouts[b]->pipelines[r], mode.topology)
        << "\n";
  }
  o << "\nthe two searches chose "
    << (planned.stages == synchronous_planned.stages ? "the same" : "different") << " layouts\n";
  return o.str();
}

}  // namespace tessel::cli
