// The low-communication mode's outer state (outer_sync.h) in a rank file of a checkpoint, per
// tensor of the rank's chunks, checksummed like every other tensor (a damaged one makes the step
// unusable, and the resume falls back to the previous good step):
//   "<name>.outer_start"     theta_start (identical on every replica of the stage)
//   "<name>.outer_momentum"  the outer momentum v (identical on every replica of the stage)
//   "<name>.outer_residual"  error feedback's residual (8 and 4 bits only; this replica's own)
//   "<name>.outer_pending"   the mean delta of a delayed exchange started but not yet applied,
//                            when one is (identical on every replica of the stage)
// and the metadata entry "data_parallel": "low-communication". A synchronous job's file has no
// such entry (its bytes are what they were before the mode existed).
//
// Which job resumes which:
// - a low-communication job resumes only a file with the outer state; one without (a synchronous
//   job's) is refused naming the file and the missing tensor (CheckpointMismatch);
// - a synchronous job refuses a low-communication file naming the mode: the replicas of such a
//   job hold different parameters and moments between syncs, which synchronous data parallelism
//   (every replica the same state, the same update) cannot continue from;
// - the residual is this replica's own quantisation debt: it is restored only from the file this
//   replica wrote in a job of the same width. A rank that loads another replica's file (its own
//   damaged, a replacement replica receiving a data-parallel peer's state, another width) starts
//   with a zero residual: taking the peer's would make two replicas repay one debt, and the
//   debt of the replica whose state is lost is at most half a quantisation step per element
//   (what a restart of error feedback loses). theta_start, v and a pending mean are the stage's,
//   so the peer's are exactly what the lost replica held.
// The outer settings (H, delta_bits, the outer learning rate and momentum, delayed, stagger) may
// change across a resume: the state means the same under any of them (a residual saved at 8 or
// 4 bits is dropped by a 32-bit job; a 32-bit file gives an 8- or 4-bit job a zero residual).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/checkpoint_manifest.h"
#include "noderuntime/stage/outer_sync.h"
#include "noderuntime/stage/safetensors.h"
#include "noderuntime/stage/stage_runtime.h"

namespace tessel::stage {

// Settles the runtime's outer sync (an exchange in flight is waited for and decoded, not applied)
// and adds its state to `file`; nothing for a synchronous job. Throws CheckpointError, prefixed
// by `where`, naming the rank and tensor when a value is not finite.
void add_outer_state(StageRuntime& runtime, SafetensorsFile& file, const std::string& where);

// The outer state in `file` (a rank file of this rank's stage from `path`, whose other checks
// passed; `writer` is what wrote it) for `runtime`'s chunks, every value finite; nullopt for a
// synchronous job. Adds the names of the tensors it takes to `names`. Throws CheckpointMismatch
// when the file is of the other data-parallel mode, CheckpointError naming the file and tensor
// for any other fault.
std::optional<std::vector<OuterChunkState>> read_outer_state(
    const SafetensorsFile& file, const std::string& path, const StateFacts& facts,
    const WriterShape& writer, const StageRuntime& runtime, std::set<std::string>& names);

// Makes `state` the runtime's outer state (its parameters already restored).
void restore_outer_state(StageRuntime& runtime, std::vector<OuterChunkState> state);

}  // namespace tessel::stage
