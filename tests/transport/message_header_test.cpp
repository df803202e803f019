// The tensor message (frame) header, version 2: round trips, the exact little-endian layout, and
// every kind of corruption or mismatch rejected with a message naming the field.
#include "noderuntime/transport/message_header.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/little_endian.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

MessageHeader sample_header() {
  MessageHeader h;
  h.job_id = 0x0102030405060708ull;
  h.info = TensorInfo{Tag::kGradient, 0x1122334455667788ull, 7, 3, DType::kBF16, {8, 1024, 768}};
  h.payload_bytes = 8 * 1024 * 768 * 2;
  h.sequence = 0x2122232425262728ull;
  h.piece_offset = 4096;
  h.piece_bytes = 1 << 20;
  h.piece_crc32c = 0xCAFEBABEu;
  h.stream = 0x0305;
  return h;
}

// The message decode_header throws, or "" when it accepts the bytes.
std::string decode_error(const EncodedHeader& bytes) {
  try {
    decode_header(bytes);
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}

// Overwrites a field at `offset` and re-seals the header checksum, so that only the field
// check can catch it.
EncodedHeader with_field(EncodedHeader bytes, size_t offset, uint64_t value, size_t width) {
  LittleEndianWriter(std::span(bytes).subspan(offset, width)).put(value, width);
  LittleEndianWriter(std::span(bytes).subspan(140, 4)).put(crc32c(std::span(bytes).first(140)), 4);
  return bytes;
}

testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

TEST(MessageHeader, RoundTripsEveryField) {
  const MessageHeader h = sample_header();
  EXPECT_EQ(decode_header(encode_header(h)), h);
}

TEST(MessageHeader, RoundTripsEveryTagDtypeAndRank) {
  for (Tag tag : {Tag::kActivation, Tag::kGradient, Tag::kAllReduce, Tag::kControl}) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32}) {
      for (size_t dims = 0; dims <= kMaxDims; ++dims) {
        MessageHeader h;
        h.job_id = 42;
        h.info = TensorInfo{tag, dims,  static_cast<uint32_t>(dims),
                            1,   dtype, std::vector<int64_t>(dims, 2)};
        h.payload_bytes = dtype_size(dtype) << dims;
        h.piece_crc32c = static_cast<uint32_t>(dims);
        h.sequence = dims;
        h.piece_bytes = h.payload_bytes;
        h.stream = static_cast<uint16_t>(dims);
        ASSERT_EQ(decode_header(encode_header(h)), h) << to_string(tag) << " " << to_string(dtype);
      }
    }
  }
}

TEST(MessageHeader, IsLittleEndianAtFixedOffsets) {
  const EncodedHeader bytes = encode_header(sample_header());
  const auto u = [&](size_t i) { return static_cast<unsigned>(bytes[i]); };
  EXPECT_EQ(std::string({static_cast<char>(u(0)), static_cast<char>(u(1)), static_cast<char>(u(2)),
                         static_cast<char>(u(3))}),
            "TSLM");
  EXPECT_EQ(kHeaderBytes, 144u);
  EXPECT_EQ(u(4), 2u);  // version
  EXPECT_EQ(u(5), 0u);
  EXPECT_EQ(u(6), static_cast<unsigned>(Tag::kGradient));
  EXPECT_EQ(u(7), static_cast<unsigned>(DType::kBF16));
  EXPECT_EQ(u(8), 0x08u);  // job id, lowest byte first
  EXPECT_EQ(u(15), 0x01u);
  EXPECT_EQ(u(16), 0x88u);  // step
  EXPECT_EQ(u(23), 0x11u);
  EXPECT_EQ(u(24), 7u);     // micro-batch
  EXPECT_EQ(u(28), 3u);     // chunk
  EXPECT_EQ(u(32), 3u);     // dims
  EXPECT_EQ(u(36), 0xBEu);  // piece crc
  EXPECT_EQ(u(48), 8u);     // shape[0]
  EXPECT_EQ(u(56), 0x00u);  // shape[1] = 1024 = 0x400
  EXPECT_EQ(u(57), 0x04u);
  EXPECT_EQ(u(112), 0x28u);  // sequence
  EXPECT_EQ(u(119), 0x21u);
  EXPECT_EQ(u(120), 0x00u);  // piece offset 4096 = 0x1000
  EXPECT_EQ(u(121), 0x10u);
  EXPECT_EQ(u(130), 0x10u);  // piece bytes 1 MiB = 0x100000
  EXPECT_EQ(u(136), 0x05u);  // stream
  EXPECT_EQ(u(137), 0x03u);
  EXPECT_EQ(u(138), 0u);  // reserved
  EXPECT_EQ(u(139), 0u);
}

