#include "noderuntime/stage/progress_reporter.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "proto/progress/step_metrics.h"

namespace tessel::stage {

void ProgressReporter::report(pb::StageEvent event) {
  *event.mutable_tasklet() = tasklet_;
  event.set_sequence(++sequence_);
  note_final(event);
  send(std::move(event));
}

void ProgressReporter::note_final(const pb::StageEvent& event) {
  switch (event.event_case()) {
    case pb::StageEvent::kStarted:
      // The step it resumed from is a checkpoint the rank holds (as the operator's fold has it).
      if (event.started().has_resumed_from()) checkpoint_step_ = event.started().resumed_from();
      break;
    case pb::StageEvent::kStep:
      last_step_ = event.step().step();
      last_loss_ = event.step().loss();
      break;
    case pb::StageEvent::kCheckpoint:
      checkpoint_step_ = std::max(checkpoint_step_, event.checkpoint().step());
      break;
    case pb::StageEvent::kDone: {
      progress::FinalFigures figures;
      figures.step = event.done().step();
      if (last_step_ == figures.step) figures.loss = last_loss_;
      figures.last_checkpoint_step = checkpoint_step_;
      done_ = figures;
      break;
    }
    case pb::StageEvent::kError:
      failure_ = event.error().message();
      break;
    default:
      break;
  }
}

std::string ProgressReporter::termination_message() const {
  if (done_) return progress::termination_message(*done_);
  return failure_.substr(0, progress::kMaxTerminationMessageBytes);
}

void JsonLinesReporter::send(pb::StageEvent event) {
  out_ << json_line(event) << '\n';
  out_.flush();
}

std::string json_line(const pb::StageEvent& event) {
  nlohmann::ordered_json line;
  const pb::Tasklet& t = event.tasklet();
  auto head = [&](const char* name) {
    line["event"] = name;
    line["rank"] = t.rank();
    line["stage"] = t.stage();
    line["replica"] = t.replica();
  };
  switch (event.event_case()) {
    case pb::StageEvent::kStarted: {
      const pb::Started& e = event.started();
      head("start");
      line["world_size"] = e.world_size();
      line["steps"] = e.steps();
      line["parameters"] = e.parameters();
      line["resumed_from"] =
          e.has_resumed_from() ? nlohmann::ordered_json(e.resumed_from()) : nullptr;
      break;
    }
    case pb::StageEvent::kStep: {
      head("step");
      progress::add_step_fields(progress::step_metrics(event.step()), line);
      break;
    }
    case pb::StageEvent::kCheckpoint:
      head("checkpoint");
      line["step"] = event.checkpoint().step();
      line["dir"] = event.checkpoint().dir();
      break;
    case pb::StageEvent::kStopped:
      head("stopped");
      line["step"] = event.stopped().step();
      line["signal"] = event.stopped().signal().empty()
                           ? nlohmann::ordered_json()
                           : nlohmann::ordered_json(event.stopped().signal());
      break;
    case pb::StageEvent::kDone:
      head("done");
      line["step"] = event.done().step();
      break;
    case pb::StageEvent::kError:
      head("error");
      line["message"] = event.error().message();
      break;
    case pb::StageEvent::EVENT_NOT_SET:
      head("unknown");
      break;
  }
  return line.dump();
}

}  // namespace tessel::stage
