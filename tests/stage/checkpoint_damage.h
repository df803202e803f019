// Test helpers that damage a checkpoint (checkpoint.h) the ways a disk, a person or a buggy run
// can: a value overwritten in place, a rank file rewritten as a buggy run would have written it
// (every checksum matching), a manifest edited. Used by tests/stage and tests/launcher.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/safetensors.h"
#include "noderuntime/transport/crc32c.h"

namespace tessel::stage::testing {

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void write_all(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Overwrites element `index` of tensor `name` in the rank file at `path` in place, the header
// and every checksum left as they are (a flipped value on disk).
inline void overwrite_float(const std::string& path, const std::string& name, size_t index,
                            float value) {
  std::string bytes = read_all(path);
  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  const auto header = nlohmann::json::parse(bytes.substr(8, header_length));
  const uint64_t begin = header.at(name).at("data_offsets")[0].get<uint64_t>();
  std::memcpy(bytes.data() + 8 + header_length + begin + index * sizeof(float), &value,
              sizeof value);
  write_all(path, bytes);
}

// Sets the manifest entry of `rank` for step `step` (the step's manifest.json, and the top
// manifest.json when it names this step) to the rank file's size and CRC32C as it is now.
inline void match_manifests_to_rank_file(const std::string& dir, int64_t step, int rank) {
  const std::string bytes = read_all(checkpoint_rank_file(dir, step, rank));
  const uint32_t crc = transport::crc32c(std::as_bytes(std::span(bytes.data(), bytes.size())));
  const std::string step_manifest = checkpoint_step_manifest(dir, step);
  auto manifest = nlohmann::ordered_json::parse(read_all(step_manifest));
  manifest["files"][rank]["bytes"] = bytes.size();
  manifest["files"][rank]["crc32c"] = crc_hex(crc);
  const std::string text = manifest.dump(2) + "\n";
  const std::string top = checkpoint_manifest(dir);
  const bool top_names_it =
      std::filesystem::exists(top) && nlohmann::json::parse(read_all(top))["step"] == step;
  write_all(step_manifest, text);
  if (top_names_it) write_all(top, text);
}

// Rewrites a rank file as a buggy run would have: its checksums sealed over `file`, and the
// manifests updated to it, so only what `file` holds can be wrong.
inline void forge_rank_file(const std::string& dir, int64_t step, int rank, SafetensorsFile file) {
  seal_checkpoint_metadata(file);
  write_safetensors(checkpoint_rank_file(dir, step, rank), file);
  match_manifests_to_rank_file(dir, step, rank);
}

// Every file under dir by its relative path, with its contents: a snapshot to compare.
inline std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    files[std::filesystem::relative(entry.path(), dir).string()] = read_all(entry.path().string());
  }
  return files;
}

}  // namespace tessel::stage::testing
