#include "tests/operator_e2e/operator_process.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace tessel::testing {
namespace {

constexpr int kLaunchAttempts = 3;

// A port the kernel hands out on 127.0.0.1, released at once for the operator to bind (it may
// be taken meanwhile: OperatorProcess then tries other ports).
class PickedPort {
 public:
  PickedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0)
      throw std::runtime_error(std::string("picking a loopback port: ") + std::strerror(errno));
    port_ = ntohs(address.sin_port);
  }
  ~PickedPort() { ::close(fd_); }
  PickedPort(const PickedPort&) = delete;
  PickedPort& operator=(const PickedPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

int exit_status_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

size_t ignore_body(char*, size_t size, size_t count, void*) { return size * count; }

}  // namespace

OperatorBinary find_operator_binary() {
  const std::string path = TESSEL_OPERATOR_BINARY;
  if (::access(path.c_str(), X_OK) == 0) return {path, ""};
  return {std::nullopt, "the tessel-operator binary is missing (" + path +
                            " does not exist or is not executable): build the target "
                            "tessel-operator"};
}

std::vector<std::string> operator_command_line(const OperatorSettings& s,
                                               const std::map<std::string, int>& host_ports) {
  // "<host>:<containerPort>" -> "127.0.0.1:<host port>", for the pod's own hosts.
  std::map<std::string, std::string> addresses;
  for (const auto& [name, container_port] : s.ports) {
    const auto host = host_ports.find(name);
    if (host == host_ports.end())
      throw std::runtime_error("no loopback port for the operator's container port " + name);
    const std::string mapped = "127.0.0.1:" + std::to_string(host->second);
    for (const char* own : {"0.0.0.0:", "127.0.0.1:"})
      addresses[own + std::to_string(container_port)] = mapped;
  }
  std::vector<std::string> line = {s.binary};
  for (const std::string& arg : s.args) {
    const size_t equals = arg.find('=');
    const auto mapped =
        equals == std::string::npos ? addresses.end() : addresses.find(arg.substr(equals + 1));
    line.push_back(mapped == addresses.end() ? arg : arg.substr(0, equals + 1) + mapped->second);
  }
  return line;
}

OperatorProcess::OperatorProcess(OperatorSettings settings) : settings_(std::move(settings)) {
  for (int attempt = 1; attempt <= kLaunchAttempts; ++attempt)
    if (launch()) return;
  throw std::runtime_error("tessel-operator " + settings_.identity + ": the ports picked for it " +
                           "were taken " + std::to_string(kLaunchAttempts) + " times; log " +
                           settings_.log_file + ":\n" + tail_of(log()));
}

OperatorProcess::~OperatorProcess() {
  if (pid_ > 0) stop(SIGKILL, std::chrono::seconds(5));
}

OperatorProcess::OperatorProcess(OperatorSettings settings, std::map<std::string, int> host_ports)
    : settings_(std::move(settings)), fixed_ports_(true), host_ports_(std::move(host_ports)) {
  const auto deadline = std::chrono::steady_clock::now() + kOperatorStartTimeout;
  while (!launch()) {
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error("tessel-operator " + settings_.identity + ": its ports were still " +
                               "in use after " + std::to_string(kOperatorStartTimeout.count()) +
                               " s; log " + settings_.log_file + ":\n" + tail_of(log()));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void OperatorProcess::send_signal(int signal) {
  if (pid_ > 0) ::kill(-pid_, signal);
}

bool OperatorProcess::launch() {
  // What this launch logs is what follows (the file is appended to across restarts).
  const size_t logged_before = log().size();
  if (!fixed_ports_) {
    // All held until all are picked: different ports.
    std::vector<std::unique_ptr<PickedPort>> picked;
    host_ports_.clear();
    for (const auto& entry : settings_.ports) {
      picked.push_back(std::make_unique<PickedPort>());
      host_ports_[entry.first] = picked.back()->port();
    }
  }
  const std::vector<std::string> argv = operator_command_line(settings_, host_ports_);
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  // The test's environment with the container's variables set over it.
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    if (!settings_.env.count(variable.substr(0, variable.find('='))))
      environment.push_back(variable);
  }
  for (const auto& [name, value] : settings_.env) environment.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (const auto& variable : environment) envp.push_back(const_cast<char*>(variable.c_str()));
  envp.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawnattr_t attributes;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, settings_.log_file.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);  // a group of its own: stop() ends its children too
  const int spawned =
      ::posix_spawn(&pid_, argv[0].c_str(), &files, &attributes, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(spawned));
  }

  const std::string ca = read_file(settings_.tls_ca_file);
  const std::string health = "https://127.0.0.1:" + std::to_string(https_port()) + "/healthz";
  const auto deadline = std::chrono::steady_clock::now() + kOperatorStartTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!running()) {
      const std::string all = log();
      const std::string text = all.substr(std::min(logged_before, all.size()));
      if (text.find("in use") != std::string::npos) return false;
      throw std::runtime_error("tessel-operator " + settings_.identity + " exited with status " +
                               std::to_string(exit_status_) + " before /healthz answered; log " +
                               settings_.log_file + ":\n" + tail_of(text));
    }
    if (https_get_status(health, ca) == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  stop(SIGKILL);
  throw std::runtime_error("tessel-operator " + settings_.identity + ": " + health +
                           " did not answer 200 within " +
                           std::to_string(kOperatorStartTimeout.count()) + " s; log " +
                           settings_.log_file + ":\n" + tail_of(log()));
}

bool OperatorProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_status_ = exit_status_of(status);
    pid_ = -1;
    return false;
  }
  return true;
}

int OperatorProcess::stop(int signal, std::chrono::seconds grace) {
  if (!running()) return exit_status_;
  ::kill(-pid_, signal);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      exit_status_ = exit_status_of(status);
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return exit_status_;
}

int OperatorProcess::https_port() const {
  const auto port = host_ports_.find("https");
  if (port == host_ports_.end())
    throw std::runtime_error("tessel-operator " + settings_.identity +
                             ": its container has no port named https");
  return port->second;
}

int OperatorProcess::stage_port() const {
  const auto port = host_ports_.find("stage");
  return port == host_ports_.end() ? 0 : port->second;
}

std::string OperatorProcess::log() const { return read_file(settings_.log_file); }

std::string tail_of(const std::string& text, size_t lines) {
  size_t start = text.size();
  for (size_t seen = 0; start > 0; --start)
    if (text[start - 1] == '\n' && ++seen > lines) break;
  return text.substr(start);
}

long https_get_status(const std::string& url, const std::string& ca_pem) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return 0;
  curl_blob ca{const_cast<char*>(ca_pem.data()), ca_pem.size(), CURL_BLOB_COPY};
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_CAINFO_BLOB, &ca);
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, ignore_body);
  long status = 0;
  if (curl_easy_perform(curl.get()) != CURLE_OK) return 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
  return status;
}

}  // namespace tessel::testing
