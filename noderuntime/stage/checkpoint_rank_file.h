// One rank's file of a checkpoint (checkpoint.h describes it): built from the runtime's state,
// read with its size bounded by the manifest's, verified before any value is used (every
// checksum, the job and stage it belongs to, every shape, finite values) and then applied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/outer_sync.h"
#include "noderuntime/stage/safetensors.h"
#include "noderuntime/stage/stage_runtime.h"

namespace tessel::stage {

// "rank 3 (stage 1 replica 1)"
std::string rank_label(const StageRuntime& runtime);

// The first element of values that is not finite, if any, and its text ("nan", "inf", "-inf").
std::optional<size_t> first_non_finite(std::span<const float> values);
std::string value_text(float value);

// The rank file of `runtime`'s state after its current step, sealed: parameters, AdamW moments
// and, in the low-communication mode, the outer state (checkpoint_outer_state.h; an exchange in
// flight is waited for). Throws CheckpointError, prefixed by `where`, naming the rank and tensor
// when a value is not finite.
SafetensorsFile rank_file_of(StageRuntime& runtime, const std::string& where);

// The bytes of the rank file at `path`, when its size is the manifest's (`expected_bytes`) and at
// most `max_bytes`. Throws CheckpointError naming the file.
std::vector<std::byte> read_rank_file(const std::string& path, uint64_t expected_bytes,
                                      const std::string& manifest_path, uint64_t max_bytes);

// The metadata entry `key` of a rank file; throws CheckpointError naming `path` when missing.
std::string metadata_value(const SafetensorsFile& file, const std::string& key,
                           const std::string& path);

// A rank file's values, every check passed, and where each goes in the runtime.
struct VerifiedState {
  struct Copy {
    size_t chunk = 0;
    int64_t offset = 0;
    int part = 0;  // 0 parameters, 1 first moment, 2 second moment
    std::vector<float> values;
  };
  std::vector<Copy> copies;
  int64_t step = 0;
  int64_t data_position = 0;
  // The low-communication mode's outer state per chunk (absent in synchronous data parallelism).
  std::optional<std::vector<OuterChunkState>> outer;
};

// Every check load_checkpoint makes of one rank file's bytes; reads nothing into the runtime.
VerifiedState verified_state(const std::vector<std::byte>& bytes, const StateFacts& facts,
                             const std::string& path, const std::string& manifest_path,
                             const StageRuntime& runtime);

void apply_state(VerifiedState state, StageRuntime& runtime);

}  // namespace tessel::stage
