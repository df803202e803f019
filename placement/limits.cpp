#include "placement/limits.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "placement/bottleneck_matching.h"

namespace tessel::placement {

static_assert(kMaxReplicas == kMaxBottleneckSize,
              "the replica limit is the bottleneck matching's size limit");
static_assert(int64_t{kMaxStages} * kMaxReplicas >= kMaxDevices);

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (!(bytes >= 1024)) return std::to_string(static_cast<long long>(bytes)) + " bytes";
  int unit = -1;
  while (bytes >= 1024 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    bytes /= 1024;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.1f %s", bytes, kUnits[unit]);
  return text;
}

std::string number_text(double value) {
  if (std::isfinite(value) && value == std::trunc(value) && std::abs(value) < 1e15) {
    return std::to_string(static_cast<long long>(value));
  }
  char buffer[64];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  return std::string(buffer, end);
}

namespace {

// The first number on the line of /proc/meminfo that starts with key, in bytes.
std::optional<double> meminfo_bytes(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  const size_t length = std::strlen(key);
  while (std::getline(in, line)) {
    if (line.compare(0, length, key) != 0) continue;
    std::istringstream fields(line.substr(length));
    double kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return std::nullopt;
}

std::optional<double> cgroup_value(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return std::nullopt;
  return value;
}

// The text in double quotes; '"' and '\\' escaped, a control character as \xNN (other bytes,
// UTF-8 text, as they are).
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::optional<double> available_memory_bytes() {
  std::optional<double> available = meminfo_bytes("MemAvailable:");
  const auto lower = [&](double bytes) {
    available = available ? std::min(*available, bytes) : bytes;
  };
  if (!available) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0) available = double(pages) * double(size);
  }
  if (const auto max = cgroup_value("/sys/fs/cgroup/memory.max")) {
    const double used = cgroup_value("/sys/fs/cgroup/memory.current").value_or(0);
    lower(std::max(0.0, *max - used));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    lower(double(limit.rlim_cur));
  }
  return available;
}

std::string memory_shortfall(double bytes) {
  // Small requests are not checked: the callers sit on hot paths (a schedule is validated at
  // every cost evaluation), and reading /proc for them would cost more than the work.
  if (bytes < kMemoryCheckFloorBytes) return "";
  const std::optional<double> available = available_memory_bytes();
  if (!available || bytes <= *available) return "";
  return "needs about " + format_bytes(bytes) + ", more than the " + format_bytes(*available) +
         " this machine has available";
}

std::optional<std::string> read_file_bounded(const std::string& path, uint64_t limit,
                                             std::string* error) {
  const auto fail = [&](const std::string& why) -> std::optional<std::string> {
    *error = why;
    return std::nullopt;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail(std::string("cannot open: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) return fail(std::string("cannot stat: ") + std::strerror(errno));
  if (S_ISDIR(info.st_mode)) return fail("is a directory");
  if (!S_ISREG(info.st_mode)) return fail("is not a regular file");
  if (static_cast<uint64_t>(info.st_size) > limit) {
    return fail("is " + format_bytes(double(info.st_size)) + ", more than the limit of " +
                format_bytes(double(limit)));
  }
  std::string text;
  text.resize(static_cast<size_t>(info.st_size));
  size_t done = 0;
  while (true) {
    // Read one byte past the size stat gave, so a file that grew past the limit is caught.
    if (done == text.size()) {
      if (text.size() > limit) {
        return fail("grew past the limit of " + format_bytes(double(limit)) + " while read");
      }
      text.resize(std::min<uint64_t>(limit + 1, text.size() + 65536));
    }
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(std::string("cannot read: ") + std::strerror(errno));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  if (done > limit) {
    return fail("grew past the limit of " + format_bytes(double(limit)) + " while read");
  }
  text.resize(done);
  return text;
}

std::string dns1123_label_violation(const std::string& name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > 63) {
    return "must be at most 63 characters (a Kubernetes DNS-1123 label), got " +
           std::to_string(name.size());
  }
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (const char c : name) {
    if (!alnum(c) && c != '-') {
      return "must consist of lowercase letters, digits and '-' (a Kubernetes DNS-1123 label)";
    }
  }
  if (!alnum(name.front()) || !alnum(name.back())) {
    return "must start and end with a lowercase letter or digit (a Kubernetes DNS-1123 label)";
  }
  return "";
}

std::string island_label_violation(const std::string& label) {
  if (label.empty()) return "must not be empty";
  if (label.size() > kMaxIslandLabel) {
    return "is " + std::to_string(label.size()) + " characters long, at most " +
           std::to_string(kMaxIslandLabel);
  }
  for (const char c : label) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
    if (!ok) return quoted(label) + " has a character outside [A-Za-z0-9._:/-]";
  }
  return "";
}

std::string job_file_path_violation(const std::string& path) {
  if (path.empty()) return "must not be empty";
  if (path.size() > kMaxJobFilePath) {
    return "is " + std::to_string(path.size()) + " characters long, at most " +
           std::to_string(kMaxJobFilePath);
  }
  if (path.find('\0') != std::string::npos) return "has a NUL character";
  return "";
}

bool is_host_port(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == 0 || colon == std::string::npos) return false;
  const std::string port = address.substr(colon + 1);
  const bool digits = !port.empty() && port.size() <= 5 &&
                      port.find_first_not_of("0123456789") == std::string::npos;
  return digits && std::stoi(port) >= 1 && std::stoi(port) <= 65535;
}

bool is_env_var_name(const std::string& name) {
  return !name.empty() && name.size() <= kMaxEnvVarName &&
         name.find_first_not_of(
             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
             std::string::npos;
}

}  // namespace tessel::placement
