#include "noderuntime/stage/safetensors.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "placement/atomic_file.h"

namespace tessel::stage {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this code copies floats as they are");

constexpr size_t kLengthBytes = 8;
constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Elements of a shape; throws on a negative dim or an overflow.
uint64_t element_count(const std::vector<int64_t>& shape, const std::string& where) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw SafetensorsError(where + ": negative dimension in shape " + shape_text(shape));
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d)) {
      throw SafetensorsError(where + ": shape " + shape_text(shape) + " overflows");
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

}  // namespace

size_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  const auto it = sizes.find(dtype);
  if (it == sizes.end()) throw SafetensorsError("unknown dtype '" + dtype + "'");
  return it->second;
}

void SafetensorsFile::add_f32(const std::string& name, std::vector<int64_t> shape,
                              const float* values) {
  StoredTensor t;
  t.dtype = "F32";
  const uint64_t n = element_count(shape, "tensor '" + name + "'");
  t.shape = std::move(shape);
  t.data.resize(n * sizeof(float));
  if (n > 0) std::memcpy(t.data.data(), values, t.data.size());
  tensors[name] = std::move(t);
}

std::vector<float> SafetensorsFile::f32(const std::string& name, const std::vector<int64_t>& shape,
                                        const std::string& source) const {
  const auto it = tensors.find(name);
  const std::string where = source + ": tensor '" + name + "'";
  if (it == tensors.end()) throw SafetensorsError(where + ": missing");
  if (it->second.dtype != "F32") {
    throw SafetensorsError(where + ": dtype " + it->second.dtype + ", expected F32");
  }
  if (it->second.shape != shape) {
    throw SafetensorsError(where + ": shape " + shape_text(it->second.shape) + ", expected " +
                           shape_text(shape));
  }
  std::vector<float> values(it->second.data.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), it->second.data.data(), it->second.data.size());
  return values;
}

std::vector<std::byte> encode_safetensors(const SafetensorsFile& file) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    const std::string where = "tensor '" + name + "'";
    if (name == "__metadata__") throw SafetensorsError(where + ": reserved name");
    const uint64_t expected = element_count(t.shape, where) * dtype_bytes(t.dtype);
    if (t.data.size() != expected) {
      throw SafetensorsError(where + ": " + std::to_string(t.data.size()) + " bytes, " + t.dtype +
                             " " + shape_text(t.shape) + " needs " + std::to_string(expected));
    }
    header[name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + expected}}};
    offset += expected;
  }
  std::string text = header.dump();
  text.append((kLengthBytes - text.size() % kLengthBytes) % kLengthBytes, ' ');
  std::vector<std::byte> out(kLengthBytes + text.size() + offset);
  const uint64_t length = text.size();
  for (size_t i = 0; i < kLengthBytes; ++i) out[i] = std::byte((length >> (8 * i)) & 0xFF);
  std::memcpy(out.data() + kLengthBytes, text.data(), text.size());
  std::byte* data = out.data() + kLengthBytes + text.size();
  for (const auto& [name, t] : file.tensors) {
    if (!t.data.empty()) std::memcpy(data, t.data.data(), t.data.size());
    data += t.data.size();
  }
  return out;
}

SafetensorsFile decode_safetensors(const std::vector<std::byte>& bytes, const std::string& source) {
  auto fail = [&](const std::string& why) -> void { throw SafetensorsError(source + ": " + why); };
  if (bytes.size() < kLengthBytes) fail("shorter than the 8-byte header length");
  uint64_t length = 0;
  for (size_t i = 0; i < kLengthBytes; ++i) length |= uint64_t(bytes[i]) << (8 * i);
  if (length > kMaxHeaderBytes || length > bytes.size() - kLengthBytes) {
    fail("header length " + std::to_string(length) + " exceeds the file (" +
         std::to_string(bytes.size()) + " bytes)");
  }
  const char* text = reinterpret_cast<const char*>(bytes.data() + kLengthBytes);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, text + length);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (1e400)
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail("header is not a JSON object");
  const uint64_t buffer_bytes = bytes.size() - kLengthBytes - length;
  const std::byte* buffer = bytes.data() + kLengthBytes + length;

  SafetensorsFile file;
  std::map<uint64_t, std::pair<uint64_t, std::string>> extents;  // begin -> (end, name)
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail("__metadata__: '" + key + "' is not a string");
        file.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!entry.is_object()) fail(where + ": entry is not an object");
    for (const auto& [key, value] : entry.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets") {
        fail(where + ": unknown field '" + key + "'");
      }
    }
    StoredTensor t;
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) fail(where + ": dtype missing");
    t.dtype = entry["dtype"].get<std::string>();
    size_t element_bytes = 0;
    try {
      element_bytes = dtype_bytes(t.dtype);
    } catch (const SafetensorsError& e) {
      fail(where + ": " + e.what());
    }
    if (!entry.contains("shape") || !entry["shape"].is_array()) fail(where + ": shape missing");
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_integer()) fail(where + ": shape has a non-integer dimension");
      t.shape.push_back(d.get<int64_t>());
    }
    const auto& offsets = entry.contains("data_offsets") ? entry["data_offsets"] : nlohmann::json();
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      fail(where + ": data_offsets must be [begin, end]");
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    uint64_t expected = 0;
    try {
      expected = element_count(t.shape, where) * element_bytes;
    } catch (const SafetensorsError& e) {
      fail(e.what());
    }
    if (end < begin || end > buffer_bytes) {
      fail(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
           "] outside the " + std::to_string(buffer_bytes) + "-byte buffer");
    }
    if (end - begin != expected) {
      fail(where + ": data_offsets span " + std::to_string(end - begin) + " bytes, " + t.dtype +
           " " + shape_text(t.shape) + " needs " + std::to_string(expected));
    }
    t.data.assign(buffer + begin, buffer + end);
    if (expected > 0) extents[begin] = {end, name};
    file.tensors[name] = std::move(t);
  }
  uint64_t covered = 0;
  for (const auto& [begin, extent] : extents) {
    if (begin != covered) {
      fail("tensor '" + extent.second + "': data_offsets begin at " + std::to_string(begin) +
           (begin < covered ? ", overlapping the tensor before" : ", leaving a hole before it"));
    }
    covered = extent.first;
  }
  if (covered != buffer_bytes) {
    fail(std::to_string(buffer_bytes - covered) + " bytes after the last tensor belong to none");
  }
  return file;
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  const std::vector<std::byte> bytes = encode_safetensors(file);
  try {
    placement::write_file_atomically(path, [&](std::ostream& out) {
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    });
  } catch (const placement::FileWriteError& e) {
    throw SafetensorsError(e.what());
  }
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SafetensorsError(path + ": cannot open: " + std::strerror(errno));
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw SafetensorsError(path + ": read failed");
  std::vector<std::byte> bytes(raw.size());
  if (!raw.empty()) std::memcpy(bytes.data(), raw.data(), raw.size());
  return decode_safetensors(bytes, path);
}

}  // namespace tessel::stage
