// tessel-test-apiserver: runs one Kubernetes API test server (tests/support/api_test_server.h)
// until SIGINT or SIGTERM, for tests that drive the real kubectl or run several processes.
//
//   tessel-test-apiserver --crds crds/ --kubeconfig-out /tmp/kc.yaml --port-file /tmp/port
//
// It prints the server's URL on stdout once it serves; --port-file gets the port (written
// whole, then renamed into place, so a reader never sees a partial file).
//
// Pointed at by TESSEL_TEST_KUBECONFIG, it stands in for a real cluster: the tests then take the
// real-cluster path (their own namespaces, no fault injection). Two options bring it closer to
// one: --bookmark-interval 60 (kube-apiserver sends the first bookmark after about a minute) and
// --background-writes N (N Lease renewals a second, as a cluster's controllers and kubelets
// keep making, so that resourceVersions jump between a test's own writes).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/leader_election.h"
#include "tests/support/api_test_server.h"

namespace {

using nlohmann::json;

void write_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + temporary);
  }
  std::filesystem::rename(temporary, path);
}

// Renews the Lease kube-system/background-writer `per_second` times a second until stopped.
std::jthread start_background_writes(const tessel::testing::ApiTestServer& server,
                                     double per_second) {
  const std::string kubeconfig = std::filesystem::temp_directory_path() /
                                 ("tessel-test-apiserver-" + std::to_string(::getpid()));
  server.write_kubeconfig(kubeconfig);
  tessel::kube::ClientOptions options;
  options.qps = 0;
  options.user_agent = "background-writer";
  std::shared_ptr<tessel::kube::Client> client =
      tessel::kube::Client::from_config(tessel::kube::load_kubeconfig(kubeconfig), options);
  std::filesystem::remove(kubeconfig);
  const tessel::kube::ResourceInfo leases = client->resource_for("coordination.k8s.io/v1", "Lease");
  client->create(leases, "kube-system",
                 {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", "background-writer"}, {"namespace", "kube-system"}}},
                  {"spec", {{"holderIdentity", "background-writer"}}}});
  const auto period = std::chrono::duration<double>(1.0 / per_second);
  return std::jthread([client, leases, period](std::stop_token stop) {
    while (!stop.stop_requested()) {
      const std::string now = tessel::kube::format_micro_time(std::chrono::system_clock::now());
      client->patch(leases, "kube-system", "background-writer", tessel::kube::PatchType::kMerge,
                    {{"spec", {{"renewTime", now}}}});
      std::this_thread::sleep_for(period);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs a Kubernetes API test server until SIGINT or SIGTERM",
               "tessel-test-apiserver"};
  bool plain_http = false;
  std::string crd_directory;
  std::string kubeconfig_out;
  std::string port_file;
  std::int64_t watch_window = tessel::testing::ApiTestServerOptions{}.watch_window;
  app.add_flag("--http", plain_http, "serve plain HTTP instead of HTTPS");
  bool rbac = false;
  app.add_flag("--rbac", rbac,
               "authorize as kube-apiserver's RBAC does, with the bootstrap policy (default: "
               "every authenticated user may do everything)");
  app.add_option("--crds", crd_directory, "serve the CustomResourceDefinitions of this directory")
      ->check(CLI::ExistingDirectory);
  app.add_option("--kubeconfig-out", kubeconfig_out,
                 "write a kubeconfig for the server (admin token) to this path");
  app.add_option("--watch-window", watch_window,
                 "resourceVersions a watch may lag behind before it gets 410 Gone")
      ->check(CLI::PositiveNumber);
  app.add_option("--port-file", port_file, "write the port the server listens on to this path");
  double bookmark_seconds = 0;
  app.add_option("--bookmark-interval", bookmark_seconds,
                 "seconds between the bookmarks of a watch that allows them (default: the test "
                 "server's 1 s; kube-apiserver: about 60)")
      ->check(CLI::PositiveNumber);
  double background_writes = 0;
  app.add_option("--background-writes", background_writes,
                 "Lease renewals a second in kube-system, as a real cluster makes")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  // Block the stop signals before any thread starts, so that only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    tessel::testing::ApiTestServerOptions options;
    options.tls = !plain_http;
    options.crd_directory = crd_directory;
    options.watch_window = watch_window;
    if (rbac) options.authorization = tessel::testing::Authorization::kRbac;
    if (bookmark_seconds > 0) {
      options.bookmark_interval =
          std::chrono::milliseconds(static_cast<long>(bookmark_seconds * 1000));
    }
    tessel::testing::ApiTestServer server(options);
    std::jthread background;
    if (background_writes > 0) background = start_background_writes(server, background_writes);
    if (!kubeconfig_out.empty()) server.write_kubeconfig(kubeconfig_out);
    const std::string url = server.url();
    if (!port_file.empty()) write_atomically(port_file, url.substr(url.rfind(':') + 1) + "\n");
    std::cout << url << std::endl;
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
  } catch (const std::exception& error) {
    std::cerr << "tessel-test-apiserver: " << error.what() << std::endl;
    return 1;
  }
  return 0;
}
