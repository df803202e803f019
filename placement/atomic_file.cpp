#include "placement/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <streambuf>

namespace tessel::placement {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw FileWriteError(path + ": cannot write: " + why);
}

// A stream buffer over a file descriptor that remembers the first write error's errno.
class FdBuffer : public std::streambuf {
 public:
  explicit FdBuffer(int fd) : fd_(fd) { setp(buffer_, buffer_ + sizeof(buffer_)); }
  int error() const { return error_; }
  bool flush_all() { return sync() == 0; }

 protected:
  int_type overflow(int_type c) override {
    if (sync() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* data, std::streamsize n) override {
    if (n >= static_cast<std::streamsize>(sizeof(buffer_))) {
      if (sync() != 0 || !write_all(data, static_cast<size_t>(n))) return 0;
      return n;
    }
    return std::streambuf::xsputn(data, n);
  }
  int sync() override {
    const size_t n = static_cast<size_t>(pptr() - pbase());
    if (n > 0 && !write_all(pbase(), n)) return -1;
    setp(buffer_, buffer_ + sizeof(buffer_));
    return 0;
  }

 private:
  bool write_all(const char* data, size_t n) {
    if (error_ != 0) return false;
    while (n > 0) {
      const ssize_t written = ::write(fd_, data, n);
      if (written < 0) {
        if (errno == EINTR) continue;
        error_ = errno;
        return false;
      }
      data += written;
      n -= static_cast<size_t>(written);
    }
    return true;
  }

  int fd_;
  int error_ = 0;
  char buffer_[1 << 16];
};

std::string temporary_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  const fs::path target(path);
  return (target.parent_path() / ("." + target.filename().string() + ".tmp-" +
                                  std::to_string(::getpid()) + "-" + std::to_string(counter++)))
      .string();
}

}  // namespace

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& fill) {
  if (path.empty()) fail("(empty path)", "no file name given");
  const std::string tmp = temporary_name(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, std::strerror(errno));
  const auto abandon = [&](const std::string& why) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, why);
  };
  FdBuffer buffer(fd);
  std::ostream out(&buffer);
  try {
    fill(out);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (!buffer.flush_all() || !out) {
    abandon(buffer.error() ? std::strerror(buffer.error()) : "the stream failed");
  }
  if (::fsync(fd) != 0) abandon(std::strerror(errno));
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    fail(path, std::strerror(error));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    fail(path, std::strerror(error));
  }
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  write_file_atomically(path,
                        [&](std::ostream& out) { out.write(contents.data(), contents.size()); });
}

}  // namespace tessel::placement
