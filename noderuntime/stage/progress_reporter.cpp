#include "noderuntime/stage/progress_reporter.h"

#include <nlohmann/json.hpp>

#include "proto/progress/step_metrics.h"

namespace tessel::stage {

void ProgressReporter::report(pb::StageEvent event) {
  *event.mutable_tasklet() = tasklet_;
  event.set_sequence(++sequence_);
  send(std::move(event));
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
