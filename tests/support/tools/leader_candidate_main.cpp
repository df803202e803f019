// tessel-leader-candidate: one leader-election candidate (kube/leader_election.h over a Lease),
// for tests that fail over between processes.
//
//   tessel-leader-candidate --kubeconfig kc.yaml --namespace ns --lease lock --identity a
//       --lease-duration 2 --renew-deadline 1.5 --retry-period 0.25
//
// It prints one line per change on stdout, flushed at once: "new leader <holder>" when it sees
// the lease name a new holder (itself included), "leading <identity>" when it acquires the
// lease, "stopped leading <identity>" when it stops. SIGINT or SIGTERM stop it cleanly: it
// stops leading, releases the lease so that another candidate takes over at once, and exits 0.
// When it loses the lease on its own (could not renew in time) it exits 1, as a client-go
// process does.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <exception>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/leader_election.h"
#include "kube/lease_client.h"

namespace {

using tessel::kube::Clock;

// Whole output lines, one writer at a time: the callbacks run on the elector's thread, errors
// are reported from main.
std::mutex output_mutex;

void say(const std::string& line) {
  std::lock_guard lock(output_mutex);
  std::cout << line << std::endl;
}

Clock::duration seconds(double value) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(value));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs one leader-election candidate on a coordination.k8s.io/v1 Lease",
               "tessel-leader-candidate"};
  std::string kubeconfig;
  tessel::kube::LeaderElectionConfig config;
  double lease_duration = 15;
  double renew_deadline = 0;  // 0: two thirds of the lease duration
  double retry_period = 0;    // 0: a fifth of the lease duration
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig of the cluster")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--namespace", config.lease_namespace, "namespace of the Lease")->required();
  app.add_option("--lease", config.lease_name, "name of the Lease")->required();
  app.add_option("--identity", config.identity, "this candidate's identity")->required();
  app.add_option("--lease-duration", lease_duration,
                 "seconds others wait after the lease last changed (whole seconds)")
      ->check(CLI::PositiveNumber);
  app.add_option("--renew-deadline", renew_deadline,
                 "seconds the leader keeps trying to renew before it gives up")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--retry-period", retry_period, "seconds between attempts")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  if (lease_duration != std::floor(lease_duration)) {
    std::cerr << "tessel-leader-candidate: --lease-duration " << lease_duration
              << " is not a whole number of seconds (Lease.spec.leaseDurationSeconds is an "
                 "integer)\n";
    return 2;
  }
  config.lease_duration = seconds(lease_duration);
  config.renew_deadline = seconds(renew_deadline > 0 ? renew_deadline : lease_duration * 2 / 3);
  config.retry_period = seconds(retry_period > 0 ? retry_period : lease_duration / 5);
  config.release_on_cancel = true;

  // Block the stop signals, and the elector thread's "finished" signal, before any thread
  // starts, so that only main's sigwait receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  try {
    tessel::kube::ClientOptions client_options;
    client_options.user_agent = "tessel-leader-candidate";
    // The elector retries on its own schedule; a request must not outlive the renew deadline.
    client_options.backoff.steps = 1;
    client_options.request_timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(config.renew_deadline);
    client_options.qps = 0;
    const auto client = tessel::kube::Client::from_config(tessel::kube::load_kubeconfig(kubeconfig),
                                                          client_options);
    tessel::kube::RestLeaseClient leases(*client);
    const std::string identity = config.identity;
    tessel::kube::LeaderElector elector(
        leases, config,
        {.on_started_leading = [&] { say("leading " + identity); },
         .on_stopped_leading = [&] { say("stopped leading " + identity); },
         .on_new_leader = [](const std::string& holder) { say("new leader " + holder); }});

    std::thread campaign([&] {
      elector.run();
      kill(getpid(), SIGUSR1);  // tells main that run() returned
    });
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    if (signal_number != SIGUSR1) elector.stop();
    campaign.join();
    if (signal_number == SIGUSR1) {
      std::cerr << "tessel-leader-candidate: " << identity << " lost the lease "
                << config.lease_namespace << "/" << config.lease_name << std::endl;
      return 1;
    }
  } catch (const std::exception& error) {
    std::cerr << "tessel-leader-candidate: " << error.what() << std::endl;
    return 2;
  }
  return 0;
}
