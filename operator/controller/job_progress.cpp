#include "operator/controller/job_progress.h"

#include <algorithm>
#include <cmath>

namespace tessel::controller {

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "";
  auto s = static_cast<int64_t>(std::llround(seconds));
  const int64_t hours = s / 3600, minutes = s % 3600 / 60;
  s %= 60;
  if (hours > 0) {
    return std::to_string(hours) + "h" + std::to_string(minutes) + "m" + std::to_string(s) + "s";
  }
  if (minutes > 0) return std::to_string(minutes) + "m" + std::to_string(s) + "s";
  return std::to_string(s) + "s";
}

namespace {

// A figure as the status shows it: finite, not negative, to four significant digits (a timer's
// reading is not more precise, and the status is rewritten on every change).
double shown(double value) {
  if (!std::isfinite(value) || value <= 0) return 0;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(value)));
  return std::round(value * scale) / scale;
}

// A loss to four decimals: what a person reads in `kubectl get trainingjobs` (the full value is
// in the stage logs and /metrics).
double shown_loss(double loss) { return std::round(loss * 1e4) / 1e4; }

nlohmann::json stages_status(const std::vector<StageFigures>& stages) {
  nlohmann::json out = nlohmann::json::array();
  for (const StageFigures& s : stages) {
    if (out.size() == kMaxStatusStages) break;
    out.push_back({{"stage", s.stage},
                   {"replica", s.replica},
                   {"step", std::max<int64_t>(s.step, 0)},
                   {"stepSeconds", shown(s.step_s)},
                   {"bubble", std::min(1.0, shown(s.bubble_fraction))},
                   {"networkWaitSeconds", shown(s.network_wait_s)}});
  }
  return out;
}

}  // namespace

nlohmann::json progress_status(const JobProgress& progress, int64_t total_steps,
                               double tokens_per_step, const std::string& now) {
  nlohmann::json out = nlohmann::json::object();
  const int64_t step = std::max<int64_t>(progress.step, 0);
  out["step"] = step;
  out["totalSteps"] = total_steps;
  if (std::isfinite(progress.loss)) out["loss"] = shown_loss(progress.loss);
  const double rate =
      std::isfinite(progress.tokens_per_s) ? std::max(0.0, progress.tokens_per_s) : 0.0;
  out["tokensPerSecond"] = static_cast<int64_t>(std::llround(rate));
  if (rate > 0 && tokens_per_step > 0 && step < total_steps) {
    const std::string eta = format_eta(double(total_steps - step) * tokens_per_step / rate);
    if (!eta.empty()) out["eta"] = eta;
  }
  if (progress.last_checkpoint_step >= 0) out["lastCheckpointStep"] = progress.last_checkpoint_step;
  if (!progress.stages.empty()) out["stages"] = stages_status(progress.stages);
  out["updatedAt"] = now;
  return out;
}

bool training_finished(const JobProgress& progress) {
  return progress.world_size > 0 && progress.done == progress.world_size;
}

std::optional<FinalFigures> finished_figures(const std::vector<std::string>& messages) {
  std::optional<FinalFigures> out;
  for (const std::string& message : messages) {
    const std::optional<FinalFigures> rank = progress::parse_termination_message(message);
    if (!rank) return std::nullopt;
    if (!out) {
      out = rank;
      continue;
    }
    if (rank->step < out->step) {
      out->step = rank->step;
      out->loss = rank->loss;
    } else if (rank->step == out->step && !std::isfinite(out->loss)) {
      out->loss = rank->loss;  // the same on every rank that trained the step
    }
    out->last_checkpoint_step = std::min(out->last_checkpoint_step, rank->last_checkpoint_step);
  }
  return out;
}

std::optional<nlohmann::json> final_progress_status(const std::optional<JobProgress>& progress,
                                                    const nlohmann::json& shown,
                                                    const std::optional<FinalFigures>& finished,
                                                    int64_t total_steps, double tokens_per_step,
                                                    const std::string& now) {
  const bool has_shown =
      shown.is_object() && shown.contains("step") && shown["step"].is_number_integer();
  const int64_t shown_step = has_shown ? shown["step"].get<int64_t>() : -1;
  const int64_t finished_step = finished ? finished->step : -1;
  if (progress && progress->step >= 0 && progress->step >= std::max(shown_step, finished_step)) {
    return progress_status(*progress, total_steps, tokens_per_step, now);
  }
  if (finished && finished->step > shown_step) {
    nlohmann::json out = has_shown ? shown : nlohmann::json::object();
    out.erase("eta");  // the run is over
    out["step"] = finished->step;
    out["totalSteps"] = total_steps;
    if (std::isfinite(finished->loss)) {
      out["loss"] = shown_loss(finished->loss);
    } else {
      out.erase("loss");  // the shown loss is another step's
    }
    if (finished->last_checkpoint_step >= 0) {
      out["lastCheckpointStep"] = finished->last_checkpoint_step;
    }
    out["updatedAt"] = now;
    return out;
  }
  if (!has_shown) return std::nullopt;
  nlohmann::json kept = shown;
  kept.erase("eta");  // the run is over
  return kept;
}

}  // namespace tessel::controller
