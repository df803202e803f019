#include "noderuntime/stage/checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "noderuntime/stage/safetensors.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "tessel-stage-checkpoint-1";
constexpr const char* kManifest = "manifest.json";

std::string padded(int64_t value, int width) {
  std::string digits = std::to_string(value);
  return std::string(digits.size() < size_t(width) ? width - digits.size() : 0, '0') + digits;
}

std::string join(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out;
}

std::string model_text(const GptConfig& c) {
  return "layers=" + std::to_string(c.layers) + " hidden=" + std::to_string(c.channels) +
         " heads=" + std::to_string(c.heads) + " ffn=" + std::to_string(c.ffn) +
         " seq_len=" + std::to_string(c.seq_len) + " vocab=" + std::to_string(c.vocab);
}

// What a rank file says about the rank that wrote it; loading compares these with the reader.
std::map<std::string, std::string> identity(const StageRuntime& runtime) {
  const PipelineLayout& layout = runtime.layout();
  return {{"format", kFormat},
          {"model", model_text(runtime.config())},
          {"stage", std::to_string(runtime.stage())},
          {"replica", std::to_string(runtime.replica())},
          {"stages", std::to_string(layout.stages)},
          {"replicas", std::to_string(layout.replicas)},
          {"chunks", std::to_string(layout.chunks)},
          {"layer_split", join(layout.layer_split)},
          {"micro_batch", std::to_string(runtime.options().micro_batch)},
          {"micro_batches", std::to_string(runtime.options().micro_batches)}};
}

int64_t parse_int(const std::map<std::string, std::string>& metadata, const std::string& key,
                  const std::string& source) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) throw SafetensorsError(source + ": metadata '" + key + "' missing");
  try {
    size_t used = 0;
    const int64_t value = std::stoll(it->second, &used);
    if (used == it->second.size()) return value;
  } catch (const std::exception&) {
  }
  throw SafetensorsError(source + ": metadata '" + key + "' is not an integer: '" + it->second +
                         "'");
}

}  // namespace

std::string checkpoint_step_dir(const std::string& dir, int64_t step) {
  return (fs::path(dir) / ("step-" + padded(step, 8))).string();
}

std::string checkpoint_rank_file(const std::string& dir, int64_t step, int rank) {
  return (fs::path(checkpoint_step_dir(dir, step)) / ("rank-" + padded(rank, 5) + ".safetensors"))
      .string();
}

void save_checkpoint(const std::string& dir, const StageRuntime& runtime,
                     transport::Communicator& comm) {
  const int64_t step = runtime.steps_done();
  const std::string step_dir = checkpoint_step_dir(dir, step);
  std::error_code error;
  fs::create_directories(step_dir, error);
  if (error) {
    throw std::runtime_error("checkpoint: cannot create directory '" + step_dir +
                             "': " + error.message());
  }
  SafetensorsFile file;
  file.metadata = identity(runtime);
  file.metadata["step"] = std::to_string(step);
  file.metadata["data_position"] = std::to_string(runtime.data_position());
  file.metadata["seed"] = std::to_string(runtime.options().seed);
  file.metadata["rng"] =
      "no random stream advances during training: initialisation is counter-based from the "
      "seed, the data order follows from data_position";
  for (const auto& chunk : runtime.chunks()) {
    for (const ParameterTensor& t : chunk->model.layout().tensors()) {
      file.add_f32(t.name, t.shape, chunk->model.params().data() + t.offset);
      file.add_f32(t.name + ".adam_m", t.shape, chunk->adam.m.data() + t.offset);
      file.add_f32(t.name + ".adam_v", t.shape, chunk->adam.v.data() + t.offset);
    }
  }
  write_safetensors(checkpoint_rank_file(dir, step, comm.rank()), file);

  // Barrier: once it returns, every rank's file is in place.
  float token = 1.0f;
  comm.all_reduce(&token, 1, transport::DType::kF32, runtime.layout().world());
  if (comm.rank() != 0) return;
  nlohmann::ordered_json manifest = {{"format", kFormat},
                                     {"step", step},
                                     {"data_position", runtime.data_position()},
                                     {"world_size", comm.size()},
                                     {"files", nlohmann::json::array()}};
  const PipelineLayout& layout = runtime.layout();
  for (int rank = 0; rank < comm.size(); ++rank) {
    const auto tasklet = layout.tasklet_of(rank);
    manifest["files"].push_back(
        {{"rank", rank},
         {"stage", tasklet.stage},
         {"replica", tasklet.replica},
         {"file", fs::path(checkpoint_rank_file(dir, step, rank)).filename().string()}});
  }
  const std::string path = (fs::path(step_dir) / kManifest).string();
  {
    std::ofstream out(path + ".tmp");
    out << manifest.dump(2) << '\n';
    out.close();
    if (!out) throw std::runtime_error("checkpoint: cannot write '" + path + ".tmp'");
  }
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    throw std::runtime_error("checkpoint: cannot rename '" + path + ".tmp' into place");
  }
}

std::optional<int64_t> latest_checkpoint(const std::string& dir) {
  std::optional<int64_t> latest;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0 || !fs::exists(entry.path() / kManifest)) continue;
    try {
      size_t used = 0;
      const int64_t step = std::stoll(name.substr(5), &used);
      if (used == name.size() - 5 && (!latest || step > *latest)) latest = step;
    } catch (const std::exception&) {
      // not one of ours
    }
  }
  return latest;
}

void load_checkpoint(const std::string& dir, int64_t step, StageRuntime& runtime) {
  const std::string path = checkpoint_rank_file(dir, step, runtime.rank());
  const SafetensorsFile file = read_safetensors(path);
  for (const auto& [key, expected] : identity(runtime)) {
    const auto it = file.metadata.find(key);
    if (it == file.metadata.end()) {
      throw SafetensorsError(path + ": metadata '" + key + "' missing");
    }
    if (it->second != expected) {
      throw SafetensorsError(path + ": metadata '" + key + "' is '" + it->second +
                             "', this rank has '" + expected + "'");
    }
  }
  const int64_t saved_step = parse_int(file.metadata, "step", path);
  if (saved_step != step) {
    throw SafetensorsError(path + ": metadata 'step' is " + std::to_string(saved_step) +
                           ", expected " + std::to_string(step));
  }
  const int64_t position = parse_int(file.metadata, "data_position", path);
  std::set<std::string> expected_names;
  for (auto& chunk : runtime.chunks()) {
    for (const ParameterTensor& t : chunk->model.layout().tensors()) {
      const auto copy = [&](const std::string& name, std::vector<float>& into) {
        const std::vector<float> values = file.f32(name, t.shape, path);
        std::copy(values.begin(), values.end(), into.begin() + t.offset);
        expected_names.insert(name);
      };
      copy(t.name, chunk->model.params());
      copy(t.name + ".adam_m", chunk->adam.m);
      copy(t.name + ".adam_v", chunk->adam.v);
    }
  }
  for (const auto& [name, tensor] : file.tensors) {
    if (!expected_names.count(name)) {
      throw SafetensorsError(path + ": tensor '" + name + "' does not belong to stage " +
                             std::to_string(runtime.stage()));
    }
  }
  runtime.set_position(step, position);
}

}  // namespace tessel::stage
