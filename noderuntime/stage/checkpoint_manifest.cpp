#include "noderuntime/stage/checkpoint_manifest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr const char* kManifest = "manifest.json";
// A manifest is a few hundred bytes a rank; anything this large is not one.
constexpr uintmax_t kMaxManifestBytes = 64u << 20;

std::string split_text(const WriterShape& w) {
  return std::to_string(w.stages) + " stages x " + std::to_string(w.chunks) +
         " chunks, layer split " + w.layer_split;
}

std::string batch_text(const WriterShape& w) {
  return std::to_string(w.global_batch()) + " sequences (" + std::to_string(w.replicas) +
         " replicas x " + std::to_string(w.micro_batches) + " micro-batches of " +
         std::to_string(w.micro_batch) + ")";
}

// A step folder's name: "step-" and the step with at least 8 digits, exactly as
// checkpoint_step_dir writes it. Anything else is not one of ours.
std::optional<int64_t> step_of_folder(const std::string& name) {
  if (name.rfind("step-", 0) != 0 || name.size() < 13 || name.size() > 24) return std::nullopt;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  if (name != "step-" + padded(step, 8)) return std::nullopt;
  return step;
}

}  // namespace

std::string padded(int64_t value, int width) {
  std::string digits = std::to_string(value);
  return std::string(digits.size() < size_t(width) ? width - digits.size() : 0, '0') + digits;
}

std::string join(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out;
}

WriterShape shape_of(const StageRuntime& runtime) {
  const PipelineLayout& layout = runtime.layout();
  return {layout.stages,
          layout.replicas,
          layout.chunks,
          join(layout.layer_split),
          runtime.options().micro_batch,
          runtime.options().micro_batches};
}

void check_same_job(const WriterShape& writer, const std::string& source,
                    const StageRuntime& runtime) {
  const WriterShape job = shape_of(runtime);
  if (writer.stages != job.stages || writer.chunks != job.chunks ||
      writer.layer_split != job.layer_split) {
    throw CheckpointMismatch(source + ": written by a job of " + split_text(writer) +
                             "; this job has " + split_text(job) +
                             ": a checkpoint resumes only the same stages and layer split (the "
                             "number of replicas may differ)");
  }
  if (writer.global_batch() != job.global_batch()) {
    throw CheckpointMismatch(source + ": written with a global batch of " + batch_text(writer) +
                             "; this job's is " + batch_text(job) +
                             ": a checkpoint resumes only the same global batch");
  }
}

std::string old_format_message(const std::string& source) {
  return source + ": a checkpoint of format '" + kOldCheckpointFormat +
         "', written by an older tessel without checksums; this tessel resumes only from '" +
         kCheckpointFormat +
         "' checkpoints, whose every tensor is verified: start afresh (resume: false, or "
         "another checkpoint folder)";
}

std::string read_manifest_text(const std::string& path) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error) {
    throw CheckpointError(path + ": " +
                          (error == std::errc::no_such_file_or_directory
                               ? "missing"
                               : "cannot read: " + error.message()));
  }
  if (size > kMaxManifestBytes) {
    throw CheckpointError(path + ": " + std::to_string(size) + " bytes; a manifest has at most " +
                          std::to_string(kMaxManifestBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw CheckpointError(path + ": cannot read");
  return text.str();
}

// Every step folder of dir, ascending.
std::vector<int64_t> step_folders(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (!entry.is_directory()) continue;
    if (const auto step = step_of_folder(entry.path().filename().string())) {
      steps.push_back(*step);
    }
  }
  if (error) throw CheckpointError(dir + ": cannot list the checkpoint folder: " + error.message());
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string relative_rank_file(int64_t step, int rank) {
  return "step-" + padded(step, 8) + "/rank-" + padded(rank, 5) + ".safetensors";
}

uint32_t parse_crc(const nlohmann::json& value, const std::string& where) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text.size() == 8 && text.find_first_not_of("0123456789abcdef") == std::string::npos) {
      return static_cast<uint32_t>(std::stoul(text, nullptr, 16));
    }
  }
  throw CheckpointError(where + ": expected 8 lowercase hex digits, got " + value.dump());
}

