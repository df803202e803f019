#include "noderuntime/stage/checkpoint_outer_state.h"

#include <algorithm>
#include <memory>
#include <span>
#include <utility>

#include "noderuntime/stage/checkpoint_rank_file.h"

namespace tessel::stage {
namespace {

constexpr const char* kModeKey = "data_parallel";
constexpr const char* kMode = "low-communication";

// The parts of one chunk's outer state, with their tensor-name suffixes.
struct Part {
  const char* suffix;
  std::vector<float> OuterChunkState::*values;
};
constexpr Part kStart{".outer_start", &OuterChunkState::start};
constexpr Part kMomentum{".outer_momentum", &OuterChunkState::momentum};
constexpr Part kResidual{".outer_residual", &OuterChunkState::residual};
constexpr Part kPending{".outer_pending", &OuterChunkState::pending};
constexpr Part kParts[] = {kStart, kMomentum, kResidual, kPending};

std::vector<ChunkModel*> models(StageRuntime& runtime) {
  std::vector<ChunkModel*> out;
  for (auto& chunk : runtime.chunks()) out.push_back(&chunk->model);
  return out;
}

}  // namespace

void add_outer_state(StageRuntime& runtime, SafetensorsFile& file, const std::string& where) {
  OuterSync* outer = runtime.outer_sync();
  if (!outer) return;
  outer->settle();
  file.metadata[kModeKey] = kMode;
  const std::vector<OuterChunkState>& state = outer->state();
  for (size_t c = 0; c < state.size(); ++c) {
    for (const Part& part : kParts) {
      const std::vector<float>& values = state[c].*part.values;
      if (values.empty()) continue;  // no residual at 32 bits, no exchange pending
      for (const ParameterTensor& t : runtime.chunks()[c]->model.layout().tensors()) {
        const std::string name = t.name + part.suffix;
        const std::span<const float> span(values.data() + t.offset, static_cast<size_t>(t.size));
        if (const auto bad = first_non_finite(span)) {
          throw CheckpointError(where + rank_label(runtime) + ": tensor '" + name + "' holds " +
                                value_text(span[*bad]) + " at element " + std::to_string(*bad) +
                                ": this rank's outer state is not finite; not saving it");
        }
        file.add_f32(name, t.shape, span.data());
      }
    }
  }
}

std::optional<std::vector<OuterChunkState>> read_outer_state(
    const SafetensorsFile& file, const std::string& path, const StateFacts& facts,
    const WriterShape& writer, const StageRuntime& runtime, std::set<std::string>& names) {
  const auto mode = file.metadata.find(kModeKey);
  const bool low_communication = runtime.outer_sync() != nullptr;
  if (mode != file.metadata.end() && mode->second != kMode) {
    throw CheckpointError(path + ": metadata '" + kModeKey + "' is '" + mode->second +
                          "', expected '" + kMode + "' or no such entry");
  }
  if (!low_communication) {
    if (mode == file.metadata.end()) return std::nullopt;
    throw CheckpointMismatch(
        path + ": written by a job of data_parallel.mode '" + kMode +
        "' (its replicas hold different parameters and moments between syncs, and the outer "
        "state); this job is synchronous and cannot continue from it: resume it with "
        "data_parallel.mode low-communication, or start afresh (resume: false, or another "
        "checkpoint folder)");
  }
  const std::vector<std::unique_ptr<ChunkState>>& chunks = runtime.chunks();
  if (mode == file.metadata.end()) {
    const std::string missing = chunks.at(0)->model.layout().tensors().at(0).name + kStart.suffix;
    throw CheckpointMismatch(path + ": no outer state (tensor '" + missing +
                             "' missing): written by a synchronous data-parallel job; this job's "
                             "data_parallel.mode is '" +
                             kMode +
                             "' and resumes only from checkpoints of its mode (theta_start, the "
                             "outer momentum, the residual): start afresh (resume: false, or "
                             "another checkpoint folder), or resume with data_parallel.mode "
                             "synchronous");
  }
  const LowCommunication& options = runtime.outer_sync()->options();
  // The residual is this replica's own debt: only from its own file of a job of the same width.
  const bool own_file =
      facts.replica == runtime.replica() && writer.replicas == runtime.layout().replicas;
  const bool keep_residual = own_file && options.delta_bits != 32;
  const std::string first = chunks.at(0)->model.layout().tensors().at(0).name;
  const bool has_residual = file.tensors.count(first + kResidual.suffix) > 0;
  const bool has_pending = file.tensors.count(first + kPending.suffix) > 0;
  std::vector<OuterChunkState> state(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    const ParameterLayout& layout = chunks[c]->model.layout();
    const size_t n = static_cast<size_t>(layout.total());
    // Start and momentum always; the residual and a pending mean in every tensor or in none (the
    // first tensor says which: a file missing one of them is refused by f32, naming it).
    const std::pair<Part, bool> parts[] = {
        {kStart, true}, {kMomentum, true}, {kResidual, has_residual}, {kPending, has_pending}};
    for (const auto& [part, present] : parts) {
      if (!present) continue;
      std::vector<float>& values = state[c].*part.values;
      values.assign(n, 0.0f);
      for (const ParameterTensor& t : layout.tensors()) {
        const std::string name = t.name + part.suffix;
        const std::vector<float> read = file.f32(name, t.shape, path);
        if (const auto bad = first_non_finite(read)) {
          throw CheckpointError(path + ": tensor '" + name + "' holds " + value_text(read[*bad]) +
                                " at element " + std::to_string(*bad) +
                                " (its checksum matches: the run that wrote it had this state); "
                                "not resuming from a state that is not finite");
        }
        std::copy(read.begin(), read.end(), values.begin() + t.offset);
        names.insert(name);
      }
    }
    const size_t residual = options.delta_bits == 32 ? 0 : n;
    if (!keep_residual || state[c].residual.size() != residual) {
      state[c].residual.assign(residual, 0.0f);  // none saved, or not this replica's: zero debt
    }
  }
  return state;
}

void restore_outer_state(StageRuntime& runtime, std::vector<OuterChunkState> state) {
  runtime.outer_sync()->restore(models(runtime), std::move(state));
}

}  // namespace tessel::stage
