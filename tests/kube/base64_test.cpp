#include "kube/base64.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tessel::kube {
namespace {

// RFC 4648 section 10.
const std::vector<std::pair<std::string, std::string>> kRfc4648Vectors = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

TEST(Base64Test, EncodesRfc4648Vectors) {
  for (const auto& [plain, encoded] : kRfc4648Vectors) {
    EXPECT_EQ(base64_encode(plain), encoded) << plain;
  }
}

TEST(Base64Test, DecodesRfc4648Vectors) {
  for (const auto& [plain, encoded] : kRfc4648Vectors) {
    EXPECT_EQ(base64_decode(encoded), plain) << encoded;
  }
}

TEST(Base64Test, RoundTripsEveryByteValue) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  for (std::size_t length = 0; length <= bytes.size(); length += 37) {
    const std::string prefix = bytes.substr(0, length);
    EXPECT_EQ(base64_decode(base64_encode(prefix)), prefix) << length;
  }
  EXPECT_EQ(base64_encode("\xfb\xff"), "+/8=");
}

TEST(Base64Test, SkipsWhitespaceAsInWrappedPem) {
  EXPECT_EQ(base64_decode("Zm9v\nYmFy\n"), "foobar");
  EXPECT_EQ(base64_decode("  Zm9v\r\n\tYmE=\n"), "fooba");
  EXPECT_EQ(base64_decode("Zg=\n="), "f");
  EXPECT_EQ(base64_decode(" \n"), "");
}

TEST(Base64Test, IgnoresUnusedLowBitsLikeGo) { EXPECT_EQ(base64_decode("Zh=="), "f"); }

TEST(Base64Test, RejectsBadInput) {
  for (const std::string bad : {
           "Zg",            // missing padding
           "Zm8",           // missing padding
           "Zg=",           // short padding
           "Z===",          // too much padding
           "Zm9v=",         // padding after a complete quantum
           "=Zm9",          // padding first
           "Zg==Zg==",      // data after padding
           "Zg== x",        // data after padding and whitespace
           "Zm9v!mFy",      // outside the alphabet
           "Zm9v-_Fy",      // URL-safe alphabet
           "Zm9vYmFy\x80",  // non-ASCII
           "Zm9vY",         // truncated quantum
       }) {
    EXPECT_EQ(base64_decode(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace tessel::kube
