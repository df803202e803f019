#include "proto/progress/termination_message.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace tessel::progress {

using nlohmann::json;

std::string termination_message(const FinalFigures& figures) {
  json done = {{"step", figures.step}};
  done["loss"] = std::isfinite(figures.loss) ? json(figures.loss) : json(nullptr);
  done["lastCheckpointStep"] = figures.last_checkpoint_step;
  return json{{"done", done}}.dump();
}

std::optional<FinalFigures> parse_termination_message(const std::string& message) {
  const json parsed = json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || parsed.size() != 1 || !parsed.contains("done")) return std::nullopt;
  const json& done = parsed["done"];
  if (!done.is_object()) return std::nullopt;
  const auto integer = [&](const char* key) {
    return done.contains(key) && done[key].is_number_integer();
  };
  if (!integer("step") || !integer("lastCheckpointStep")) return std::nullopt;
  if (!done.contains("loss") || !(done["loss"].is_number() || done["loss"].is_null())) {
    return std::nullopt;
  }
  FinalFigures figures;
  figures.step = done["step"].get<int64_t>();
  figures.last_checkpoint_step = done["lastCheckpointStep"].get<int64_t>();
  if (figures.step < 0 || figures.last_checkpoint_step < -1) return std::nullopt;
  if (done["loss"].is_number()) figures.loss = done["loss"].get<double>();
  return figures;
}

}  // namespace tessel::progress
