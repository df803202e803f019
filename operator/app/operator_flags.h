// The tessel-operator's command line: every flag, its default, and the checks that refuse a
// bad value before anything starts (each error names the flag).
#pragma once

#include <chrono>
#include <string>

#include "api/prober_peers.h"

namespace tessel::app {

struct OperatorFlags {
  std::string kubeconfig;  // empty: in-cluster (or $KUBECONFIG, ~/.kube/config)
  std::string namespace_name = "tessel-system";
  std::string hub_id = "hub";
  std::string watch_namespace;  // empty: TrainingJobs of every namespace
  std::string member_selector;  // "key=value,...": only these MemberClusters; empty: all
  std::string prober_namespace = "tessel-system";      // the probers' namespace in members
  std::string prober_selector = api::kProberSelector;  // the prober pods' labels there
  bool leader_elect = true;
  std::string lease_name = "tessel-operator";
  int lease_duration_s = 15, renew_deadline_s = 10, retry_period_s = 2;
  std::string identity;  // empty: hostname + random suffix
  // This replica's Pod (default $POD_NAME): the leader labels it tessel.dev/stage-service=serving,
  // which the stage Service selects. Empty: no label (one replica without a Service).
  std::string pod_name;
  std::string https_address = "0.0.0.0:9443";
  std::string tls_cert_file, tls_key_file, tls_ca_file;
  std::string stage_service_address = "0.0.0.0:7443";
  std::string stage_service_advertise;  // required: what stage pods dial
  std::string stage_image = "tessel/stage:0.1.0";
  std::string data_root = "/usr/share/tessel/examples/trainingjobs";
  int workers = 4;
  double status_interval_s = 2;
  double member_resync_s = 30;
  std::string log_level = "info";
};

// Parses argv. Returns false after printing --help (exit 0); throws std::invalid_argument
// naming the flag for a bad value (the caller prints it and exits 2).
bool parse_operator_flags(int argc, char** argv, OperatorFlags& flags);

// host and port of "HOST:PORT" ("[::1]:9443" too); throws std::invalid_argument naming `flag`.
std::pair<std::string, int> split_address(const std::string& address, const std::string& flag);

}  // namespace tessel::app
