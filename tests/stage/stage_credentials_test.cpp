// What a stage process shows the services it calls: its job's token file and CA file, each
// refused with the job.json field, the file and what is wrong.
#include "noderuntime/stage/stage_credentials.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "noderuntime/stage/gpt_config.h"
#include "placement/atomic_file.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;

class StageCredentials : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessel-stage-credentials-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name, const std::string& contents) {
    const std::string path = (dir_ / name).string();
    placement::write_file_atomically(path, contents);
    return path;
  }
  template <class Call>
  std::string refusal(Call&& call) {
    try {
      call();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(accepted)";
  }

  fs::path dir_;
};

TEST_F(StageCredentials, ATokenFileGivesItsTokenWithoutTheFinalNewline) {
  EXPECT_EQ(read_token_file(file("token", "0123456789abcdef0123\n"), "progress.token_file"),
            "0123456789abcdef0123");
}

TEST_F(StageCredentials, BadTokenFilesAreNamedWithTheirField) {
  const std::string missing = (dir_ / "missing").string();
  EXPECT_EQ(refusal([&] { read_token_file(missing, "progress.token_file"); }),
            "progress.token_file: " + missing + ": cannot read: No such file or directory");
  const std::string short_token = file("short", "abc\n");
  EXPECT_EQ(
      refusal([&] { read_token_file(short_token, "rendezvous.token_file"); }),
      "rendezvous.token_file: " + short_token + ": a token has 16 to 4096 bytes, this file 3");
  const std::string long_token = file("long", std::string(kMaxTokenBytes + 1, 'a'));
  EXPECT_EQ(refusal([&] { read_token_file(long_token, "progress.token_file"); }),
            "progress.token_file: " + long_token + ": a token has 16 to 4096 bytes, this file " +
                std::to_string(kMaxTokenBytes + 1));
  const std::string spaced = file("spaced", "0123456789 abcdef\n");
  EXPECT_EQ(refusal([&] { read_token_file(spaced, "progress.token_file"); }),
            "progress.token_file: " + spaced +
                ": byte 10 of the token is not a printable ASCII character (a token travels as "
                "gRPC metadata)");
}

TEST_F(StageCredentials, NoCaFileIsAnInsecureChannelAndACaFileIsTls) {
  EXPECT_NE(channel_credentials("", "progress.ca_file"), nullptr);
  const std::string ca = file("ca.crt",
                              "-----BEGIN CERTIFICATE-----\nAAAA\n"
                              "-----END CERTIFICATE-----\n");
  EXPECT_NE(channel_credentials(ca, "progress.ca_file"), nullptr);
}

TEST_F(StageCredentials, BadCaFilesAreNamedWithTheirField) {
  const std::string missing = (dir_ / "missing.crt").string();
  EXPECT_EQ(refusal([&] { channel_credentials(missing, "rendezvous.ca_file"); }),
            "rendezvous.ca_file: " + missing + ": cannot read: No such file or directory");
  const std::string key = file("key.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n");
  EXPECT_EQ(refusal([&] { channel_credentials(key, "progress.ca_file"); }),
            "progress.ca_file: " + key +
                ": holds no PEM certificate (no -----BEGIN CERTIFICATE----- line)");
  const std::string huge = file("huge.crt", std::string(kMaxCaFileBytes + 1, 'x'));
  EXPECT_EQ(refusal([&] { channel_credentials(huge, "progress.ca_file"); }),
            "progress.ca_file: " + huge + ": larger than " + std::to_string(kMaxCaFileBytes) +
                " bytes: not a CA certificate file");
}

}  // namespace
}  // namespace tessel::stage
