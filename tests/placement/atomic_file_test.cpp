// write_file_atomically: the target is replaced whole or not at all. A full disk is emulated
// with RLIMIT_FSIZE (writes past it fail with EFBIG, as a full file system fails with ENOSPC).
#include "placement/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tests/full_disk.h"

namespace tessel::placement {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessel-atomic-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Only the named files are in the folder: no temporary left behind.
  void expect_only(const std::set<std::string>& names) {
    std::set<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir_)) found.insert(entry.path().filename());
    EXPECT_EQ(found, names);
  }

  fs::path dir_;
};

TEST_F(AtomicFile, WritesAndReplaces) {
  const fs::path path = dir_ / "a.yaml";
  write_file_atomically(path.string(), std::string("first\n"));
  EXPECT_EQ(read(path), "first\n");
  write_file_atomically(path.string(), [](std::ostream& out) { out << "second\n"; });
  EXPECT_EQ(read(path), "second\n");
  expect_only({"a.yaml"});
}

TEST_F(AtomicFile, LargeContentsArriveWhole) {
  const fs::path path = dir_ / "big.bin";
  std::string contents(3 << 20, '\0');
  for (size_t i = 0; i < contents.size(); ++i) contents[i] = static_cast<char>(i * 131 % 251);
  write_file_atomically(path.string(), contents);
  EXPECT_EQ(read(path), contents);
}

TEST_F(AtomicFile, AFullDiskLeavesTheOldFileAndNamesTheCause) {
  const fs::path path = dir_ / "topo.yaml";
  write_file_atomically(path.string(), std::string("good: true\n"));
  std::string message;
  try {
    const tessel::testing::FullDisk full(4096);
    write_file_atomically(path.string(), std::string(100000, 'x'));
  } catch (const FileWriteError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(path.string() + ": cannot write: File too large"), std::string::npos)
      << message;
  EXPECT_EQ(read(path), "good: true\n");
  expect_only({"topo.yaml"});
}

TEST_F(AtomicFile, AMissingFolderIsNamed) {
  const fs::path path = dir_ / "no-such-folder" / "x.svg";
  try {
    write_file_atomically(path.string(), std::string("<svg/>"));
    FAIL() << "expected FileWriteError";
  } catch (const FileWriteError& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ": cannot write: No such file or directory");
  }
}

TEST_F(AtomicFile, AnExceptionWhileFillingLeavesNothing) {
  const fs::path path = dir_ / "report.md";
  write_file_atomically(path.string(), std::string("old"));
  EXPECT_THROW(write_file_atomically(path.string(),
                                     [](std::ostream& out) {
                                       out << "half";
                                       throw std::logic_error("renderer failed");
                                     }),
               std::logic_error);
  EXPECT_EQ(read(path), "old");
  expect_only({"report.md"});
}

TEST_F(AtomicFile, ADirectoryInTheWayIsNamed) {
  const fs::path path = dir_ / "out";
  fs::create_directories(path);
  try {
    write_file_atomically(path.string(), std::string("x"));
    FAIL() << "expected FileWriteError";
  } catch (const FileWriteError& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ": cannot write: Is a directory");
  }
  expect_only({"out"});
}

}  // namespace
}  // namespace tessel::placement
