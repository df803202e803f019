// Checkpoints of a whole job, one safetensors file per rank plus a manifest:
//   <dir>/step-00000010/rank-00003.safetensors   every tensor of the rank's chunks by its model
//                                                name, its AdamW moments as "<name>.adam_m" and
//                                                "<name>.adam_v"
//   <dir>/step-00000010/manifest.json            written by rank 0 once every rank has written
//                                                its file (a barrier over the world): a
//                                                checkpoint is complete iff it has a manifest.
// A rank file's metadata holds the step, the data position (the next global sequence), the
// seed and the random-number state (none advances during training: initialisation is
// counter-based from the seed and the data order follows from the position), and what the
// rank is (stage, replica, chunks, layer split, model shape), which loading checks.
//
// Resuming from a checkpoint continues bit-identically: parameters, moments, step count and
// data position are exactly what the uninterrupted run had at that step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "noderuntime/stage/stage_runtime.h"
#include "noderuntime/transport/communicator.h"

namespace tessel::stage {

// "<dir>/step-00000010"
std::string checkpoint_step_dir(const std::string& dir, int64_t step);
// "<dir>/step-00000010/rank-00003.safetensors"
std::string checkpoint_rank_file(const std::string& dir, int64_t step, int rank);

// Writes this rank's file for the runtime's current step; every rank of the job calls it at
// the same step (it ends with a barrier over the world, then rank 0 writes the manifest).
// Throws SafetensorsError or std::runtime_error naming the path on an I/O failure.
void save_checkpoint(const std::string& dir, const StageRuntime& runtime,
                     transport::Communicator& comm);

// The step of the newest complete checkpoint in dir (one with a manifest), if any.
std::optional<int64_t> latest_checkpoint(const std::string& dir);

// Restores parameters, moments, step count and data position of this rank from the
// checkpoint of `step`. Throws SafetensorsError naming the file and the tensor or field that
// does not match this rank (another stage, shape, model, a missing or extra tensor).
void load_checkpoint(const std::string& dir, int64_t step, StageRuntime& runtime);

}  // namespace tessel::stage
