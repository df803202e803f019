#include "tests/support/wan/network_namespace.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <thread>

namespace tessel::wan {
namespace {

constexpr int kCapNetAdmin = 12;
constexpr int kCapSysAdmin = 21;

// The effective capability set of this process, from /proc/self/status.
unsigned long long effective_capabilities() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  return 0;
}

}  // namespace

void check_wan_privileges() {
  const unsigned long long caps = effective_capabilities();
  for (auto [bit, name] :
       {std::pair{kCapNetAdmin, "CAP_NET_ADMIN"}, std::pair{kCapSysAdmin, "CAP_SYS_ADMIN"}}) {
    if (!(caps >> bit & 1)) {
      throw WanUnavailable(std::string("the WAN emulator needs ") + name +
                           " to make network namespaces and TUN devices (run it as root)");
    }
  }
  const int tun = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (tun < 0) {
    throw WanUnavailable(std::string("the WAN emulator needs the TUN device: /dev/net/tun: ") +
                         std::strerror(errno) +
                         " (load the tun module; in a container pass --device /dev/net/tun)");
  }
  ::close(tun);
  std::string output;
  if (run_shell("ip -V", output) != 0) {
    throw WanUnavailable(
        "the WAN emulator needs iproute2's `ip` on the PATH (`ip -V` failed: " + output + ")");
  }
}

int run_shell(const std::string& command, std::string& output) {
  output.clear();
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buffer[512];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  const int status = ::pclose(pipe);
  while (!output.empty() && output.back() == '\n') output.pop_back();
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

void run_or_throw(const std::string& command) {
  std::string output;
  const int status = run_shell(command, output);
  if (status != 0) {
    throw std::runtime_error("`" + command + "` failed (exit status " + std::to_string(status) +
                             "): " + output);
  }
}

bool namespace_exists(const std::string& name) {
  struct stat info {};
  return ::stat(("/var/run/netns/" + name).c_str(), &info) == 0;
}

void run_in_namespace(const std::string& name, const std::function<void()>& action) {
  std::exception_ptr failure;
  std::thread inside([&] {
    try {
      const std::string path = "/var/run/netns/" + name;
      const int ns = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0) {
        throw std::runtime_error("cannot open network namespace " + path + ": " +
                                 std::strerror(errno));
      }
      const int entered = ::setns(ns, CLONE_NEWNET);
      const int error = errno;
      ::close(ns);
      if (entered != 0) {
        throw std::runtime_error("cannot enter network namespace " + name + ": " +
                                 std::strerror(error));
      }
      action();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  inside.join();
  if (failure) std::rethrow_exception(failure);
}

int open_tun_in(const std::string& netns, const std::string& device, bool offload) {
  int fd = -1;
  run_in_namespace(netns, [&] {
    fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(std::string("/dev/net/tun: ") + std::strerror(errno));
    ifreq request{};
    request.ifr_flags = static_cast<short>(IFF_TUN | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0));
    std::strncpy(request.ifr_name, device.c_str(), IFNAMSIZ - 1);
    if (::ioctl(fd, TUNSETIFF, &request) != 0) {
      const int error = errno;
      ::close(fd);
      fd = -1;
      throw std::runtime_error("cannot make TUN device " + device + " in network namespace " +
                               netns + ": " + std::strerror(error) +
                               (error == EBUSY ? " (a device of that name exists there)" : ""));
    }
    if (offload &&
        ::ioctl(fd, TUNSETOFFLOAD, static_cast<unsigned long>(TUN_F_CSUM | TUN_F_TSO4)) != 0) {
      const int error = errno;
      ::close(fd);
      fd = -1;
      throw std::runtime_error("cannot turn on TCP segmentation offload of TUN device " + device +
                               " in network namespace " + netns + ": " + std::strerror(error));
    }
  });
  return fd;
}

}  // namespace tessel::wan
