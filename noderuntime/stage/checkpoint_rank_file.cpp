#include "noderuntime/stage/checkpoint_rank_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "noderuntime/stage/checkpoint_manifest.h"
#include "noderuntime/stage/checkpoint_outer_state.h"
#include "noderuntime/transport/crc32c.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTensorCrcPrefix = "crc32c:";
constexpr const char* kMetadataCrc = "metadata_crc32c";
// The safetensors header's limit (safetensors.cpp) plus its 8-byte length.
constexpr uint64_t kMaxHeaderBytes = 100'000'000 + 8;
// Floats a parameter has in a rank file at most: itself, its AdamW moments, and in the
// low-communication mode theta_start, the outer momentum, the residual and a pending mean delta.
constexpr uint64_t kMaxFloatsPerParameter = 7;

std::string model_text(const GptConfig& c) {
  return "layers=" + std::to_string(c.layers) + " hidden=" + std::to_string(c.channels) +
         " heads=" + std::to_string(c.heads) + " ffn=" + std::to_string(c.ffn) +
         " seq_len=" + std::to_string(c.seq_len) + " vocab=" + std::to_string(c.vocab);
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

// Checks the file's checksums and the fields the manifest repeats; errors name path and the
// tensor or entry.
void verify_rank_file(const SafetensorsFile& file, uint32_t file_crc, const StateFacts& facts,
                      const std::string& path, const std::string& manifest_path) {
  const std::string format = metadata_value(file, "format", path);
  if (format == kOldCheckpointFormat) throw CheckpointError(old_format_message(path));
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

}  // namespace

std::string rank_label(const StageRuntime& runtime) {
  return "rank " + std::to_string(runtime.rank()) + " (stage " + std::to_string(runtime.stage()) +
         " replica " + std::to_string(runtime.replica()) + ")";
}

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

SafetensorsFile rank_file_of(StageRuntime& runtime, const std::string& where) {
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
  SafetensorsFile file;
  file.metadata = identity(runtime);
  file.metadata["step"] = std::to_string(runtime.steps_done());
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
  add_outer_state(runtime, file, where);
  seal_checkpoint_metadata(file);
  return file;
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
  state.outer = read_outer_state(file, path, facts, writer, runtime, expected_names);
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

void apply_state(VerifiedState state, StageRuntime& runtime) {
  std::vector<HostState> hosts;
  for (auto& chunk : runtime.chunks()) hosts.push_back(chunk->model.state_for_writing());
  for (const VerifiedState::Copy& c : state.copies) {
    const HostState& host = hosts[c.chunk];
    float* const parts[] = {host.params, host.m, host.v};
    std::copy(c.values.begin(), c.values.end(), parts[c.part] + c.offset);
  }
  for (auto& chunk : runtime.chunks()) chunk->model.state_written();
  runtime.set_position(state.step, state.data_position);
  if (state.outer) restore_outer_state(runtime, std::move(*state.outer));
}

uint64_t max_state_bytes(const StageRuntime& runtime) {
  uint64_t tensor_bytes = 0;
  for (const auto& chunk : runtime.chunks()) {
    tensor_bytes += kMaxFloatsPerParameter * sizeof(float) *
                    static_cast<uint64_t>(chunk->model.layout().total());
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

}  // namespace tessel::stage
