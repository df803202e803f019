// tessel-test-apiserver: runs one Kubernetes API test server (tests/support/api_test_server.h)
// until SIGINT or SIGTERM, for tests that drive the real kubectl or run several processes.
//
//   tessel-test-apiserver --crds crds/ --kubeconfig-out /tmp/kc.yaml --port-file /tmp/port
//
// It prints the server's URL on stdout once it serves; --port-file gets the port (written
// whole, then renamed into place, so a reader never sees a partial file).
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/support/api_test_server.h"

namespace {

void write_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + temporary);
  }
  std::filesystem::rename(temporary, path);
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
  app.add_option("--crds", crd_directory, "serve the CustomResourceDefinitions of this directory")
      ->check(CLI::ExistingDirectory);
  app.add_option("--kubeconfig-out", kubeconfig_out,
                 "write a kubeconfig for the server (admin token) to this path");
  app.add_option("--watch-window", watch_window,
                 "resourceVersions a watch may lag behind before it gets 410 Gone")
      ->check(CLI::PositiveNumber);
  app.add_option("--port-file", port_file, "write the port the server listens on to this path");
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
    tessel::testing::ApiTestServer server(options);
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
