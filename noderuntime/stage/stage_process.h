// One tessel-stage process: rank R of a job (job_spec.h) from start to exit. It connects the
// mesh (its own address from the job, the others' too), builds its StageRuntime, resumes when
// asked (checkpoint_resume.h; none yet: step 0, said on stderr), trains the job's steps,
// checkpoints every `interval` steps and at the end (keeping `keep` step folders and the one
// it resumed from), and writes its Chrome trace when asked.
// Resuming, from the one shared dir or each rank's own (checkpoint.shared: false, where every
// rank writes the manifests into its own dir): the ranks agree on the newest step every stage
// holds a verified state of, skipping (and naming on stderr) damaged, torn or unfinished steps
// and files; a rank loads its own file of it, or a data-parallel peer's (from a shared dir, or
// over the transport from a per-rank one). No such step: every rank fails before the first step
// with one error naming the stages with no state and the steps each rank holds; a rank that
// cannot load the agreed step with its own error naming the file and the tensor or field, the
// others with an error naming that rank. A checkpoint of another job or an older format is
// refused, never skipped.
//
// Progress through `progress` (progress_reporter.h; the events of progress.proto, named here
// as in the JSON lines):
//   start       world_size, steps, parameters (this rank's), resumed_from (a step or null)
//   step        after every step (job_spec.h shows one)
//   checkpoint  step, dir: a checkpoint was written
//   stopped     step, signal (its name; empty, or null in JSON, when another rank's signal
//               stopped the job)
//   done        step
//   error       message: the run failed (also written to `err`)
// The caller flushes `progress` before the process exits.
//
// Stopping: a signal (SIGTERM, SIGINT) sets stop_signal; the rank votes to stop in the step
// under way (read just before the step's final all-reduce, so a signal during a step stops the
// job after that step), every rank learns the vote with that step's loss, and all of them stop
// after the same step, checkpoint (when a checkpoint dir is set) and exit. A stop takes the
// rest of one step plus one checkpoint save.
// Exit status: 0 done (or stopped by another rank's signal), 1 error, 128 + the signal when
// this rank was signalled. A peer that dies or falls silent fails the step within the I/O
// timeout with an error naming the peer's stage and replica.
#pragma once

#include <atomic>
#include <cstdint>
#include <ostream>

#include "noderuntime/stage/chunk_model.h"
#include "noderuntime/stage/gradient_sync.h"
#include "noderuntime/stage/job_spec.h"
#include "noderuntime/stage/progress_reporter.h"

namespace tessel::stage {

// Who rank R of the job is (stage and replica -1 when R is out of range).
pb::Tasklet tasklet_of(const JobSpec& job, int rank, uint64_t incarnation);

// make_chunk builds the chunks on the device the process chose (the CPU by default);
// make_levels the levels of the data-parallel all-reduce inside and across the job's islands
// (job_spec.h ranks[].island; null: the TCP ring at both levels, gradient_sync.h).
int run_stage_process(const JobSpec& job, int rank, ProgressReporter& progress, std::ostream& err,
                      const std::atomic<int>& stop_signal,
                      const ChunkFactory& make_chunk = cpu_chunk_factory(),
                      const IslandLevelsFactory& make_levels = {});

}  // namespace tessel::stage
