// The safetensors reader and writer: the byte layout of the format, a round trip, and a clear
// error naming the file and the tensor for every way a file can be wrong.
#include "noderuntime/stage/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

namespace tessel::stage {
namespace {

std::vector<std::byte> bytes_of(const std::string& header, size_t buffer_bytes) {
  std::vector<std::byte> out(8 + header.size() + buffer_bytes, std::byte{0});
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = std::byte((n >> (8 * i)) & 0xFF);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string decode_error(const std::string& header, size_t buffer_bytes) {
  try {
    decode_safetensors(bytes_of(header, buffer_bytes), "x.safetensors");
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, WritesTheReferenceLayout) {
  SafetensorsFile file;
  const float values[] = {1.0f, -2.0f, 0.5f};
  file.add_f32("b", {3}, values);
  file.add_f32("a", {1, 1}, values);
  file.metadata["step"] = "7";
  const std::vector<std::byte> bytes = encode_safetensors(file);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(bytes[i]) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  const std::string header(reinterpret_cast<const char*>(bytes.data() + 8), n);
  EXPECT_EQ(
      header.substr(0, header.find_last_not_of(' ') + 1),
      R"({"__metadata__":{"step":"7"},"a":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})");
  ASSERT_EQ(bytes.size(), 8 + n + 16);
  float stored[4];
  std::memcpy(stored, bytes.data() + 8 + n, sizeof stored);
  EXPECT_EQ(stored[0], 1.0f);  // a
  EXPECT_EQ(stored[3], 0.5f);  // b[2]
}

TEST(Safetensors, RoundTripsThroughAFile) {
  SafetensorsFile file;
  std::vector<float> weights(1000);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.001f * float(i) - 0.3f;
  file.add_f32("h.0.mlp.fc.weight", {10, 100}, weights.data());
  file.add_f32("empty", {0, 4}, nullptr);
  file.metadata["data_position"] = "123";
  const auto path = std::filesystem::temp_directory_path() /
                    ("tessel-safetensors-" + std::to_string(::getpid()) + ".safetensors");
  write_safetensors(path.string(), file);
  const SafetensorsFile back = read_safetensors(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(back.metadata, file.metadata);
  EXPECT_EQ(back.f32("h.0.mlp.fc.weight", {10, 100}, "f"), weights);
  EXPECT_EQ(back.tensors.at("empty").shape, (std::vector<int64_t>{0, 4}));
  try {
    back.f32("h.0.mlp.fc.weight", {100, 10}, "f.safetensors");
    FAIL() << "no error";
  } catch (const SafetensorsError& e) {
    EXPECT_STREQ(e.what(),
                 "f.safetensors: tensor 'h.0.mlp.fc.weight': shape [10, 100], expected [100, 10]");
  }
  EXPECT_THROW(back.f32("missing", {1}, "f"), SafetensorsError);
}

TEST(Safetensors, RejectsMalformedFilesNamingTheFileAndTensor) {
  EXPECT_EQ(decode_error("", 0).substr(0, 14), "x.safetensors:");
  EXPECT_NE(decode_error("{not json", 0).find("header is not valid JSON"), std::string::npos);
  EXPECT_EQ(decode_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
            "x.safetensors: tensor 'w': data_offsets span 4 bytes, F32 [2] needs 8");
  EXPECT_EQ(decode_error(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 1),
            "x.safetensors: tensor 'w': unknown dtype 'Q4'");
  EXPECT_EQ(decode_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 2),
            "x.safetensors: tensor 'w': data_offsets [0, 4] outside the 2-byte buffer");
  EXPECT_EQ(decode_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
            "x.safetensors: tensor 'w': data_offsets begin at 4, leaving a hole before it");
  EXPECT_EQ(decode_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         8),
            "x.safetensors: tensor 'b': data_offsets begin at 4, overlapping the tensor before");
  EXPECT_EQ(decode_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 6),
            "x.safetensors: 2 bytes after the last tensor belong to none");
  EXPECT_EQ(decode_error(R"({"w":{"dtype":"F32","shape":[1],"offsets":[0,4]}})", 4),
            "x.safetensors: tensor 'w': unknown field 'offsets'");
  EXPECT_EQ(decode_error(R"({"__metadata__":{"step":7}})", 0),
            "x.safetensors: __metadata__: 'step' is not a string");
  // Found by tests/fuzz (safetensors): a number no double holds threw out_of_range past the reader.
  EXPECT_EQ(decode_error(R"({"w":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}})", 4),
            "x.safetensors: header is not valid JSON: [json.exception.out_of_range.406] number "
            "overflow parsing '1e400'");
  std::vector<std::byte> truncated = bytes_of("{}", 0);
  truncated[0] = std::byte{0xFF};
  EXPECT_THROW(decode_safetensors(truncated, "t"), SafetensorsError);
  EXPECT_THROW(read_safetensors("/nonexistent/x.safetensors"), SafetensorsError);
}

}  // namespace
}  // namespace tessel::stage
