// tessel-operator as its own process, as a replica of the hub chart's Deployment runs: started with
// the args and env its container would get (operator_pod.h makes them from the Deployment), its
// named container ports mapped onto loopback ports, its stdout and stderr in a log file the test
// prints when it fails, killed (SIGKILL, as a crashed pod) or ended (SIGTERM) by the test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessel::testing {

// The operator binary of this build, or nullopt (with why) when it has not been built: the
// e2e cases then skip, saying so.
struct OperatorBinary {
  std::optional<std::string> path;
  std::string why_missing;
};
OperatorBinary find_operator_binary();

struct OperatorSettings {
  std::string binary;
  std::string identity;  // the replica's Pod name ($(POD_NAME)): its identity in the Lease
  // The container's args, $(VAR)s expanded and mounted files mapped (operator_pod.h).
  std::vector<std::string> args;
  // Set in the process's environment on top of the test's own (the container's env, and
  // KUBECONFIG in place of the in-cluster service-account files).
  std::map<std::string, std::string> env;
  // The container's named ports, name -> containerPort; "https" serves /healthz.
  std::map<std::string, int> ports;
  std::string tls_ca_file;  // the CA that verifies the replica's /healthz (its serving CA)
  std::string log_file;     // stdout and stderr, appended
};

// The command line for these settings with each named port at the loopback port `host_ports`
// gives it: an arg's value "0.0.0.0:<containerPort>" (where it listens) or
// "127.0.0.1:<containerPort>" (the pod's own address, where it is reached) becomes
// "127.0.0.1:<host port>". Throws std::runtime_error naming a port `host_ports` lacks.
std::vector<std::string> operator_command_line(const OperatorSettings& settings,
                                               const std::map<std::string, int>& host_ports);

// How long the operator has to answer /healthz after it starts.
inline constexpr std::chrono::seconds kOperatorStartTimeout{60};

class OperatorProcess {
 public:
  // Starts the operator with a free loopback port for each named container port and returns once
  // GET /healthz on the "https" one answers 200
  // (verified with the settings' CA). A port taken between being picked and being bound (another
  // test's process) makes the operator exit: it is started again on other ports, up to 3 times.
  // Throws std::runtime_error with the log's tail when it exits otherwise or does not answer
  // within kOperatorStartTimeout.
  explicit OperatorProcess(OperatorSettings settings);
  // The same on these loopback ports (a container restarted in its pod keeps the pod's
  // address): a port still held by the process before is waited for, up to
  // kOperatorStartTimeout.
  OperatorProcess(OperatorSettings settings, std::map<std::string, int> host_ports);
  ~OperatorProcess();  // SIGKILL to its process group, reaped
  OperatorProcess(const OperatorProcess&) = delete;
  OperatorProcess& operator=(const OperatorProcess&) = delete;

  // Sends `signal` to the operator's process group and waits up to `grace` for it to exit
  // (then SIGKILL). Returns its exit status (128 + signal when a signal ended it).
  int stop(int signal, std::chrono::seconds grace = std::chrono::seconds(10));
  bool running();
  // Sends `signal` to the operator's process group and returns at once (SIGSTOP, SIGCONT).
  void send_signal(int signal);

  const OperatorSettings& settings() const { return settings_; }
  // The loopback port of each named container port (what the Endpoints of its Services name).
  const std::map<std::string, int>& host_ports() const { return host_ports_; }
  int https_port() const;
  int stage_port() const;
  std::string log() const;  // the whole log file

 private:
  // Spawns the operator; false when it exited before /healthz answered and what it logged says
  // the address was in use. Picks free ports first unless fixed_ports_.
  bool launch();

  OperatorSettings settings_;
  bool fixed_ports_ = false;
  pid_t pid_ = -1;
  int exit_status_ = -1;
  std::map<std::string, int> host_ports_;
};

// The last `lines` lines of a text (for failure messages).
std::string tail_of(const std::string& text, size_t lines = 60);

// GET url with TLS verified by ca_pem; the HTTP status, or 0 when no answer came.
long https_get_status(const std::string& url, const std::string& ca_pem);

}  // namespace tessel::testing
