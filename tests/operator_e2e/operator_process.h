// tessel-operator as its own process, as it runs in a hub: started with the flags of the
// operator's plan on loopback ports, its stdout and stderr in a log file the test prints when it
// fails, killed (SIGKILL, as a crashed pod) or ended (SIGTERM) by the test.
#pragma once

#include <sys/types.h>

#include <chrono>
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
  std::string hub_kubeconfig;  // --kubeconfig
  std::string namespace_;      // --namespace: member kubeconfig Secrets, the Lease
  std::string hub_id = "hub";  // --hub-id
  // --watch-namespace is namespace_ (the run's jobs only); --member-selector this, when set
  // (the run's MemberClusters only): runs sharing a real hub do not take each other's work.
  // --prober-namespace is namespace_ too: the run's probers, in its namespace of each member.
  std::string member_selector;
  std::string identity;            // --identity (leader election)
  std::string tls_cert_file;       // --tls-cert-file (SANs 127.0.0.1, localhost)
  std::string tls_key_file;        // --tls-key-file
  std::string tls_ca_file;         // --tls-ca-file
  std::string data_root;           // --data-root
  std::string log_file;            // stdout and stderr, appended
  int lease_duration_seconds = 6;  // short, so that a take-over fits in a test
  int renew_deadline_seconds = 4;
  int retry_period_seconds = 1;
  int status_interval_seconds = 1;
};

// The command line for these settings with the HTTPS server (webhook, metrics, probes) on
// 127.0.0.1:https_port and the stage service bound and advertised on 127.0.0.1:stage_port.
std::vector<std::string> operator_command_line(const OperatorSettings& settings, int https_port,
                                               int stage_port);

// How long the operator has to answer /healthz after it starts.
inline constexpr std::chrono::seconds kOperatorStartTimeout{60};

class OperatorProcess {
 public:
  // Starts the operator on two free loopback ports and returns once GET /healthz answers 200
  // (verified with the settings' CA). A port taken between being picked and being bound (another
  // test's process) makes the operator exit: it is started again on other ports, up to 3 times.
  // Throws std::runtime_error with the log's tail when it exits otherwise or does not answer
  // within kOperatorStartTimeout.
  explicit OperatorProcess(OperatorSettings settings);
  ~OperatorProcess();  // SIGKILL to its process group, reaped
  OperatorProcess(const OperatorProcess&) = delete;
  OperatorProcess& operator=(const OperatorProcess&) = delete;

  // Sends `signal` to the operator's process group and waits up to `grace` for it to exit
  // (then SIGKILL). Returns its exit status (128 + signal when a signal ended it).
  int stop(int signal, std::chrono::seconds grace = std::chrono::seconds(10));
  bool running();

  const OperatorSettings& settings() const { return settings_; }
  int https_port() const { return https_port_; }
  int stage_port() const { return stage_port_; }
  std::string webhook_url() const;  // https://127.0.0.1:<https port>/validate
  std::string log() const;          // the whole log file

 private:
  // Spawns the operator; false when it exited before /healthz answered and its log says the
  // address was in use.
  bool launch();

  OperatorSettings settings_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
  int https_port_ = 0;
  int stage_port_ = 0;
};

// The last `lines` lines of a text (for failure messages).
std::string tail_of(const std::string& text, size_t lines = 60);

// GET url with TLS verified by ca_pem; the HTTP status, or 0 when no answer came.
long https_get_status(const std::string& url, const std::string& ca_pem);

}  // namespace tessel::testing
