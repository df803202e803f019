// The safetensors file format (Hugging Face): an 8-byte little-endian header length N, N bytes
// of JSON header, then the data buffer. The header maps each tensor name to
// {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} (byte offsets into the
// buffer) and may hold "__metadata__", a map of strings. The tensors tile the buffer exactly:
// no holes, no overlaps. The writer orders tensors by name and pads the header with spaces to
// a multiple of 8 bytes, as the reference writer does.
//
// The reader checks all of it and throws SafetensorsError naming the file and the tensor or
// field at fault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::stage {

class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct StoredTensor {
  std::string dtype = "F32";  // F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL
  std::vector<int64_t> shape;
  std::vector<std::byte> data;  // little-endian elements, row-major
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::map<std::string, StoredTensor> tensors;

  // An F32 tensor from floats.
  void add_f32(const std::string& name, std::vector<int64_t> shape, const float* values);
  // The named tensor as floats. Throws SafetensorsError naming `source` and the tensor when it
  // is missing, not F32, or not of `shape`.
  std::vector<float> f32(const std::string& name, const std::vector<int64_t>& shape,
                         const std::string& source) const;
};

// Bytes per element of a safetensors dtype; throws SafetensorsError for an unknown one.
size_t dtype_bytes(const std::string& dtype);

std::vector<std::byte> encode_safetensors(const SafetensorsFile& file);
// source names the bytes in errors (the file's path).
SafetensorsFile decode_safetensors(const std::vector<std::byte>& bytes, const std::string& source);

// Written by placement::write_file_atomically (a temporary name, then renamed), so a reader
// never sees half a file; a failure names the file and the cause (errno's text).
void write_safetensors(const std::string& path, const SafetensorsFile& file);
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace tessel::stage
