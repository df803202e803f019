#include "cli/kubectl_tessel/top_view.h"

#include <sstream>
#include <vector>

#include "cli/kubectl_tessel/job_fields.h"
#include "cli/kubectl_tessel/text_layout.h"

namespace tessel::kubectl_tessel {

using nlohmann::json;

json top_view(const json& job) {
  const std::string name = job_name(job);
  const json* status = field(job, "status", "object", name, "");
  const json* progress = status ? field(*status, "progress", "object", name, ".status") : nullptr;
  if (progress == nullptr) {
    const std::string phase = job_phase(job);
    throw PluginError("TrainingJob " + name + " has no progress yet (status.progress is empty" +
                      (phase.empty() ? std::string() : "; phase " + phase) +
                      "): its stages report once they run");
  }
  json view = {{"job", name}, {"phase", job_phase(job)}};
  const std::string path = ".status.progress";
  for (const char* key : {"step", "totalSteps", "tokensPerSecond", "lastCheckpointStep"}) {
    if (const json* v = field(*progress, key, "integer", name, path)) view[key] = *v;
  }
  if (const json* v = field(*progress, "loss", "number", name, path)) view["loss"] = *v;
  for (const char* key : {"eta", "updatedAt"}) {
    if (const json* v = field(*progress, key, "string", name, path)) view[key] = *v;
  }
  view["stages"] = json::array();
  if (const json* stages = field(*progress, "stages", "array", name, path)) {
    for (size_t s = 0; s < stages->size(); ++s) {
      const std::string spath = path + ".stages[" + std::to_string(s) + "]";
      const json& stage = (*stages)[s];
      json out = json::object();
      for (const char* key : {"stage", "replica", "step"}) {
        if (const json* v = field(stage, key, "integer", name, spath)) out[key] = *v;
      }
      for (const char* key : {"stepSeconds", "bubble", "networkWaitSeconds"}) {
        if (const json* v = field(stage, key, "number", name, spath)) out[key] = *v;
      }
      if (!out.contains("stage") || !out.contains("stepSeconds")) {
        throw PluginError("TrainingJob " + name + ": " + spath.substr(1) +
                          " lacks stage or stepSeconds");
      }
      view["stages"].push_back(std::move(out));
    }
  }
  return view;
}

std::string render_top(const json& view, int width) {
  std::ostringstream out;
  std::string title = "TrainingJob " + view["job"].get<std::string>();
  if (!view["phase"].get<std::string>().empty()) title += ": " + view["phase"].get<std::string>();
  out << title << "\n";
  std::vector<std::string> words;
  std::string step = "step " + (view.contains("step") ? view["step"].dump() : std::string("-"));
  if (view.contains("totalSteps")) step += "/" + view["totalSteps"].dump();
  words.push_back(step);
  if (view.contains("loss")) words.push_back("loss " + number(view["loss"].get<double>(), 5));
  if (view.contains("tokensPerSecond")) {
    words.push_back(view["tokensPerSecond"].dump() + " tokens/s");
  }
  if (view.contains("eta")) words.push_back("ETA " + view["eta"].get<std::string>());
  if (view.contains("lastCheckpointStep")) {
    words.push_back("checkpoint at step " + view["lastCheckpointStep"].dump());
  }
  if (view.contains("updatedAt")) words.push_back("at " + view["updatedAt"].get<std::string>());
  for (const std::string& line : wrap_words(words, static_cast<size_t>(width))) {
    out << line << "\n";
  }
  out << "\n";
  if (view["stages"].empty()) {
    out << "No stage has reported a step yet.\n";
    return out.str();
  }
  out << "Per stage, the latest step of its slowest replica:\n";
  out << "STAGE  REPLICA  STEP      STEP TIME  BUBBLE  NET WAIT\n";
  const auto integer = [](const json& stage, const char* key) {
    return stage.contains(key) ? stage[key].dump() : std::string("-");
  };
  for (const json& stage : view["stages"]) {
    const double bubble = stage.value("bubble", 0.0);
    out << trim_right(cell(integer(stage, "stage"), 7) + cell(integer(stage, "replica"), 9) +
                      cell(integer(stage, "step"), 8) +
                      right(number(stage["stepSeconds"].get<double>()) + " s", 11) +
                      right(number(bubble * 100, 3) + "%", 8) +
                      right(number(stage.value("networkWaitSeconds", 0.0)) + " s", 10))
        << "\n";
  }
  return out.str();
}

}  // namespace tessel::kubectl_tessel
