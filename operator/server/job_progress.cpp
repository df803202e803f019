#include "operator/server/job_progress.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace tessel::server {

namespace pb = tessel::v1alpha1;

JobProgressFold::JobProgressFold(int world_size) : ranks_(static_cast<size_t>(world_size)) {
  progress_.world_size = world_size;
}

JobProgressFold::Rank* JobProgressFold::current(const pb::Tasklet& tasklet) {
  Rank& rank = ranks_[static_cast<size_t>(tasklet.rank())];
  if (rank.known && rank.incarnation == tasklet.incarnation()) return &rank;
  if (std::find(rank.retired.begin(), rank.retired.end(), tasklet.incarnation()) !=
      rank.retired.end()) {
    return nullptr;
  }
  // A new process of this rank: it replaces the one before, whose checkpoints stay on disk.
  Rank fresh;
  fresh.retired = std::move(rank.retired);
  if (rank.known) {
    if (fresh.retired.size() == kMaxRetiredIncarnations) fresh.retired.erase(fresh.retired.begin());
    fresh.retired.push_back(rank.incarnation);
  }
  fresh.known = true;
  fresh.incarnation = tasklet.incarnation();
  fresh.checkpoint_step = rank.checkpoint_step;
  fresh.stage = tasklet.stage();
  fresh.replica = tasklet.replica();
  rank = std::move(fresh);
  return &rank;
}

void JobProgressFold::passed(Rank& rank, int64_t step) {
  if (step <= rank.step) return;
  rank.step = step;
  rank.loss = std::numeric_limits<double>::quiet_NaN();
}

bool JobProgressFold::add(const pb::StageEvent& event) {
  Rank* rank = current(event.tasklet());
  if (rank == nullptr) return false;
  switch (event.event_case()) {
    case pb::StageEvent::kStarted: {
      const pb::Started& started = event.started();
      rank->started = true;
      total_steps_ = std::max<int64_t>(total_steps_, started.steps());
      if (started.has_resumed_from()) {
        passed(*rank, started.resumed_from());
        rank->checkpoint_step = std::max(rank->checkpoint_step, started.resumed_from());
      }
      break;
    }
    case pb::StageEvent::kStep:
      rank->latest = progress::step_metrics(event.step());
      rank->step = rank->latest->step;
      rank->loss = rank->latest->loss;
      break;
    case pb::StageEvent::kCheckpoint:
      rank->checkpoint_step = std::max(rank->checkpoint_step, event.checkpoint().step());
      break;
    case pb::StageEvent::kStopped:
      rank->stopped = true;
      passed(*rank, event.stopped().step());
      break;
    case pb::StageEvent::kDone:
      rank->done = true;
      passed(*rank, event.done().step());
      break;
    case pb::StageEvent::kError: {
      std::string message = event.error().message();
      if (message.size() > kMaxFailureMessageBytes) {
        message.resize(kMaxFailureMessageBytes);
        message += "...";
      }
      rank->failure = message.empty() ? "failed (no message)" : message;
      break;
    }
    case pb::StageEvent::EVENT_NOT_SET:
      return false;
  }
  JobProgress next = summary();
  next.updated = std::chrono::system_clock::now();
  progress_ = std::move(next);
  return true;
}

JobProgress JobProgressFold::summary() const {
  JobProgress p;
  p.world_size = static_cast<int>(ranks_.size());
  p.total_steps = total_steps_;
  int64_t step = ranks_.empty() ? -1 : ranks_.front().step;
  int64_t checkpoint = ranks_.empty() ? -1 : ranks_.front().checkpoint_step;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const Rank& rank = ranks_[r];
    p.started += rank.started;
    p.done += rank.done;
    p.stopped += rank.stopped;
    step = std::min(step, rank.step);
    checkpoint = std::min(checkpoint, rank.checkpoint_step);
    const double rate = rank.latest ? rank.latest->tokens_per_s : 0;
    if (rate > 0 && (p.tokens_per_s == 0 || rate < p.tokens_per_s)) p.tokens_per_s = rate;
    if (!rank.failure.empty()) {
      p.failures.push_back("rank " + std::to_string(r) + " (stage " + std::to_string(rank.stage) +
                           " replica " + std::to_string(rank.replica) + "): " + rank.failure);
    }
  }
  p.step = step;
  p.last_checkpoint_step = checkpoint;
  p.stages = stage_figures();
  for (const Rank& rank : ranks_) {
    if (step >= 0 && rank.step == step && !std::isnan(rank.loss)) {
      p.loss = rank.loss;  // a rank that reported this very step
      break;
    }
  }
  return p;
}

std::vector<controller::StageFigures> JobProgressFold::stage_figures() const {
  // A map: the stage numbers come from the processes, and only the ranks are checked.
  std::map<int, controller::StageFigures> slowest;
  for (const Rank& rank : ranks_) {
    if (rank.stage < 0 || rank.replica < 0 || !rank.latest) continue;  // not in the job, no step
    const progress::StepMetrics& latest = *rank.latest;
    const double step_s = std::isfinite(latest.step_s) ? latest.step_s : 0;
    auto [it, inserted] = slowest.try_emplace(rank.stage);
    controller::StageFigures& figures = it->second;
    if (!inserted && step_s <= figures.step_s) continue;
    figures.stage = rank.stage;
    figures.replica = rank.replica;
    figures.step = latest.step;
    figures.step_s = step_s;
    figures.bubble_fraction = latest.bubble_fraction;
    figures.network_wait_s = latest.network_wait_s;
  }
  std::vector<controller::StageFigures> out;
  out.reserve(slowest.size());
  for (auto& [stage, figures] : slowest) out.push_back(figures);
  return out;
}

}  // namespace tessel::server
