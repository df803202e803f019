// The frame header in front of every piece of a tensor message on a connection: what the tensor
// is (tag, step, micro-batch, chunk, dtype, shape) and its whole payload size, then which piece
// of it follows: the message's sequence number on the link, the piece's offset and byte count,
// the stream (connection) it travels on, and the piece's CRC32C. A link of several TCP streams
// cuts a large message into pieces, one per stream, and the receiver reassembles them by
// sequence and offset (tcp_peer.h); on a single stream a message is one piece. Encoded field by
// field, little-endian, into kHeaderBytes bytes (never a memcpy of a struct), with a CRC32C of
// the header itself as the last field so that a flipped bit anywhere is caught.
//
// Layout (offset: field), version 2 (version 1 had no sequence/piece/stream fields):
//   0 magic u32 "TSLM"   4 version u16   6 tag u8   7 dtype u8   8 job id u64   16 step u64
//   24 micro-batch u32   28 chunk u32    32 dims u32   36 piece crc32c u32
//   40 payload bytes u64 48 shape 8 x i64 (unused dims 0)   112 sequence u64
//   120 piece offset u64 128 piece bytes u64   136 stream u16   138 reserved u16 (0)
//   140 header crc32c u32 (of 0..139)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessel::transport {

enum class Tag : uint8_t { kActivation = 1, kGradient = 2, kAllReduce = 3, kControl = 4 };
enum class DType : uint8_t { kF32 = 1, kBF16 = 2, kF16 = 3, kI32 = 4 };

const char* to_string(Tag tag);
const char* to_string(DType dtype);
size_t dtype_size(DType dtype);

constexpr uint32_t kHeaderMagic = 0x4D4C5354u;  // "TSLM" read as little-endian bytes
constexpr uint16_t kHeaderVersion = 2;
constexpr size_t kHeaderBytes = 144;
constexpr size_t kMaxDims = 8;

// What a message is: the sender describes its tensor with it and a receiver states what it
// expects. (tag, step, micro_batch, chunk) is the key that matches messages to receives; chunk
// is the virtual stage for pipeline messages. All-reduce messages reuse the fields to name the
// collective (see ring_allreduce.h).
struct TensorInfo {
  Tag tag = Tag::kActivation;
  uint64_t step = 0;
  uint32_t micro_batch = 0;
  uint32_t chunk = 0;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;

  bool operator==(const TensorInfo&) const = default;
};

// Bytes of a tensor of this dtype and shape. Throws TransportError for more than kMaxDims
// dims, a negative dim, or a size that overflows 64 bits, naming the dim.
uint64_t payload_bytes_of(const TensorInfo& info);

struct MessageKey {
  Tag tag = Tag::kActivation;
  uint64_t step = 0;
  uint32_t micro_batch = 0;
  uint32_t chunk = 0;

  bool operator==(const MessageKey&) const = default;
};

inline MessageKey key_of(const TensorInfo& info) {
  return {info.tag, info.step, info.micro_batch, info.chunk};
}

// "activation step 3 micro-batch 2 chunk 0"
std::string to_string(const MessageKey& key);
// "[8, 1024, 768]"
std::string shape_to_string(const std::vector<int64_t>& shape);

struct MessageHeader {
  uint64_t job_id = 0;
  TensorInfo info;
  uint64_t payload_bytes = 0;  // of the whole message
  // The piece this frame carries: bytes [piece_offset, piece_offset + piece_bytes) of the
  // payload, with their CRC32C, on connection `stream` of the link; `sequence` numbers the
  // messages of one direction of a link from 0.
  uint64_t sequence = 0;
  uint64_t piece_offset = 0;
  uint64_t piece_bytes = 0;
  uint32_t piece_crc32c = 0;
  uint16_t stream = 0;

  bool operator==(const MessageHeader&) const = default;
};

using EncodedHeader = std::array<std::byte, kHeaderBytes>;

// Throws TransportError when the header cannot be represented (see payload_bytes_of), its
// payload byte count disagrees with dtype and shape, or the piece lies outside the payload.
EncodedHeader encode_header(const MessageHeader& header);

// Validates every field (magic, version, header checksum, tag, dtype, dims, shape, payload
// byte count against dtype x shape, the piece within the payload, reserved bits) and throws
// TransportError naming the first one at fault, e.g. "bad magic 0x12345678 (expected 0x4d4c5354)".
MessageHeader decode_header(std::span<const std::byte, kHeaderBytes> bytes);

// Throws TransportError unless `got` is what a receive expecting `expected` of job
// `expected_job` accepts: same job, same dtype, same shape. The message names the field, e.g.
// "shape [8, 512] does not match the expected [8, 768]".
void check_expected(uint64_t expected_job, const TensorInfo& expected, const MessageHeader& got);

}  // namespace tessel::transport
