#include "noderuntime/transport/message_header.h"

#include <cstdio>
#include <limits>

#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/little_endian.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

constexpr size_t kHeaderCrcOffset = kHeaderBytes - 4;

std::string hex32(uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", value);
  return buf;
}

void check_payload_bytes(const MessageHeader& h) {
  const uint64_t expected_bytes = payload_bytes_of(h.info);
  if (h.payload_bytes != expected_bytes) {
    throw TransportError("payload bytes: " + std::to_string(h.payload_bytes) + ", but " +
                         to_string(h.info.dtype) + " " + shape_to_string(h.info.shape) + " is " +
                         std::to_string(expected_bytes));
  }
  if (h.piece_offset > h.payload_bytes || h.piece_bytes > h.payload_bytes - h.piece_offset) {
    throw TransportError("piece of " + std::to_string(h.piece_bytes) + " bytes at offset " +
                         std::to_string(h.piece_offset) + " lies outside the " +
                         std::to_string(h.payload_bytes) + "-byte payload");
  }
}

bool valid_tag(uint64_t v) { return v >= 1 && v <= 4; }
bool valid_dtype(uint64_t v) { return v >= 1 && v <= 4; }

}  // namespace

const char* to_string(Tag tag) {
  switch (tag) {
    case Tag::kActivation:
      return "activation";
    case Tag::kGradient:
      return "gradient";
    case Tag::kAllReduce:
      return "all-reduce";
    case Tag::kControl:
      return "control";
  }
  return "unknown-tag";
}

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
  }
  return "unknown-dtype";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
  }
  throw TransportError("dtype: unknown value " + std::to_string(static_cast<int>(dtype)));
}

uint64_t payload_bytes_of(const TensorInfo& info) {
  if (info.shape.size() > kMaxDims) {
    throw TransportError("shape: " + std::to_string(info.shape.size()) + " dims, at most " +
                         std::to_string(kMaxDims));
  }
  uint64_t bytes = dtype_size(info.dtype);
  for (size_t d = 0; d < info.shape.size(); ++d) {
    const int64_t dim = info.shape[d];
    if (dim < 0) {
      throw TransportError("shape[" + std::to_string(d) + "]: negative dim " + std::to_string(dim));
    }
    if (dim != 0 && bytes > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(dim)) {
      throw TransportError("shape " + shape_to_string(info.shape) + ": byte count overflows");
    }
    bytes *= static_cast<uint64_t>(dim);
  }
  return bytes;
}

std::string to_string(const MessageKey& key) {
  return std::string(to_string(key.tag)) + " step " + std::to_string(key.step) + " micro-batch " +
         std::to_string(key.micro_batch) + " chunk " + std::to_string(key.chunk);
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d) out += ", ";
    out += std::to_string(shape[d]);
  }
  return out + "]";
}

EncodedHeader encode_header(const MessageHeader& header) {
  check_payload_bytes(header);
  EncodedHeader out{};
  LittleEndianWriter w(out);
  w.put(kHeaderMagic, 4);
  w.put(kHeaderVersion, 2);
  w.put(static_cast<uint8_t>(header.info.tag), 1);
  w.put(static_cast<uint8_t>(header.info.dtype), 1);
  w.put(header.job_id, 8);
  w.put(header.info.step, 8);
  w.put(header.info.micro_batch, 4);
  w.put(header.info.chunk, 4);
  w.put(header.info.shape.size(), 4);
  w.put(header.piece_crc32c, 4);
  w.put(header.payload_bytes, 8);
  for (size_t d = 0; d < kMaxDims; ++d) {
    w.put(d < header.info.shape.size() ? static_cast<uint64_t>(header.info.shape[d]) : 0, 8);
  }
  w.put(header.sequence, 8);
  w.put(header.piece_offset, 8);
  w.put(header.piece_bytes, 8);
  w.put(header.stream, 2);
  w.put(0, 2);
  w.put(crc32c(std::span(out).first(kHeaderCrcOffset)), 4);
  return out;
}

MessageHeader decode_header(std::span<const std::byte, kHeaderBytes> bytes) {
  LittleEndianReader r(bytes);
  const auto magic = static_cast<uint32_t>(r.get(4));
  if (magic != kHeaderMagic) {
    throw TransportError("bad magic " + hex32(magic) + " (expected " + hex32(kHeaderMagic) + ")");
  }
  const auto version = r.get(2);
  if (version != kHeaderVersion) {
    throw TransportError("unsupported header version " + std::to_string(version) + " (expected " +
                         std::to_string(kHeaderVersion) + ")");
  }
  const auto stored_crc = static_cast<uint32_t>(LittleEndianReader(bytes, kHeaderCrcOffset).get(4));
  const uint32_t computed_crc = crc32c(bytes.first(kHeaderCrcOffset));
  if (stored_crc != computed_crc) {
    throw TransportError("header checksum mismatch (header says " + hex32(stored_crc) +
                         ", computed " + hex32(computed_crc) + ")");
  }
  MessageHeader h;
  const uint64_t tag = r.get(1);
  if (!valid_tag(tag)) throw TransportError("tag: unknown value " + std::to_string(tag));
  h.info.tag = static_cast<Tag>(tag);
  const uint64_t dtype = r.get(1);
  if (!valid_dtype(dtype)) throw TransportError("dtype: unknown value " + std::to_string(dtype));
  h.info.dtype = static_cast<DType>(dtype);
  h.job_id = r.get(8);
  h.info.step = r.get(8);
  h.info.micro_batch = static_cast<uint32_t>(r.get(4));
  h.info.chunk = static_cast<uint32_t>(r.get(4));
  const uint64_t dims = r.get(4);
  if (dims > kMaxDims) {
    throw TransportError("dims: " + std::to_string(dims) + ", at most " + std::to_string(kMaxDims));
  }
  h.piece_crc32c = static_cast<uint32_t>(r.get(4));
  h.payload_bytes = r.get(8);
  for (size_t d = 0; d < kMaxDims; ++d) {
    const auto dim = static_cast<int64_t>(r.get(8));
    if (d < dims) {
      h.info.shape.push_back(dim);
    } else if (dim != 0) {
      throw TransportError("shape[" + std::to_string(d) + "]: " + std::to_string(dim) +
                           " beyond the " + std::to_string(dims) + " dims in use (must be 0)");
    }
  }
  h.sequence = r.get(8);
  h.piece_offset = r.get(8);
  h.piece_bytes = r.get(8);
  h.stream = static_cast<uint16_t>(r.get(2));
  if (const uint64_t reserved = r.get(2); reserved != 0) {
    throw TransportError("reserved field: " + std::to_string(reserved) + " (must be 0)");
  }
  check_payload_bytes(h);
  return h;
}

void check_expected(uint64_t expected_job, const TensorInfo& expected, const MessageHeader& got) {
  if (got.job_id != expected_job) {
    throw TransportError("job id " + std::to_string(got.job_id) + " is not this job's " +
                         std::to_string(expected_job));
  }
  if (got.info.dtype != expected.dtype) {
    throw TransportError("dtype " + std::string(to_string(got.info.dtype)) +
                         " does not match the expected " + to_string(expected.dtype));
  }
  if (got.info.shape != expected.shape) {
    throw TransportError("shape " + shape_to_string(got.info.shape) +
                         " does not match the expected " + shape_to_string(expected.shape));
  }
}

}  // namespace tessel::transport
