#include "noderuntime/stage/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <sstream>

#include "noderuntime/transport/crc32c.h"
#include "placement/atomic_file.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr const char* kOldFormat = "tessel-stage-checkpoint-1";
constexpr const char* kManifest = "manifest.json";
constexpr const char* kTensorCrcPrefix = "crc32c:";
constexpr const char* kMetadataCrc = "metadata_crc32c";
// A manifest is a few hundred bytes a rank; anything this large is not one.
constexpr uintmax_t kMaxManifestBytes = 64u << 20;
// The safetensors header's limit (safetensors.cpp) plus its 8-byte length.
constexpr uint64_t kMaxHeaderBytes = 100'000'000 + 8;

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

std::string rank_label(const StageRuntime& runtime) {
  return "rank " + std::to_string(runtime.rank()) + " (stage " + std::to_string(runtime.stage()) +
         " replica " + std::to_string(runtime.replica()) + ")";
}

// What a rank file says about the rank that wrote it: loading requires the same format and
// stage (check_same_job the rest); replica, replicas, micro_batch and micro_batches say what
// wrote it (a job of another width may resume from it).
std::map<std::string, std::string> identity(const StageRuntime& runtime) {
  const PipelineLayout& layout = runtime.layout();
  return {{"format", kCheckpointFormat},
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

// What wrote a checkpoint, as far as resuming depends on it.
struct WriterShape {
  int stages = 0;
  int replicas = 0;
  int chunks = 0;
  std::string layer_split;  // "2,2"
  int micro_batch = 0;
  int micro_batches = 0;
  int64_t global_batch() const { return int64_t{replicas} * micro_batches * micro_batch; }
};

WriterShape shape_of(const StageRuntime& runtime) {
  const PipelineLayout& layout = runtime.layout();
  return {layout.stages,
          layout.replicas,
          layout.chunks,
          join(layout.layer_split),
          runtime.options().micro_batch,
          runtime.options().micro_batches};
}

std::string split_text(const WriterShape& w) {
  return std::to_string(w.stages) + " stages x " + std::to_string(w.chunks) +
         " chunks, layer split " + w.layer_split;
}

std::string batch_text(const WriterShape& w) {
  return std::to_string(w.global_batch()) + " sequences (" + std::to_string(w.replicas) +
         " replicas x " + std::to_string(w.micro_batches) + " micro-batches of " +
         std::to_string(w.micro_batch) + ")";
}

// A checkpoint resumes a job of the same stages, chunks and layer split, and the same global
// batch (its data position counts global sequences); the number of replicas may differ.
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
  return source + ": a checkpoint of format '" + kOldFormat +
         "', written by an older tessel without checksums; this tessel resumes only from '" +
         kCheckpointFormat +
         "' checkpoints, whose every tensor is verified: start afresh (resume: false, or "
         "another checkpoint folder)";
}

// The first element of values that is not finite, if any.
std::optional<size_t> first_non_finite(std::span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return std::nullopt;
}

std::string value_text(float value) {
  if (std::isnan(value)) return "nan";
  return value > 0 ? "inf" : "-inf";
}

std::string read_text(const std::string& path, const std::string& missing_hint) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error) {
    throw CheckpointError(path + ": " +
                          (error == std::errc::no_such_file_or_directory
                               ? "missing" + missing_hint
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

struct ManifestEntry {
  int rank = 0;
  int stage = 0;
  int replica = 0;
  std::string file;
  uint64_t bytes = 0;
  uint32_t crc = 0;
};

struct Manifest {
  int64_t step = 0;
  int64_t data_position = 0;
  uint64_t seed = 0;
  int world_size = 0;                 // of the job that wrote it
  std::optional<WriterShape> layout;  // absent in manifests written before it was added
  std::vector<ManifestEntry> files;

  StateFacts facts(const ManifestEntry& entry) const {
    return {step, data_position, seed, entry.bytes, entry.crc, entry.stage, entry.replica};
  }
};

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
  if (format == kOldFormat) throw CheckpointMismatch(old_format_message(path));
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

// A rank's file in 16-bit pieces, exact as floats: size (4 pieces) and CRC32C (2 pieces).
constexpr int kPiecesPerRank = 6;

void put_pieces(float* out, uint64_t bytes, uint32_t crc) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<float>((bytes >> (16 * i)) & 0xFFFF);
  out[4] = static_cast<float>(crc & 0xFFFF);
  out[5] = static_cast<float>(crc >> 16);
}

std::pair<uint64_t, uint32_t> get_pieces(const float* in) {
  uint64_t bytes = 0;
  for (int i = 0; i < 4; ++i) bytes |= static_cast<uint64_t>(in[i]) << (16 * i);
  const uint32_t crc = static_cast<uint32_t>(in[4]) | static_cast<uint32_t>(in[5]) << 16;
  return {bytes, crc};
}

std::vector<std::byte> read_rank_file(const std::string& path, uint64_t expected_bytes,
                                      const std::string& manifest_path, uint64_t max_bytes) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error) {
    throw CheckpointError(path + ": " +
                          (error == std::errc::no_such_file_or_directory
                               ? "missing (" + manifest_path + " lists it)"
                               : "cannot read: " + error.message()));
  }
  if (size != expected_bytes) {
    throw CheckpointError(path + ": " + std::to_string(size) + " bytes, " + manifest_path +
                          " says " + std::to_string(expected_bytes) +
                          " (truncated, extended or replaced after it was written)");
  }
  if (size > max_bytes) {
    throw CheckpointError(path + ": " + std::to_string(size) +
                          " bytes, more than this rank's tensors and the largest safetensors "
                          "header can take (" +
                          std::to_string(max_bytes) + ")");
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<std::byte> bytes(size);
  if (size > 0) in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (!in) throw CheckpointError(path + ": cannot read its " + std::to_string(size) + " bytes");
  return bytes;
}

std::string metadata_value(const SafetensorsFile& file, const std::string& key,
                           const std::string& path) {
  const auto it = file.metadata.find(key);
  if (it == file.metadata.end()) throw CheckpointError(path + ": metadata '" + key + "' missing");
  return it->second;
}

// Checks the file's checksums and the fields the manifest repeats; errors name path and the
// tensor or entry.
void verify_rank_file(const SafetensorsFile& file, uint32_t file_crc, const StateFacts& facts,
                      const std::string& path, const std::string& manifest_path) {
  const std::string format = metadata_value(file, "format", path);
  if (format == kOldFormat) throw CheckpointError(old_format_message(path));
  if (format != kCheckpointFormat) {
    throw CheckpointError(path + ": metadata 'format' is '" + format + "', expected '" +
                          kCheckpointFormat + "'");
  }
  const std::pair<const char*, std::string> repeated[] = {
      {"step", std::to_string(facts.step)},
      {"data_position", std::to_string(facts.data_position)},
      {"seed", std::to_string(facts.seed)}};
  for (const auto& [key, expected] : repeated) {
    const std::string value = metadata_value(file, key, path);
    if (value != expected) {
      throw CheckpointError(path + ": metadata '" + key + "' is '" + value + "', " + manifest_path +
                            " says '" + expected + "'");
    }
  }
  const uint32_t stored = parse_crc(metadata_value(file, kMetadataCrc, path),
                                    path + ": metadata '" + kMetadataCrc + "'");
  const uint32_t computed = metadata_digest(file.metadata);
  if (stored != computed) {
    throw CheckpointError(path + ": metadata checksum mismatch (" + kMetadataCrc + " " +
                          crc_hex(stored) + ", the metadata hashes to " + crc_hex(computed) +
                          "): an entry (step, data_position, seed, identity or a tensor "
                          "checksum) was changed after the file was written");
  }
  for (const auto& [name, tensor] : file.tensors) {
    const std::string key = kTensorCrcPrefix + name;
    const auto it = file.metadata.find(key);
    if (it == file.metadata.end()) {
      throw CheckpointError(path + ": tensor '" + name + "': no checksum (metadata '" + key +
                            "' missing)");
    }
    const uint32_t expected = parse_crc(it->second, path + ": metadata '" + key + "'");
    const uint32_t actual = transport::crc32c(tensor.data);
    if (actual != expected) {
      throw CheckpointError(path + ": tensor '" + name + "': checksum mismatch (stored crc32c " +
                            crc_hex(expected) + ", its bytes hash to " + crc_hex(actual) +
                            "): its data changed after it was written");
    }
  }
  for (const auto& [key, value] : file.metadata) {
    if (key.rfind(kTensorCrcPrefix, 0) == 0 &&
        !file.tensors.count(key.substr(std::strlen(kTensorCrcPrefix)))) {
      throw CheckpointError(path + ": metadata '" + key + "' has no tensor '" +
                            key.substr(std::strlen(kTensorCrcPrefix)) + "'");
    }
  }
  if (file_crc != facts.crc32c) {
    throw CheckpointError(path + ": checksum mismatch with " + manifest_path + " (crc32c " +
                          crc_hex(file_crc) + ", the manifest says " + crc_hex(facts.crc32c) +
                          "): the file changed after it was written");
  }
}

int metadata_int(const SafetensorsFile& file, const std::string& key, const std::string& path) {
  const std::string value = metadata_value(file, key, path);
  if (value.empty() || value.size() > 9 ||
      value.find_first_not_of("0123456789") != std::string::npos) {
    throw CheckpointError(path + ": metadata '" + key + "' is '" + value +
                          "', expected a non-negative integer");
  }
  return std::stoi(value);
}

// A rank file's values, every check passed, and where each goes in the runtime.
struct VerifiedState {
  struct Copy {
    size_t chunk = 0;
    int64_t offset = 0;
    int part = 0;  // 0 parameters, 1 first moment, 2 second moment
    std::vector<float> values;
  };
  std::vector<Copy> copies;
  int64_t step = 0;
  int64_t data_position = 0;
};

// Every check load_checkpoint makes of one rank file's bytes; reads nothing into the runtime.
VerifiedState verified_state(const std::vector<std::byte>& bytes, const StateFacts& facts,
                             const std::string& path, const std::string& manifest_path,
                             const StageRuntime& runtime) {
  const uint32_t file_crc = transport::crc32c(bytes);
  const SafetensorsFile file = decode_safetensors(bytes, path);
  verify_rank_file(file, file_crc, facts, path, manifest_path);
  const std::map<std::string, std::string> ours = identity(runtime);
  const std::string model = metadata_value(file, "model", path);
  if (model != ours.at("model")) {
    throw CheckpointMismatch(path + ": metadata 'model' is '" + model + "', this job's is '" +
                             ours.at("model") + "'");
  }
  WriterShape writer;
  writer.stages = metadata_int(file, "stages", path);
  writer.replicas = metadata_int(file, "replicas", path);
  writer.chunks = metadata_int(file, "chunks", path);
  writer.layer_split = metadata_value(file, "layer_split", path);
  writer.micro_batch = metadata_int(file, "micro_batch", path);
  writer.micro_batches = metadata_int(file, "micro_batches", path);
  check_same_job(writer, path, runtime);
  const std::string stage = metadata_value(file, "stage", path);
  if (stage != ours.at("stage")) {
    throw CheckpointError(path + ": metadata 'stage' is '" + stage + "', this rank has '" +
                          ours.at("stage") + "'");
  }
  // The replica the manifest lists the file as (this rank's own, or a peer's of its stage).
  const std::string replica = metadata_value(file, "replica", path);
  if (replica != std::to_string(facts.replica)) {
    throw CheckpointError(path + ": metadata 'replica' is '" + replica + "', " +
                          (facts.replica == runtime.replica() && facts.stage == runtime.stage()
                               ? "this rank has '"
                               : manifest_path + " lists it as '") +
                          std::to_string(facts.replica) + "'");
  }
  VerifiedState state;
  state.step = facts.step;
  state.data_position = facts.data_position;
  std::set<std::string> expected_names;
  for (size_t c = 0; c < runtime.chunks().size(); ++c) {
    for (const ParameterTensor& t : runtime.chunks()[c]->model.layout().tensors()) {
      const std::string names[] = {t.name, t.name + ".adam_m", t.name + ".adam_v"};
      for (int part = 0; part < 3; ++part) {
        const std::string& name = names[part];
        std::vector<float> values = file.f32(name, t.shape, path);
        if (const auto bad = first_non_finite(values)) {
          throw CheckpointError(path + ": tensor '" + name + "' holds " + value_text(values[*bad]) +
                                " at element " + std::to_string(*bad) +
                                " (its checksum matches: the run that wrote it had this state); "
                                "not resuming from a state that is not finite");
        }
        state.copies.push_back({c, t.offset, part, std::move(values)});
        expected_names.insert(name);
      }
    }
  }
  for (const auto& [name, tensor] : file.tensors) {
    if (!expected_names.count(name)) {
      throw CheckpointError(path + ": tensor '" + name + "' does not belong to stage " +
                            std::to_string(runtime.stage()));
    }
  }
  return state;
}

void apply_state(const VerifiedState& state, StageRuntime& runtime) {
  std::vector<HostState> hosts;
  for (auto& chunk : runtime.chunks()) hosts.push_back(chunk->model.state_for_writing());
  for (const VerifiedState::Copy& c : state.copies) {
    const HostState& host = hosts[c.chunk];
    float* const parts[] = {host.params, host.m, host.v};
    std::copy(c.values.begin(), c.values.end(), parts[c.part] + c.offset);
  }
  for (auto& chunk : runtime.chunks()) chunk->model.state_written();
  runtime.set_position(state.step, state.data_position);
}

}  // namespace

