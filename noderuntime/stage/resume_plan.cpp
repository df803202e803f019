#include "noderuntime/stage/resume_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "noderuntime/stage/checkpoint.h"

namespace tessel::stage {
namespace {

// A step in 16-bit pieces, each exact as a float (an all-reduce is of floats).
constexpr size_t kPieces = 4;
// Per rank: [0] failed, [1] found any, [2] steps sent, then kPieces per step.
constexpr size_t kSlot = 3 + kPieces * kMaxInventorySteps;

std::string steps_text(const std::vector<int64_t>& steps) {
  if (steps.empty()) return "none";
  std::string text = steps.size() == 1 ? "step " : "steps ";
  for (size_t i = 0; i < steps.size(); ++i) text += (i ? ", " : "") + std::to_string(steps[i]);
  return text;
}

}  // namespace

std::string rank_label(const PipelineLayout& layout, int rank) {
  const PipelineLayout::Tasklet t = layout.tasklet_of(rank);
  return "rank " + std::to_string(rank) + " (stage " + std::to_string(t.stage) + " replica " +
         std::to_string(t.replica) + ")";
}

ResumePlan plan_resume(const PipelineLayout& layout, const std::vector<RankInventory>& ranks,
                       const std::string& dir, CheckpointDirs dirs) {
  const int world = layout.world_size();
  const auto list = [&](const std::vector<int>& members) {
    std::string text;
    for (int rank : members) text += (text.empty() ? "" : ", ") + rank_label(layout, rank);
    return text;
  };
  std::vector<int> failed;
  bool found_any = false;
  for (int rank = 0; rank < world; ++rank) {
    if (ranks[rank].failed) failed.push_back(rank);
    found_any = found_any || ranks[rank].found_any || !ranks[rank].steps.empty();
  }
  if (!failed.empty()) {
    throw CheckpointError("resume: not starting: " + list(failed) +
                          " could not take the inventory of its checkpoint folder (its error "
                          "says why)");
  }
  ResumePlan plan;
  plan.source.resize(static_cast<size_t>(world));
  for (int rank = 0; rank < world; ++rank) plan.source[rank] = rank;
  if (!found_any) return plan;

  // Whether rank holds step.
  const auto holds = [&](int rank, int64_t step) {
    const auto& steps = ranks[rank].steps;
    return std::find(steps.begin(), steps.end(), step) != steps.end();
  };
  std::set<int64_t, std::greater<>> candidates;
  for (int rank = 0; rank < world; ++rank) {
    candidates.insert(ranks[rank].steps.begin(), ranks[rank].steps.end());
  }
  for (int64_t step : candidates) {
    bool every_stage = true;
    for (int stage = 0; stage < layout.stages && every_stage; ++stage) {
      const std::vector<int> group = layout.data_parallel_group(stage);
      every_stage =
          std::any_of(group.begin(), group.end(), [&](int rank) { return holds(rank, step); });
    }
    if (!every_stage) continue;
    plan.step = step;
    for (int stage = 0; stage < layout.stages; ++stage) {
      std::vector<int> holders, receivers;
      for (int rank : layout.data_parallel_group(stage)) {
        (holds(rank, step) ? holders : receivers).push_back(rank);
      }
      for (size_t k = 0; k < receivers.size(); ++k) {
        plan.source[receivers[k]] = holders[k % holders.size()];
      }
    }
    return plan;
  }

  std::string without;  // the stages no rank holds any state of
  for (int stage = 0; stage < layout.stages; ++stage) {
    const std::vector<int> group = layout.data_parallel_group(stage);
    if (std::all_of(group.begin(), group.end(), [&](int r) { return ranks[r].steps.empty(); })) {
      without += (without.empty() ? "" : ", ") + std::to_string(stage);
    }
  }
  std::string found;
  for (int rank = 0; rank < world; ++rank) {
    found += (found.empty() ? "" : "; ") + rank_label(layout, rank) + ": " +
             steps_text(ranks[rank].steps);
  }
  throw CheckpointError(
      "resume: no checkpoint step at which every stage has a verified state (" +
      (dirs == CheckpointDirs::kShared ? "checkpoint.shared: true, " + dir
                                       : "checkpoint.shared: false, each rank's own " + dir) +
      "): " +
      (without.empty() ? "the stages' steps do not meet"
                       : "no rank holds a state of stage " + without) +
      ". The ranks hold: " + found +
      " (each rank's lines above name what it skipped). Restore the lost checkpoints, or start "
      "afresh (resume: false, or another checkpoint dir)");
}

std::vector<RankInventory> exchange_inventories(transport::Communicator& comm,
                                                const PipelineLayout& layout,
                                                const RankInventory& mine) {
  const int world = layout.world_size();
  std::vector<float> slots(static_cast<size_t>(world) * kSlot, 0.0f);
  float* own = &slots[static_cast<size_t>(comm.rank()) * kSlot];
  own[0] = mine.failed ? 1.0f : 0.0f;
  own[1] = mine.found_any ? 1.0f : 0.0f;
  const size_t sent = std::min(mine.steps.size(), kMaxInventorySteps);
  own[2] = static_cast<float>(sent);
  for (size_t i = 0; i < sent; ++i) {
    const uint64_t step = static_cast<uint64_t>(mine.steps[i]);
    for (size_t p = 0; p < kPieces; ++p) {
      own[3 + i * kPieces + p] = static_cast<float>((step >> (16 * p)) & 0xFFFF);
    }
  }
  comm.all_reduce(slots.data(), slots.size(), transport::DType::kF32, layout.world());
  std::vector<RankInventory> all(static_cast<size_t>(world));
  for (int rank = 0; rank < world; ++rank) {
    const float* slot = &slots[static_cast<size_t>(rank) * kSlot];
    all[rank].failed = slot[0] != 0;
    all[rank].found_any = slot[1] != 0;
    const size_t count = std::min(static_cast<size_t>(slot[2]), kMaxInventorySteps);
    for (size_t i = 0; i < count; ++i) {
      uint64_t step = 0;
      for (size_t p = 0; p < kPieces; ++p) {
        step |= static_cast<uint64_t>(slot[3 + i * kPieces + p]) << (16 * p);
      }
      all[rank].steps.push_back(static_cast<int64_t>(step));
    }
  }
  return all;
}

}  // namespace tessel::stage
