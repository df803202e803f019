// A job's training progress as the stage service gathered it from the stage processes'
// StageProgress streams, and the status.progress the TrainingJob shows. The controller library
// sees the stage service only through StageChannel, so it does not depend on gRPC.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "proto/progress/termination_message.h"

namespace tessel::controller {

// One pipeline stage's figures of its latest step: those of the stage's slowest replica (see
// operator/server/job_progress.h for why the slowest).
struct StageFigures {
  int stage = 0;
  int replica = 0;   // the replica whose figures these are
  int64_t step = 0;  // the step they were measured in
  double step_s = 0;
  double bubble_fraction = 0;  // [0, 1]: the share of the step the stage idled in the pipeline
  double network_wait_s = 0;
};

// What each field means (which rank's step, whose loss) is said where it is folded:
// operator/server/job_progress.h.
struct JobProgress {
  int world_size = 0;
  int started = 0, done = 0, stopped = 0;  // ranks whose current process said so
  int64_t step = -1;                       // the step every rank has passed; -1: none yet
  double loss = std::numeric_limits<double>::quiet_NaN();
  double tokens_per_s = 0;
  int64_t total_steps = 0;
  int64_t last_checkpoint_step = -1;
  std::vector<std::string> failures;  // "rank 3 (stage 1 replica 1): <message>"
  std::vector<StageFigures> stages;   // by stage; a stage none of whose ranks reported a step
                                      // yet is left out
  std::chrono::system_clock::time_point updated{};
};

// Where the stage pods of a job rendezvous and report (operator/server/stage_service.h).
class StageChannel {
 public:
  virtual ~StageChannel() = default;
  // Serves the job (its `world_size` ranks carry `token`); again with the same job_id keeps
  // what was gathered.
  virtual void register_job(const std::string& key, uint64_t job_id, int world_size,
                            const std::string& token) = 0;
  virtual void unregister_job(const std::string& key) = 0;
  virtual std::optional<JobProgress> progress(const std::string& key) const = 0;
};

// "1h2m3s", "4m0s", "12s" (Go's time.Duration form, rounded to seconds, as kubectl users read
// it); "" for a negative or non-finite time.
std::string format_eta(double seconds);

// Stages listed in status.progress.stages at most (the CRD's bound, as status.placement.stages);
// the ones beyond it are left out.
inline constexpr size_t kMaxStatusStages = 256;

// status.progress from the gathered progress: step, totalSteps, loss (when finite),
// tokensPerSecond, eta (at the current rate), lastCheckpointStep, stages (per stage
// stepSeconds, bubble, networkWaitSeconds, and the replica and step they are of), updatedAt
// (`now`).
// tokens_per_step (global batch x sequence length) turns the token rate into the ETA.
nlohmann::json progress_status(const JobProgress& progress, int64_t total_steps,
                               double tokens_per_step, const std::string& now);

// Every rank of the job's current processes reported Done: training is over (each wrote its last
// checkpoint before it said so), whatever becomes of the pods as they exit.
bool training_finished(const JobProgress& progress);

// Where training ended, from the termination messages the stage pods of a finished run left
// (GangState::termination_messages): the least step of the ranks, that step's loss (NaN when
// no rank that ended there trained it) and the least last checkpoint. nullopt unless every rank
// left final figures (a message from another program, or none, says nothing of the job).
using progress::FinalFigures;
std::optional<FinalFigures> finished_figures(const std::vector<std::string>& messages);

// status.progress that ends a run (Succeeded, or Suspended with its pods gone), from the furthest
// of three readings:
//  - the gathered progress, when its step is at least as far as the others';
//  - else the pods' final figures (`finished`), when they are past the status' step: `shown`
//    with that step, its loss (none when unknown) and last checkpoint;
//  - else `shown` (the status' progress) as it is.
// Never with an eta. The gathered progress can be behind: an operator that restarted or took
// over after the stages' last reports holds only what the stages sent since, and a rank that
// sent nothing since leaves the job's step unknown (-1). The status then shows the pods' final
// figures, or keeps the last step it showed with that step's own loss, rather than step 0 or a
// step paired with another step's loss. nullopt when there is none of the three.
std::optional<nlohmann::json> final_progress_status(const std::optional<JobProgress>& progress,
                                                    const nlohmann::json& shown,
                                                    const std::optional<FinalFigures>& finished,
                                                    int64_t total_steps, double tokens_per_step,
                                                    const std::string& now);

}  // namespace tessel::controller