// Parses and checks a manifest's every field; errors name `path` and the field.
Manifest parse_manifest(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    throw CheckpointError(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw CheckpointError(path + ": not a JSON object");
  const auto field = [&](const nlohmann::json& object, const std::string& key,
                         const std::string& where) -> const nlohmann::json& {
    if (!object.contains(key)) throw CheckpointError(path + ": " + where + key + ": missing");
    return object[key];
  };
  const auto integer = [&](const nlohmann::json& object, const std::string& key,
                           const std::string& where, int64_t max) {
    const nlohmann::json& v = field(object, key, where);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > max) {
      throw CheckpointError(path + ": " + where + key + ": expected an integer in [0, " +
                            std::to_string(max) + "], got " + v.dump());
    }
    return v.get<int64_t>();
  };
  const nlohmann::json& format = field(j, "format", "");
  // Not damage but a checkpoint this tessel cannot resume: refused, no older step tried.
  if (format == kOldCheckpointFormat) throw CheckpointMismatch(old_format_message(path));
  if (format != kCheckpointFormat) {
    throw CheckpointError(path + ": format " + format.dump() + ", expected '" + kCheckpointFormat +
                          "'");
  }
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  Manifest m;
  m.step = integer(j, "step", "", kInt64Max);
  m.data_position = integer(j, "data_position", "", kInt64Max);
  const nlohmann::json& seed = field(j, "seed", "");
  if (!seed.is_number_unsigned()) {
    throw CheckpointError(path + ": seed: expected an unsigned integer, got " + seed.dump());
  }
  m.seed = seed.get<uint64_t>();
  m.world_size = static_cast<int>(integer(j, "world_size", "", std::numeric_limits<int>::max()));
  if (j.contains("layout")) {
    const nlohmann::json& layout = j["layout"];
    if (!layout.is_object()) throw CheckpointError(path + ": layout: not an object");
    constexpr int64_t kIntMax = std::numeric_limits<int>::max();
    WriterShape w;
    w.stages = static_cast<int>(integer(layout, "stages", "layout.", kIntMax));
    w.replicas = static_cast<int>(integer(layout, "replicas", "layout.", kIntMax));
    w.chunks = static_cast<int>(integer(layout, "chunks", "layout.", kIntMax));
    const nlohmann::json& split = field(layout, "layer_split", "layout.");
    if (!split.is_array()) {
      throw CheckpointError(path + ": layout.layer_split: expected an array, got " + split.dump());
    }
    std::vector<int> layers;
    for (size_t i = 0; i < split.size(); ++i) {
      if (!split[i].is_number_integer() || split[i].get<int64_t>() < 1 ||
          split[i].get<int64_t>() > kIntMax) {
        throw CheckpointError(path + ": layout.layer_split[" + std::to_string(i) +
                              "]: expected a positive integer, got " + split[i].dump());
      }
      layers.push_back(split[i].get<int>());
    }
    w.layer_split = join(layers);
    w.micro_batch = static_cast<int>(integer(layout, "micro_batch", "layout.", kIntMax));
    w.micro_batches = static_cast<int>(integer(layout, "micro_batches", "layout.", kIntMax));
    m.layout = w;
  }
  const nlohmann::json& files = field(j, "files", "");
  if (!files.is_array() || files.size() != static_cast<size_t>(m.world_size)) {
    throw CheckpointError(path + ": files: expected one entry per rank (" +
                          std::to_string(m.world_size) + "), got " +
                          (files.is_array() ? std::to_string(files.size()) : files.dump()));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const nlohmann::json& f = files[i];
    const std::string where = "files[" + std::to_string(i) + "].";
    if (!f.is_object())
      throw CheckpointError(path + ": files[" + std::to_string(i) + "]: not an object");
    ManifestEntry e;
    e.rank = static_cast<int>(integer(f, "rank", where, std::numeric_limits<int>::max()));
    if (e.rank != static_cast<int>(i)) {
      throw CheckpointError(path + ": " + where + "rank: " + std::to_string(e.rank) +
                            ", expected " + std::to_string(i));
    }
    e.stage = static_cast<int>(integer(f, "stage", where, std::numeric_limits<int>::max()));
    e.replica = static_cast<int>(integer(f, "replica", where, std::numeric_limits<int>::max()));
    const nlohmann::json& file = field(f, "file", where);
    const std::string expected = relative_rank_file(m.step, e.rank);
    if (!file.is_string() || file.get<std::string>() != expected) {
      throw CheckpointError(path + ": " + where + "file: " + file.dump() + ", expected \"" +
                            expected + "\"");
    }
    e.file = expected;
    e.bytes = static_cast<uint64_t>(integer(f, "bytes", where, kInt64Max));
    e.crc = parse_crc(field(f, "crc32c", where), path + ": " + where + "crc32c");
    m.files.push_back(std::move(e));
  }
  return m;
}

std::string manifest_text(const StageRuntime& runtime, int64_t step,
                          const std::vector<std::pair<uint64_t, uint32_t>>& files) {
  const PipelineLayout& layout = runtime.layout();
  ordered_json manifest = {{"format", kCheckpointFormat},
                           {"step", step},
                           {"data_position", runtime.data_position()},
                           {"seed", runtime.options().seed},
                           {"world_size", files.size()},
                           {"layout", ordered_json::object()},
                           {"files", ordered_json::array()}};
  manifest["layout"] = {{"stages", layout.stages},
                        {"replicas", layout.replicas},
                        {"chunks", layout.chunks},
                        {"layer_split", layout.layer_split},
                        {"micro_batch", runtime.options().micro_batch},
                        {"micro_batches", runtime.options().micro_batches}};
  for (size_t rank = 0; rank < files.size(); ++rank) {
    const auto tasklet = layout.tasklet_of(static_cast<int>(rank));
    const auto [size, crc] = files[rank];
    manifest["files"].push_back({{"rank", rank},
                                 {"stage", tasklet.stage},
                                 {"replica", tasklet.replica},
                                 {"file", relative_rank_file(step, static_cast<int>(rank))},
                                 {"bytes", size},
                                 {"crc32c", crc_hex(crc)}});
  }
  return manifest.dump(2) + "\n";
}

std::string checkpoint_step_dir(const std::string& dir, int64_t step) {
  return (fs::path(dir) / ("step-" + padded(step, 8))).string();
}

std::string checkpoint_rank_file(const std::string& dir, int64_t step, int rank) {
  return (fs::path(checkpoint_step_dir(dir, step)) / ("rank-" + padded(rank, 5) + ".safetensors"))
      .string();
}

std::string checkpoint_manifest(const std::string& dir) {
  return (fs::path(dir) / kManifest).string();
}

std::string checkpoint_step_manifest(const std::string& dir, int64_t step) {
  return (fs::path(checkpoint_step_dir(dir, step)) / kManifest).string();
}

}  // namespace tessel::stage
