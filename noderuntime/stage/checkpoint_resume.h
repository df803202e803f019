// Resuming a job from its checkpoints, falling back past damage, from either kind of dir:
// per-rank (checkpoint.shared: false, stage pods in different clusters share no volume) or the
// one shared dir (checkpoint.shared: true, what `tessel local` uses). Every rank takes the
// inventory of its dir (checkpoint.h inventory_states, saying on stderr every step or file it
// skips and why), the ranks agree on the step S (resume_plan.h: the newest step every stage
// holds a verified state of), and each rank loads S from its dir (in a shared dir its own file,
// or its data-parallel peer's when its own is damaged) or, when its dir holds none, receives it
// from a data-parallel peer of its stage (peer_state.h). The ranks then agree on who failed, so
// a rank that cannot load ends the job at once with its own error and the others name it.
// Works across a change of the number of replicas: a rank loads any replica's file of its stage
// (checkpoint.h).
//
// Lines on `err`, each starting "tessel-stage rank R (stage s replica d): resume: ":
//   "skipping step N: <file>: <fault>"         a state that is not used, and why
//   "step S: state from its own dir, <file>"   where this rank's state came from (per-rank dir)
//   "step S: state from <file>"                the same in a shared dir
//   "step S: state from rank P (stage s replica e), a data-parallel peer"
// and on rank 0 when no rank has any checkpoint: "no checkpoint in <dir> yet" (shared), "no
// checkpoint in <dir> of any rank yet" (per-rank).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/stage_runtime.h"
#include "noderuntime/transport/communicator.h"

namespace tessel::stage {

// Every rank of the job calls it at once with its own `dir` (the same one when `dirs` is
// kShared). Returns the step resumed from (nullopt: no rank has any checkpoint, a fresh start).
// Throws CheckpointError (the same plan error on every rank, or this rank's own error, or one
// naming the ranks that failed) before any rank trains; the transport's error when a peer is
// gone.
std::optional<int64_t> resume_from_checkpoints(const std::string& dir, CheckpointDirs dirs,
                                               StageRuntime& runtime, transport::Communicator& comm,
                                               std::ostream& err);

}  // namespace tessel::stage