TEST(MessageHeader, DetectsEverySingleBitFlip) {
  const EncodedHeader clean = encode_header(sample_header());
  for (size_t bit = 0; bit < kHeaderBytes * 8; ++bit) {
    EncodedHeader bytes = clean;
    bytes[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    const std::string error = decode_error(bytes);
    ASSERT_FALSE(error.empty()) << "bit " << bit << " flipped and not detected";
    if (bit < 32) {
      EXPECT_TRUE(Contains(error, "bad magic")) << bit;
    } else if (bit < 48) {
      EXPECT_TRUE(Contains(error, "unsupported header version")) << bit;
    } else {
      EXPECT_TRUE(Contains(error, "header checksum mismatch")) << bit;
    }
  }
}

TEST(MessageHeader, NamesTheBadFieldBehindAValidChecksum) {
  const EncodedHeader clean = encode_header(sample_header());
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 0, 0x12345678, 4)),
                       "bad magic 0x12345678 (expected 0x4d4c5354)"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 4, 1, 2)),
                       "unsupported header version 1 (expected 2)"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 6, 9, 1)), "tag: unknown value 9"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 7, 0, 1)), "dtype: unknown value 0"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 32, 9, 4)), "dims: 9, at most 8"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 48 + 8 * 5, 4, 8)),
                       "shape[5]: 4 beyond the 3 dims in use"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 48, static_cast<uint64_t>(-8), 8)),
                       "shape[0]: negative dim -8"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 40, 12, 8)),
                       "payload bytes: 12, but bf16 [8, 1024, 768] is 12582912"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 48, 1ull << 62, 8)), "overflows"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 120, 12582912 - 100, 8)),
                       "piece of 1048576 bytes at offset 12582812 lies outside the 12582912-byte "
                       "payload"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 128, ~0ull, 8)), "lies outside"));
  EXPECT_TRUE(Contains(decode_error(with_field(clean, 120, ~0ull, 8)), "lies outside"));
  EXPECT_TRUE(
      Contains(decode_error(with_field(clean, 138, 1, 2)), "reserved field: 1 (must be 0)"));
}

TEST(MessageHeader, EncodeRejectsWhatCannotBeSent) {
  MessageHeader h = sample_header();
  h.payload_bytes = 5;
  EXPECT_THROW(encode_header(h), TransportError);
  h = sample_header();
  h.piece_offset = h.payload_bytes;  // a piece past the end
  EXPECT_THROW(encode_header(h), TransportError);
  h = sample_header();
  h.info.shape.assign(9, 1);
  h.payload_bytes = 2;
  try {
    encode_header(h);
    FAIL() << "9 dims accepted";
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(), "shape: 9 dims, at most 8"));
  }
}

TEST(MessageHeader, PayloadBytesOfCountsDtypeTimesShape) {
  EXPECT_EQ(payload_bytes_of({Tag::kActivation, 0, 0, 0, DType::kF32, {}}), 4u);  // a scalar
  EXPECT_EQ(payload_bytes_of({Tag::kActivation, 0, 0, 0, DType::kF16, {3, 0, 5}}), 0u);
  EXPECT_EQ(payload_bytes_of({Tag::kActivation, 0, 0, 0, DType::kI32, {3, 5}}), 60u);
}

TEST(MessageHeader, CheckExpectedNamesJobDtypeAndShape) {
  const MessageHeader got = sample_header();
  EXPECT_NO_THROW(check_expected(got.job_id, got.info, got));
  const auto error = [&](uint64_t job, TensorInfo expected) -> std::string {
    try {
      check_expected(job, expected, got);
    } catch (const TransportError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(Contains(error(5, got.info), "job id 72623859790382856 is not this job's 5"));
  TensorInfo other = got.info;
  other.dtype = DType::kF32;
  EXPECT_TRUE(Contains(error(got.job_id, other), "dtype bf16 does not match the expected f32"));
  other = got.info;
  other.shape = {8, 1024, 512};
  EXPECT_TRUE(Contains(error(got.job_id, other),
                       "shape [8, 1024, 768] does not match the expected [8, 1024, 512]"));
}

TEST(MessageHeader, KeyNamesTheMessage) {
  EXPECT_EQ(to_string(key_of(sample_header().info)),
            "gradient step 1234605616436508552 micro-batch 7 chunk 3");
}

}  // namespace
}  // namespace tessel::transport