uint64_t max_state_bytes(const StageRuntime& runtime) {
  uint64_t tensor_bytes = 0;
  for (const auto& chunk : runtime.chunks()) {
    tensor_bytes += 3 * sizeof(float) * static_cast<uint64_t>(chunk->model.layout().total());
  }
  return tensor_bytes + kMaxHeaderBytes;
}

std::string crc_hex(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

uint32_t metadata_digest(const std::map<std::string, std::string>& metadata) {
  uint32_t crc = 0;
  const auto add = [&](const std::string& text) {
    const std::string prefix = std::to_string(text.size()) + ":";
    crc = transport::crc32c_extend(crc, std::as_bytes(std::span(prefix.data(), prefix.size())));
    crc = transport::crc32c_extend(crc, std::as_bytes(std::span(text.data(), text.size())));
  };
  for (const auto& [key, value] : metadata) {
    if (key == kMetadataCrc) continue;
    add(key);
    add(value);
  }
  return crc;
}

void seal_checkpoint_metadata(SafetensorsFile& file) {
  for (auto it = file.metadata.begin(); it != file.metadata.end();) {
    it = it->first.rfind(kTensorCrcPrefix, 0) == 0 ? file.metadata.erase(it) : std::next(it);
  }
  for (const auto& [name, tensor] : file.tensors) {
    file.metadata[kTensorCrcPrefix + name] = crc_hex(transport::crc32c(tensor.data));
  }
  file.metadata[kMetadataCrc] = crc_hex(metadata_digest(file.metadata));
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

void save_checkpoint(const std::string& dir, const StageRuntime& runtime,
                     transport::Communicator& comm, const CheckpointPruning& pruning,
                     CheckpointDirs dirs) {
  const int64_t step = runtime.steps_done();
  const std::string where = "checkpoint step " + std::to_string(step) + ": ";
  if (pruning.keep < 1) {
    throw CheckpointError(where + "keep is " + std::to_string(pruning.keep) +
                          ", at least 1 checkpoint must be kept");
  }
  // A diverged state is not saved: it would become the step every resume starts from.
  std::vector<ConstHostState> states;  // in host memory, whichever device trains the chunk
  for (const auto& chunk : runtime.chunks()) {
    const ConstHostState state = chunk->model.state_for_reading();
    states.push_back(state);
    for (const ParameterTensor& t : chunk->model.layout().tensors()) {
      const std::pair<std::string, const float*> parts[] = {
          {t.name, state.params}, {t.name + ".adam_m", state.m}, {t.name + ".adam_v", state.v}};
      for (const auto& [name, values] : parts) {
        const std::span<const float> span(values + t.offset, static_cast<size_t>(t.size));
        if (const auto bad = first_non_finite(span)) {
          throw CheckpointError(where + rank_label(runtime) + ": tensor '" + name + "' holds " +
                                value_text(span[*bad]) + " at element " + std::to_string(*bad) +
                                ": this rank's state is not finite; not saving it");
        }
      }
    }
  }
  const std::string step_dir = checkpoint_step_dir(dir, step);
  std::error_code error;
  fs::create_directories(step_dir, error);
  if (error) {
    throw CheckpointError(where + step_dir + ": cannot create the folder: " + error.message());
  }
  SafetensorsFile file;
  file.metadata = identity(runtime);
  file.metadata["step"] = std::to_string(step);
  file.metadata["data_position"] = std::to_string(runtime.data_position());
  file.metadata["seed"] = std::to_string(runtime.options().seed);
  file.metadata["rng"] =
      "no random stream advances during training: initialisation is counter-based from the "
      "seed, the data order follows from data_position";
  for (size_t c = 0; c < runtime.chunks().size(); ++c) {
    const ConstHostState& state = states[c];
    for (const ParameterTensor& t : runtime.chunks()[c]->model.layout().tensors()) {
      file.add_f32(t.name, t.shape, state.params + t.offset);
      file.add_f32(t.name + ".adam_m", t.shape, state.m + t.offset);
      file.add_f32(t.name + ".adam_v", t.shape, state.v + t.offset);
    }
  }
  seal_checkpoint_metadata(file);
  const std::vector<std::byte> bytes = encode_safetensors(file);
  const std::string path = checkpoint_rank_file(dir, step, comm.rank());
  try {
    placement::write_file_atomically(path, [&](std::ostream& out) {
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    });
  } catch (const placement::FileWriteError& e) {
    throw CheckpointError(where + e.what());
  }

  // Every rank's file size and checksum to every rank; once it returns, every file is in place.
  const std::vector<int> world = runtime.layout().world();
  std::vector<float> pieces(world.size() * kPiecesPerRank, 0.0f);
  put_pieces(&pieces[static_cast<size_t>(comm.rank()) * kPiecesPerRank], bytes.size(),
             transport::crc32c(bytes));
  comm.all_reduce(pieces.data(), pieces.size(), transport::DType::kF32, world);
  if (dirs == CheckpointDirs::kShared && comm.rank() != 0) return;

  ordered_json manifest = {{"format", kCheckpointFormat},
                           {"step", step},
                           {"data_position", runtime.data_position()},
                           {"seed", runtime.options().seed},
                           {"world_size", comm.size()},
                           {"layout", ordered_json::object()},
                           {"files", ordered_json::array()}};
  const PipelineLayout& layout = runtime.layout();
  manifest["layout"] = {{"stages", layout.stages},
                        {"replicas", layout.replicas},
                        {"chunks", layout.chunks},
                        {"layer_split", layout.layer_split},
                        {"micro_batch", runtime.options().micro_batch},
                        {"micro_batches", runtime.options().micro_batches}};
  for (int rank = 0; rank < comm.size(); ++rank) {
    const auto tasklet = layout.tasklet_of(rank);
    const auto [size, crc] = get_pieces(&pieces[static_cast<size_t>(rank) * kPiecesPerRank]);
    manifest["files"].push_back({{"rank", rank},
                                 {"stage", tasklet.stage},
                                 {"replica", tasklet.replica},
                                 {"file", relative_rank_file(step, rank)},
                                 {"bytes", size},
                                 {"crc32c", crc_hex(crc)}});
  }
  const std::string text = manifest.dump(2) + "\n";
  try {
    placement::write_file_atomically(checkpoint_step_manifest(dir, step), text);
    placement::write_file_atomically(checkpoint_manifest(dir), text);
  } catch (const placement::FileWriteError& e) {
    throw CheckpointError(where + e.what());
  }
  prune_checkpoints(dir, step, pruning);
}

void prune_checkpoints(const std::string& dir, int64_t current, const CheckpointPruning& pruning) {
  if (pruning.keep < 1) {
    throw CheckpointError(dir + ": keep is " + std::to_string(pruning.keep) +
                          ", at least 1 checkpoint must be kept");
  }
  std::vector<int64_t> older;  // ascending
  for (int64_t step : step_folders(dir)) {
    if (step < current) older.push_back(step);
  }
  const size_t keep_older = static_cast<size_t>(pruning.keep - 1);
  if (older.size() <= keep_older) return;
  older.resize(older.size() - keep_older);  // the oldest go, but never the protected step
  std::erase(older, pruning.protect.value_or(-1));
  for (int64_t step : older) {
    const std::string folder = checkpoint_step_dir(dir, step);
    std::error_code error;
    fs::remove_all(folder, error);
    // Another rank pruning the same folder at once (per-rank dirs that are in fact one folder)
    // makes entries vanish under remove_all: that one removes them, which is no failure.
    if (error && error != std::errc::no_such_file_or_directory) {
      throw CheckpointError(folder + ": cannot remove an old checkpoint: " + error.message());
    }
  }
}

namespace {

// A committed step of a checkpoint dir whose manifests check out (rank files not yet read).
struct CommittedStep {
  int64_t step = 0;
  std::string manifest_path;  // the step's manifest.json
  Manifest manifest;
};

// The committed steps of `dir`, newest first: a step folder with a manifest.json that parses and
// names the step, committed by <dir>/manifest.json (which names it, byte-identical, or a newer
// step; when <dir>/manifest.json is missing or unreadable, every step but the newest complete
// one). Every step left out goes to `skip` with the fault. `found_any` (when given) says whether
// dir held any checkpoint at all. Throws CheckpointMismatch for a checkpoint of an older format,
// CheckpointError when dir is not a folder or cannot be listed.
std::vector<CommittedStep> committed_steps(
    const std::string& dir, const std::function<void(int64_t, const std::string&)>& skip,
    bool* found_any) {
  std::vector<CommittedStep> usable;
  std::error_code error;
  if (!fs::exists(dir, error)) return usable;
  if (!fs::is_directory(dir, error)) {
    throw CheckpointError(dir + ": the checkpoint folder is not a folder");
  }
  bool found = false;
  const std::vector<int64_t> steps = step_folders(dir);  // ascending
  // <dir>/manifest.json commits a step: the one it names and the older ones are complete.
  const std::string top = checkpoint_manifest(dir);
  std::optional<int64_t> committed;
  std::string top_text;
  std::string top_fault;
  if (fs::exists(top, error)) {
    found = true;
    try {
      top_text = read_text(top, "");
      committed = parse_manifest(top_text, top).step;
    } catch (const CheckpointMismatch&) {
      throw;
    } catch (const CheckpointError& e) {
      top_fault = e.what();
    }
  } else {
    top_fault = top + ": missing";
  }
  std::optional<int64_t> newest_complete;
  for (int64_t step : steps) {
    found = true;
    if (fs::exists(checkpoint_step_manifest(dir, step), error)) newest_complete = step;
  }
  if (found_any) *found_any = found;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const int64_t step = *it;
    const std::string manifest_path = checkpoint_step_manifest(dir, step);
    if (!fs::exists(manifest_path, error)) {
      skip(step, manifest_path + ": missing: a save that did not finish (a half-written folder)");
      continue;
    }
    if (committed && step > *committed) {
      skip(step, top + " names step " + std::to_string(*committed) +
                     ": this newer step's save did not finish in this folder");
      continue;
    }
    if (!committed && step == newest_complete) {
      // An old checkpoint has no <dir>/manifest.json at all: its format is what to say.
      try {
        parse_manifest(read_text(manifest_path, ""), manifest_path);
      } catch (const CheckpointMismatch&) {
        throw;
      } catch (const CheckpointError&) {
      }
      skip(step, top_fault + "; it commits the newest step, which is therefore not used");
      continue;
    }
    std::string text;
    Manifest manifest;
    try {
      text = read_text(manifest_path, "");
      manifest = parse_manifest(text, manifest_path);
    } catch (const CheckpointMismatch&) {
      throw;
    } catch (const CheckpointError& e) {
      skip(step, e.what());
      continue;
    }
    if (manifest.step != step) {
      skip(step, manifest_path + ": step " + std::to_string(manifest.step) + ", expected " +
                     std::to_string(step));
      continue;
    }
    if (committed && step == *committed && text != top_text) {
      skip(step, manifest_path + ": differs from " + top +
                     ", which names this step as the current checkpoint: one was edited");
      continue;
    }
    usable.push_back({step, manifest_path, std::move(manifest)});
  }
  return usable;
}

}  // namespace

std::optional<int64_t> latest_checkpoint(const std::string& dir) {
  // The steps skipped are said when a resume takes the inventory.
  const std::vector<CommittedStep> steps = committed_steps(
      dir, [](int64_t, const std::string&) {}, nullptr);
  if (steps.empty()) return std::nullopt;
  return steps.front().step;
}

void load_state(const std::vector<std::byte>& bytes, const StateFacts& facts,
                const std::string& source, const std::string& facts_source, StageRuntime& runtime) {
  apply_state(verified_state(bytes, facts, source, facts_source, runtime), runtime);
}

std::vector<std::byte> read_stored_state(const StoredState& state, const StageRuntime& runtime) {
  std::vector<std::byte> bytes =
      read_rank_file(state.path, state.facts.bytes, state.manifest_path, max_state_bytes(runtime));
  verified_state(bytes, state.facts, state.path, state.manifest_path, runtime);
  return bytes;
}

void load_checkpoint(const std::string& dir, int64_t step, StageRuntime& runtime) {
  const std::string manifest_path = checkpoint_step_manifest(dir, step);
  const Manifest manifest = parse_manifest(read_text(manifest_path, ""), manifest_path);
  if (manifest.step != step) {
    throw CheckpointError(manifest_path + ": step " + std::to_string(manifest.step) +
                          ", expected " + std::to_string(step));
  }
  if (manifest.layout) check_same_job(*manifest.layout, manifest_path, runtime);
  // This rank's own file when the manifest lists it for this stage, else the stage's first
  // replica's (another width: every replica of a stage holds the same state).
  const ManifestEntry* entry = nullptr;
  const size_t own = static_cast<size_t>(runtime.rank());
  if (own < manifest.files.size() && manifest.files[own].stage == runtime.stage()) {
    entry = &manifest.files[own];
  } else {
    for (const ManifestEntry& e : manifest.files) {
      if (e.stage == runtime.stage() && (!entry || e.replica < entry->replica)) entry = &e;
    }
  }
  if (!entry) {
    if (own < manifest.files.size()) {  // the message of a file of another stage, as before
      const ManifestEntry& e = manifest.files[own];
      throw CheckpointError(manifest_path + ": rank " + std::to_string(e.rank) + " is stage " +
                            std::to_string(e.stage) + " replica " + std::to_string(e.replica) +
                            ", this job's is stage " + std::to_string(runtime.stage()) +
                            " replica " + std::to_string(runtime.replica()) +
                            ", and no rank of it is of stage " + std::to_string(runtime.stage()));
    }
    throw CheckpointError(manifest_path + ": lists no file of stage " +
                          std::to_string(runtime.stage()));
  }
  const std::string path = checkpoint_rank_file(dir, step, entry->rank);
  const std::vector<std::byte> bytes =
      read_rank_file(path, entry->bytes, manifest_path, max_state_bytes(runtime));
  load_state(bytes, manifest.facts(*entry), path, manifest_path, runtime);
}

StateInventory inventory_states(const std::string& dir, const StageRuntime& runtime,
                                std::ostream& err, const std::string& who, CheckpointDirs dirs) {
  StateInventory inventory;
  const auto skip = [&](int64_t step, const std::string& why) {
    err << who << ": resume: skipping step " << step << ": " << why << '\n';
  };
  std::error_code error;
  for (const CommittedStep& committed : committed_steps(dir, skip, &inventory.found_any)) {
    const int64_t step = committed.step;
    const Manifest& manifest = committed.manifest;
    if (manifest.layout) check_same_job(*manifest.layout, committed.manifest_path, runtime);
    // The stage's files that are in this folder: this rank's own first.
    std::vector<const ManifestEntry*> candidates;
    for (const ManifestEntry& e : manifest.files) {
      if (e.stage != runtime.stage()) continue;
      const std::string path = checkpoint_rank_file(dir, step, e.rank);
      if (!fs::exists(path, error)) {
        // A per-rank dir holds only the files its ranks wrote; a shared one should hold all.
        if (dirs == CheckpointDirs::kShared && e.rank == runtime.rank()) {
          skip(step, path + ": missing (" + committed.manifest_path + " lists it)");
        }
        continue;
      }
      if (e.rank == runtime.rank()) {
        candidates.insert(candidates.begin(), &e);
      } else {
        candidates.push_back(&e);
      }
    }
    if (candidates.empty()) {
      skip(step, committed.manifest_path + ": none of the files it lists for stage " +
                     std::to_string(runtime.stage()) + " is in " + dir);
      continue;
    }
    for (const ManifestEntry* entry : candidates) {
      StoredState state{step, checkpoint_rank_file(dir, step, entry->rank), committed.manifest_path,
                        manifest.facts(*entry)};
      try {
        read_stored_state(state, runtime);
      } catch (const CheckpointMismatch&) {
        throw;
      } catch (const SafetensorsError& e) {  // CheckpointErrors, and a file that does not decode
        skip(step, e.what());
        continue;
      }
      inventory.usable.push_back(std::move(state));
      break;
    }
  }
  return inventory;
}

}  // namespace tessel::stage
