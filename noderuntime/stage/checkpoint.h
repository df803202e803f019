// Checkpoints of a whole job, one safetensors file per rank plus manifests:
//   <dir>/step-00000010/rank-00003.safetensors   every tensor of the rank's chunks by its model
//                                                name, its AdamW moments as "<name>.adam_m" and
//                                                "<name>.adam_v", and in the low-communication
//                                                mode its outer state as "<name>.outer_*"
//                                                (checkpoint_outer_state.h)
//   <dir>/step-00000010/manifest.json            the step's manifest (below), written by rank 0
//                                                once every rank has written its file
//   <dir>/manifest.json                          THE manifest: a byte-identical copy of the
//                                                current step's manifest, written after it. It
//                                                alone says which step is current.
// A save writes the rank files, then (after an all-reduce over the world that is also the
// barrier and carries each file's size and CRC32C to rank 0) the step's manifest, then
// <dir>/manifest.json, each by write_file_atomically; only then are old step folders pruned.
// A save that fails or is killed half-way leaves <dir>/manifest.json naming the previous step:
// a step folder that <dir>/manifest.json does not name is never used.
//
// Per-rank dirs (CheckpointDirs::kPerRank, job.json checkpoint.shared: false): each rank's
// <dir> is its own (stage pods in different clusters share no volume) and holds only that
// rank's files. The all-reduce carries every file's size and CRC32C to every rank, so every
// rank writes the same manifest bytes (all ranks' entries) into its own dir and prunes its own
// old steps.
//
// Resuming, from either kind of dir, falls back past damage: every rank takes the inventory of
// its dir (inventory_states: the committed steps at which it holds a verified file of the
// rank's stage, whichever replica wrote it; every step or file skipped said with its fault), and
// the ranks agree on the newest step every stage holds (checkpoint_resume.h). In a shared dir
// every rank sees every file, so a rank whose own file is damaged loads its data-parallel
// peer's file of the same step from the dir.
//
// Another width: a checkpoint resumes a job of another number of data-parallel replicas with
// the same model, stages, chunks, layer split and global batch (the data position counts global
// sequences); a rank loads any replica's file of its stage (they hold the same state). Another
// split or global batch is refused naming both (CheckpointMismatch).
//
// The manifest (format "tessel-stage-checkpoint-2"):
//   {"format": "tessel-stage-checkpoint-2", "step": 10, "data_position": 80, "seed": 1337,
//    "world_size": 4,                                               the job that wrote it
//    "layout": {"stages": 2, "replicas": 2, "chunks": 1, "layer_split": [2, 2],
//               "micro_batch": 2, "micro_batches": 4},             (absent in older manifests)
//    "files": [{"rank": 0, "stage": 0, "replica": 0,
//               "file": "step-00000010/rank-00000.safetensors",   relative to <dir>
//               "bytes": 1234567, "crc32c": "1a2b3c4d"}, ...]}     of the whole file
// A rank file's __metadata__ (strings, as safetensors requires, so every safetensors reader
// still reads the file) holds the format, the step, the data position (the next global
// sequence), the seed and the random-number state (none advances during training), what the
// rank is (stage, replica, chunks, layer split, model shape), "crc32c:<tensor>" (8 hex digits,
// the CRC32C of the tensor's bytes) for every tensor, and "metadata_crc32c", the CRC32C of every
// other metadata entry (metadata_digest), so an edited step or data_position is detected.
//
// Loading verifies, before any value is used: the manifest's entry for the file (its name,
// size and CRC32C), the metadata checksum and the fields the manifest repeats (step,
// data_position, seed), every tensor's checksum, the file's identity (the stage of the rank
// loading it, the replica the manifest lists it as, the same job), every tensor's shape, and
// that every value is finite (a checkpoint of a diverged state is refused naming the tensor).
// Saving refuses a non-finite value too, naming the rank and tensor. Checkpoints of format
// "tessel-stage-checkpoint-1" (no checksums) are refused with a message saying so.
//
// Limits: a manifest is read only up to 64 MiB; a rank file only when its size is the
// manifest's and at most the rank's tensors (7 x 4 bytes a parameter: itself, two moments and
// the low-communication mode's four outer vectors) plus the safetensors
// header limit (100 MB + 8), so a damaged size never drives an allocation. A kill between the
// step's manifest and <dir>/manifest.json leaves the previous step current; on the very first
// checkpoint it leaves no <dir>/manifest.json, which resume reports as missing (naming the
// step manifest to copy) rather than guessing.
//
// Resuming from a checkpoint continues bit-identically: parameters, moments, step count, data
// position and the low-communication mode's outer state (with an exchange still in flight at the
// step, checkpoint_outer_state.h) are exactly what the uninterrupted run had at that step.
//
// The code: checkpoint_manifest.h (names, manifests, the writer's shape), checkpoint_rank_file.h
// (one rank's file: built, read, verified, applied), checkpoint_outer_state.h (the outer state in
// it), this file (saving, pruning, the committed steps, loading and the inventory),
// checkpoint_resume.h (a whole job's resume).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "noderuntime/stage/safetensors.h"
#include "noderuntime/stage/stage_runtime.h"
#include "noderuntime/transport/communicator.h"

