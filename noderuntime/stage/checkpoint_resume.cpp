#include "noderuntime/stage/checkpoint_resume.h"

#include <algorithm>
#include <vector>

#include "noderuntime/stage/peer_state.h"
#include "noderuntime/stage/resume_plan.h"

namespace tessel::stage {
namespace {

// Loads step `step` from this rank's own dir, after sending it to every rank in `receivers`
// (the header alone, saying so, when it cannot be read: no receiver waits for nothing).
void load_and_send(const StoredState& stored, const std::vector<int>& receivers,
                   StageRuntime& runtime, transport::Communicator& comm) {
  std::optional<PeerState> state;
  std::optional<CheckpointError> failure;
  try {
    state = PeerState{stored.facts, read_stored_state(stored, runtime)};
  } catch (const SafetensorsError& e) {
    failure.emplace(e.what());
  }
  send_peer_state(comm, receivers, stored.step, state);
  if (failure) throw *failure;
  load_state(state->bytes, stored.facts, stored.path, stored.manifest_path, runtime);
}

}  // namespace

std::optional<int64_t> resume_from_checkpoints(const std::string& dir, CheckpointDirs dirs,
                                               StageRuntime& runtime, transport::Communicator& comm,
                                               std::ostream& err) {
  const PipelineLayout& layout = runtime.layout();
  const int rank = comm.rank();
  const std::string who = "tessel-stage " + rank_label(layout, rank);

  RankInventory mine;
  StateInventory inventory;
  std::optional<std::string> failure;
  try {
    inventory = inventory_states(dir, runtime, err, who, dirs);
    mine.found_any = inventory.found_any;
    for (const StoredState& s : inventory.usable) mine.steps.push_back(s.step);
  } catch (const std::exception& e) {
    mine.failed = true;
    failure = e.what();
  }
  const std::vector<RankInventory> all = exchange_inventories(comm, layout, mine);
  if (failure) throw CheckpointError(*failure);
  const ResumePlan plan = plan_resume(layout, all, dir, dirs);
  if (!plan.step) {
    if (rank == 0) {
      err << "tessel-stage rank 0: resume: no checkpoint in " << dir
          << (dirs == CheckpointDirs::kShared ? "" : " of any rank")
          << " yet (no manifest.json): starting from step 0\n";
    }
    return std::nullopt;
  }
  const int64_t step = *plan.step;
  const int source = plan.source[rank];
  try {
    if (source == rank) {
      const auto stored = std::find_if(inventory.usable.begin(), inventory.usable.end(),
                                       [&](const StoredState& s) { return s.step == step; });
      std::vector<int> receivers;
      for (int r = 0; r < layout.world_size(); ++r) {
        if (r != rank && plan.source[r] == rank) receivers.push_back(r);
      }
      load_and_send(*stored, receivers, runtime, comm);
      err << who << ": resume: step " << step << ": state from "
          << (dirs == CheckpointDirs::kShared ? "" : "its own dir, ") << stored->path;
      for (size_t i = 0; i < receivers.size(); ++i) {
        err << (i ? ", " : "; sent to ") << rank_label(layout, receivers[i]);
      }
      err << '\n';
    } else {
      const std::string peer = rank_label(layout, source);
      receive_peer_state(comm, source, peer, step, runtime);
      err << who << ": resume: step " << step << ": state from " << peer
          << ", a data-parallel peer (no verified state of it in " << dir << ")\n";
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  // Who failed, to every rank: a failure ends the job at once, the others naming the rank.
  std::vector<float> failed(static_cast<size_t>(comm.size()), 0.0f);
  failed[static_cast<size_t>(rank)] = failure ? 1.0f : 0.0f;
  comm.all_reduce(failed.data(), failed.size(), transport::DType::kF32, layout.world());
  if (failure) throw CheckpointError(*failure);
  std::string others;
  for (int r = 0; r < comm.size(); ++r) {
    if (failed[static_cast<size_t>(r)] != 0) {
      others += (others.empty() ? "" : ", ") + rank_label(layout, r);
    }
  }
  if (!others.empty()) {
    throw CheckpointError("resume from step " + std::to_string(step) + ": not starting: " + others +
                          " could not load its state (its error says why)");
  }
  return step;
}

}  // namespace tessel::stage
