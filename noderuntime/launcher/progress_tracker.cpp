#include "noderuntime/launcher/progress_tracker.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace tessel::launcher {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

std::optional<progress::StepMetrics> ProgressTracker::add_step(int rank,
                                                               const progress::StepMetrics& mine) {
  const int64_t step = mine.step;
  if (step < 1 || step > steps_) {
    throw std::runtime_error("rank " + std::to_string(rank) + " reported step " +
                             std::to_string(step) + " of a " + std::to_string(steps_) +
                             "-step job");
  }
  if (resumed_from_ && step <= *resumed_from_) {
    throw std::runtime_error("rank " + std::to_string(rank) + " reported step " +
                             std::to_string(step) + ", but the run resumed from step " +
                             std::to_string(*resumed_from_));
  }
  std::vector<progress::StepMetrics>& mine_so_far = per_rank_.at(rank);
  if (!mine_so_far.empty() && mine_so_far.back().step >= step) {
    throw std::runtime_error("rank " + std::to_string(rank) + " reported step " +
                             std::to_string(step) + " after step " +
                             std::to_string(mine_so_far.back().step));
  }
  mine_so_far.push_back(mine);

  if (pending_.size() < static_cast<size_t>(step)) pending_.resize(step);
  Pending& p = pending_[step - 1];
  progress::StepMetrics& s = p.summary;
  if (p.reported == 0) {
    s.step = step;
    s.loss = mine.loss;
    s.grad_norm = mine.grad_norm;
    s.tokens = mine.tokens;
  }
  s.step_s = std::max(s.step_s, mine.step_s);
  s.compute_s = std::max(s.compute_s, mine.compute_s);
  s.bubble_fraction += mine.bubble_fraction / ranks_;
  s.network_wait_s += mine.network_wait_s / ranks_;
  if (++p.reported < ranks_) return std::nullopt;
  s.tokens_per_s = s.step_s > 0 ? s.tokens / s.step_s : 0;
  done_.push_back(s);
  return s;
}

void ProgressTracker::add_start(int rank, std::optional<int64_t> resumed_from) {
  auto text = [](std::optional<int64_t> step) {
    return step ? "resumed from step " + std::to_string(*step) : std::string("started afresh");
  };
  if (resumed_from && (*resumed_from < 0 || *resumed_from > steps_)) {
    throw std::runtime_error("rank " + std::to_string(rank) + " resumed from step " +
                             std::to_string(*resumed_from) + " of a " + std::to_string(steps_) +
                             "-step job");
  }
  if (started_rank_ >= 0) {
    if (resumed_from != resumed_from_) {
      throw std::runtime_error("rank " + std::to_string(rank) + " " + text(resumed_from) +
                               ", rank " + std::to_string(started_rank_) + " " +
                               text(resumed_from_));
    }
    return;
  }
  started_rank_ = rank;
  resumed_from_ = resumed_from;
}

std::optional<double> ProgressTracker::eta_s() const {
  const std::optional<double> mean = mean_step_s();
  if (!mean) return std::nullopt;
  return *mean * double(steps_ - done_.back().step);
}

std::optional<double> ProgressTracker::mean_step_s() const {
  if (done_.empty()) return std::nullopt;
  const size_t first = done_.size() > 1 ? 1 : 0;
  double sum = 0;
  for (size_t i = first; i < done_.size(); ++i) sum += done_[i].step_s;
  return sum / double(done_.size() - first);
}

std::optional<double> ProgressTracker::iteration_s() const {
  if (done_.empty()) return std::nullopt;
  std::vector<double> times;
  for (size_t i = done_.size() > 1 ? 1 : 0; i < done_.size(); ++i) times.push_back(done_[i].step_s);
  return median(times);
}

std::string ProgressTracker::progress_line(const progress::StepMetrics& s) const {
  char throughput[32];
  if (s.tokens_per_s >= 1e4) {
    std::snprintf(throughput, sizeof throughput, "%.1fk", s.tokens_per_s / 1e3);
  } else {
    std::snprintf(throughput, sizeof throughput, "%.0f", s.tokens_per_s);
  }
  const std::optional<double> eta = eta_s();
  char line[256];
  std::snprintf(line, sizeof line,
                "step %lld/%d  loss %.4f  %s tok/s  bubble %.0f%%  net wait %.3f s  ETA %s",
                static_cast<long long>(s.step), steps_, s.loss, throughput, 100 * s.bubble_fraction,
                s.network_wait_s, eta ? format_duration(*eta).c_str() : "-");
  return line;
}

std::string format_duration(double seconds) {
  // A stage may report any step time (a stalled or hostile one: infinite, NaN, 1e300): no
  // number, or more than can be printed, is said so rather than rounded into nonsense.
  if (std::isnan(seconds)) return "-";
  if (seconds >= kMaxPrintedDuration) return ">99999:59:59";
  const long total = std::lround(std::max(0.0, seconds));
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", total / 3600, total / 60 % 60, total % 60);
  } else {
    std::snprintf(text, sizeof text, "%ld:%02ld", total / 60, total % 60);
  }
  return text;
}

}  // namespace tessel::launcher