namespace tessel::stage {

// A checkpoint that cannot be used or written; the message names the file and what is wrong.
// A SafetensorsError, so callers that catch those catch these too.
class CheckpointError : public SafetensorsError {
 public:
  using SafetensorsError::SafetensorsError;
};

// A sound checkpoint of another job: another model, number of stages, chunks, layer split or
// global batch, or one of an older format. Not damage: no older step of the same dir is tried
// instead; the message names both sides.
class CheckpointMismatch : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

inline constexpr const char* kCheckpointFormat = "tessel-stage-checkpoint-2";
inline constexpr int kDefaultCheckpointKeep = 3;

// "<dir>/step-00000010"
std::string checkpoint_step_dir(const std::string& dir, int64_t step);
// "<dir>/step-00000010/rank-00003.safetensors"
std::string checkpoint_rank_file(const std::string& dir, int64_t step, int rank);
// "<dir>/manifest.json", and "<dir>/step-00000010/manifest.json"
std::string checkpoint_manifest(const std::string& dir);
std::string checkpoint_step_manifest(const std::string& dir, int64_t step);

// Whether the ranks' checkpoint dirs are one folder or each rank's own (the header says how).
enum class CheckpointDirs { kShared, kPerRank };

struct CheckpointPruning {
  // Step folders kept: the new one and the keep - 1 newest older ones (at least 1).
  int keep = kDefaultCheckpointKeep;
  // A step that is never pruned (the one this run resumed from): kept besides those when it is
  // older.
  std::optional<int64_t> protect;
};

// Writes this rank's file for the runtime's current step; every rank of the job calls it at
// the same step with the same `dirs`. Then rank 0 (kShared) or every rank in its own dir
// (kPerRank) writes the manifests and prunes old step folders (only after the new
// <dir>/manifest.json is in place; never a step newer than the new one). Throws
// CheckpointError naming the rank and tensor when a value is not finite (nothing is written),
// and CheckpointError naming the file and the cause (errno's text) on an I/O failure.
// In the low-communication mode an outer exchange still in flight is waited for first (not
// applied: the next step applies it as it would have).
void save_checkpoint(const std::string& dir, StageRuntime& runtime, transport::Communicator& comm,
                     const CheckpointPruning& pruning = {},
                     CheckpointDirs dirs = CheckpointDirs::kShared);

// The newest committed step of `dir` whose manifests check out, as inventory_states finds them
// before it reads any rank file: normally the step <dir>/manifest.json names; past a torn,
// missing or edited manifest, the newest older step that is committed. Rank files are not read
// (a resume may still fall back further, past a damaged file). nullopt when there is none: no
// <dir>, no step folder with a manifest.json (folders without one are saves that never
// finished), or only steps that are not committed. Throws CheckpointMismatch for a checkpoint
// of an older format, CheckpointError when `dir` is not a folder or cannot be listed.
std::optional<int64_t> latest_checkpoint(const std::string& dir);

// Restores parameters, moments, step count, data position and the low-communication mode's
// outer state (checkpoint_outer_state.h) of this rank from the checkpoint of `step`, verified as
// the header says: the file the manifest lists for this rank when it is of this rank's stage,
// otherwise the stage's first replica's (a job of another width: the replicas of a stage hold the
// same state). Throws CheckpointError naming the file and the tensor or field at fault
// (CheckpointMismatch for a checkpoint of another job), reading nothing into the runtime before all
// checks passed.
void load_checkpoint(const std::string& dir, int64_t step, StageRuntime& runtime);

// What a step's manifest says about one rank file: what the file's bytes are checked against.
struct StateFacts {
  int64_t step = 0;
  int64_t data_position = 0;
  uint64_t seed = 0;
  uint64_t bytes = 0;  // of the whole file
  uint32_t crc32c = 0;
  int stage = 0;  // the tasklet the manifest lists the file as (its metadata must say the same)
  int replica = 0;
};

// A rank file of this rank's stage in a checkpoint dir that passed every check
// load_checkpoint makes; written by whichever rank or replica of the stage.
struct StoredState {
  int64_t step = 0;
  std::string path;           // the rank file
  std::string manifest_path;  // the step's manifest.json that lists it
  StateFacts facts;
};

// The usable states of this rank's stage in a checkpoint dir, newest first; found_any says
// whether the dir held any checkpoint at all (a step folder or manifest.json), usable or not.
struct StateInventory {
  std::vector<StoredState> usable;
  bool found_any = false;
};

// Takes the inventory of `dir` for `runtime`'s stage (a per-rank dir, or the one shared dir).
// A step is usable when it is committed (latest_checkpoint says when) and a file of this stage
// that its manifest lists (this rank's own first, then the stage's other replicas') passes
// every check of load_checkpoint. Every step or file skipped is said on `err`, one line each,
// starting with `who`, naming the file and the fault; in a shared dir (`dirs`) this rank's own
// file missing too (a per-rank dir holds only the files its ranks wrote). Throws
// CheckpointMismatch when a step is of another job (model, stages, chunks, layer split, global
// batch) or of an older format, and CheckpointError when `dir` is not a folder or cannot be
// listed.
StateInventory inventory_states(const std::string& dir, const StageRuntime& runtime,
                                std::ostream& err, const std::string& who,
                                CheckpointDirs dirs = CheckpointDirs::kPerRank);

// The bytes of a stored state, read and verified again (the file may have changed since the
// inventory). Throws CheckpointError naming the file and the fault.
std::vector<std::byte> read_stored_state(const StoredState& state, const StageRuntime& runtime);

// Verifies `bytes`, a rank file of this rank's stage from `source` (a path, or the peer that
// sent it), against `facts` (from `facts_source`) and the runtime as load_checkpoint does, then
// restores parameters, moments, step count, data position and the outer state from it. Nothing
// is written into the runtime before every check passed. Throws CheckpointMismatch for a file
// of another job or of the other data-parallel mode, CheckpointError for any other fault.
void load_state(const std::vector<std::byte>& bytes, const StateFacts& facts,
                const std::string& source, const std::string& facts_source, StageRuntime& runtime);

// The most bytes a rank file of this runtime's stage can have: its tensors (7 x 4 bytes a
// parameter) and the largest safetensors header. A larger size is refused before it drives
// an allocation.
uint64_t max_state_bytes(const StageRuntime& runtime);

// Removes step folders older than `current` beyond the keep - 1 newest of them, except
// `pruning.protect`. Entries that another process removes meanwhile (per-rank dirs that are
// in fact one folder, pruned by every rank) are no failure. Throws CheckpointError naming a folder
// that cannot be removed.
void prune_checkpoints(const std::string& dir, int64_t current, const CheckpointPruning& pruning);

// The checksum entries of a rank file: sets "crc32c:<tensor>" for every tensor and then
// "metadata_crc32c" (save_checkpoint calls it; a test that plants a value seals with it).
void seal_checkpoint_metadata(SafetensorsFile& file);
// CRC32C over every metadata entry except "metadata_crc32c", in key order, each key and value
// length-prefixed ("<bytes>:<text>") so no two maps share a digest input.
uint32_t metadata_digest(const std::map<std::string, std::string>& metadata);
// "1a2b3c4d"
std::string crc_hex(uint32_t crc);

}  // namespace tessel::stage
