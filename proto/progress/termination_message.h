// What a stage process leaves in its pod's termination message when training is done: the
// container's terminationMessagePath, which the kubelet copies into the pod's status
// (containerStatuses[].state.terminated.message). The operator learns a run's last step and loss
// from its StageProgress events; those are lost when the operator is down as the job ends (the
// stages give up after a bounded wait). The pods keep the final figures for as long as they exist,
// so an operator that restarted still shows where training ended. Defined here once for the
// writer (tessel-stage) and the reader (the operator).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace tessel::progress {

// The kubelet keeps at most this many bytes of a container's termination message.
inline constexpr size_t kMaxTerminationMessageBytes = 4096;

struct FinalFigures {
  int64_t step = 0;  // the step the rank finished training at (its Done event's)
  // That step's loss (the mean over the global batch, the same on every rank); NaN when this
  // process did not train that step (it resumed from a checkpoint of it).
  double loss = std::numeric_limits<double>::quiet_NaN();
  int64_t last_checkpoint_step = -1;  // the rank's newest checkpoint (or resumed step); -1: none
};

// One JSON object: {"done":{"step":20,"loss":5.1234,"lastCheckpointStep":20}} (loss null when
// NaN), far below kMaxTerminationMessageBytes.
std::string termination_message(const FinalFigures& figures);

// The figures of a message termination_message wrote; nullopt for any other text (an error a
// failed stage left, another program's message, a message cut short).
std::optional<FinalFigures> parse_termination_message(const std::string& message);

}  // namespace tessel::progress
