// Where a job resumes from, and where each rank's state comes from. Every rank takes the
// inventory of its dir (its own with checkpoint.shared: false, the one shared dir otherwise;
// checkpoint.h inventory_states: the steps at which it holds a verified state of its stage),
// the ranks exchange their inventories, and every rank computes the same plan from them:
//   S = the newest step at which every stage has at least one rank holding a verified state.
// A rank that holds S loads it from its dir; one that does not receives it from a
// data-parallel peer of its stage that holds it (peer_state.h), the stage's receivers spread
// over its holders in replica order. No rank with any checkpoint: a fresh start. Some with
// one but no S: every rank fails with one error naming the stages with no state and the steps
// each rank holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/pipeline_layout.h"
#include "noderuntime/transport/communicator.h"

namespace tessel::stage {

// The newest usable steps a rank reports; older ones do not matter when this many newer ones
// are usable (a dir keeps `keep` steps, 3 by default).
inline constexpr size_t kMaxInventorySteps = 32;

// What one rank found in its dir.
struct RankInventory {
  bool failed = false;         // it could not take the inventory (its own error says why)
  bool found_any = false;      // its dir held a checkpoint, usable or not
  std::vector<int64_t> steps;  // the steps it holds a verified state of, newest first

  bool operator==(const RankInventory&) const = default;
};

struct ResumePlan {
  std::optional<int64_t> step;  // nullopt: no rank has any checkpoint, a fresh start
  std::vector<int> source;      // per rank: itself (its own dir), or the peer that sends its state
};

// The plan from every rank's inventory (indexed by rank). `dir` is the job's checkpoint dir,
// named in errors with what kind it is (`dirs`). Throws CheckpointError when a rank failed (naming
// it), or when ranks have checkpoints but no step S exists (naming the stages with no state and
// every rank's steps).
ResumePlan plan_resume(const PipelineLayout& layout, const std::vector<RankInventory>& ranks,
                       const std::string& dir, CheckpointDirs dirs);

// Every rank's inventory, to every rank: one all-reduce over the world (steps in 16-bit
// pieces, exact as floats). Only the newest kMaxInventorySteps of `mine` travel.
std::vector<RankInventory> exchange_inventories(transport::Communicator& comm,
                                                const PipelineLayout& layout,
                                                const RankInventory& mine);

// "rank 2 (stage 0 replica 1)"
std::string rank_label(const PipelineLayout& layout, int rank);

}  // namespace tessel::stage
