// The manifests of a checkpoint dir (checkpoint.h describes the format): the names of a dir's
// step folders and files, a manifest parsed with every field checked (errors name the file and the
// field) or written, and what a checkpoint says about the job that wrote it (WriterShape), which
// a resuming job must match.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/stage_runtime.h"

namespace tessel::stage {

inline constexpr const char* kOldCheckpointFormat = "tessel-stage-checkpoint-1";

// value in at least `width` digits: "00000010"
std::string padded(int64_t value, int width);
// "2,2"
std::string join(const std::vector<int>& values);

// What wrote a checkpoint, as far as resuming depends on it.
struct WriterShape {
  int stages = 0;
  int replicas = 0;
  int chunks = 0;
  std::string layer_split;  // "2,2"
  int micro_batch = 0;
  int micro_batches = 0;
  int64_t global_batch() const { return int64_t{replicas} * micro_batches * micro_batch; }
};

WriterShape shape_of(const StageRuntime& runtime);

// A checkpoint resumes a job of the same stages, chunks and layer split, and the same global
// batch (its data position counts global sequences); the number of replicas may differ. Throws
// CheckpointMismatch naming `source` and both sides.
void check_same_job(const WriterShape& writer, const std::string& source,
                    const StageRuntime& runtime);

// The refusal of a checkpoint of format kOldCheckpointFormat found at `source`.
std::string old_format_message(const std::string& source);

// A manifest's bytes, read only up to its size limit (64 MiB). Throws CheckpointError naming the
// file.
std::string read_manifest_text(const std::string& path);

// Every step folder of dir, ascending. Throws CheckpointError when dir cannot be listed.
std::vector<int64_t> step_folders(const std::string& dir);

struct ManifestEntry {
  int rank = 0;
  int stage = 0;
  int replica = 0;
  std::string file;
  uint64_t bytes = 0;
  uint32_t crc = 0;
};

struct Manifest {
  int64_t step = 0;
  int64_t data_position = 0;
  uint64_t seed = 0;
  int world_size = 0;                 // of the job that wrote it
  std::optional<WriterShape> layout;  // absent in manifests written before it was added
  std::vector<ManifestEntry> files;

  StateFacts facts(const ManifestEntry& entry) const {
    return {step, data_position, seed, entry.bytes, entry.crc, entry.stage, entry.replica};
  }
};

// "step-00000010/rank-00003.safetensors", relative to the checkpoint dir.
std::string relative_rank_file(int64_t step, int rank);

// 8 lowercase hex digits; throws CheckpointError naming `where` otherwise.
uint32_t parse_crc(const nlohmann::json& value, const std::string& where);

// Parses and checks a manifest's every field; errors name `path` and the field (a
// CheckpointMismatch for an older format).
Manifest parse_manifest(const std::string& text, const std::string& path);

// The manifest of `runtime`'s job at `step`: files[rank] is the size and CRC32C of each rank's
// file.
std::string manifest_text(const StageRuntime& runtime, int64_t step,
                          const std::vector<std::pair<uint64_t, uint32_t>>& files);

}  // namespace tessel::stage
