#include "bench/kube/bench_cluster.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <vector>

namespace tessel::bench {
namespace {

testing::ApiTestServerOptions server_options(bool tls) {
  testing::ApiTestServerOptions options;
  options.tls = tls;
  // The benchmark writes tens of thousands of versions in a minute; a real server's watch
  // window is time-based (minutes of history), so keep every version watchable here too.
  options.watch_window = 1'000'000;
  return options;
}

kube::ClientOptions unlimited_options() {
  kube::ClientOptions options;
  options.qps = 0;  // measure the client and server, not a rate limit
  options.user_agent = "tessel-kube-bench";
  options.logger = std::make_shared<const kube::Logger>("kube-bench", kube::LogLevel::kWarning);
  return options;
}

}  // namespace

std::string config_map_name(int index) {
  char name[32];
  std::snprintf(name, sizeof name, "bench-%05d", index);
  return name;
}

nlohmann::json config_map(int index) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata",
           {{"name", config_map_name(index)},
            {"namespace", kBenchNamespace},
            {"labels",
             {{"app.kubernetes.io/name", "kube-bench"}, {"shard", std::to_string(index % 16)}}}}},
          {"data",
           {{"model", "gpt2-124m"},
            {"replicas", std::to_string(1 + index % 8)},
            {"schedule", "1F1B"},
            {"note", "a benchmark object of about the size of a small TrainingJob spec"}}}};
}

BenchCluster::BenchCluster(bool tls)
    : server_(server_options(tls)),
      directory_((std::filesystem::temp_directory_path() /
                  ("tessel-kube-bench-" + std::to_string(::getpid()) + (tls ? "-https" : "-http")))
                     .string()) {
  std::filesystem::create_directories(directory_);
  config_ = kube::load_kubeconfig(server_.write_kubeconfig(directory_ + "/kubeconfig"));
  client_ = new_client();
  config_maps_ = *kube::ResourceRegistry().find_resource("", "configmaps");
  const kube::ResourceInfo namespaces = *kube::ResourceRegistry().find_resource("", "namespaces");
  client_->create(
      namespaces, "",
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kBenchNamespace}}}});
}

BenchCluster::~BenchCluster() { std::filesystem::remove_all(directory_); }

std::shared_ptr<kube::Client> BenchCluster::new_client() const {
  return kube::Client::from_config(config_, unlimited_options());
}

BenchCluster::Creation BenchCluster::create_config_maps(int count, int threads) {
  if (count < 0 || threads < 1)
    throw std::invalid_argument("create_config_maps: bad count or threads");
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::vector<std::future<std::vector<double>>> writers;
  for (int t = 0; t < threads; ++t) {
    writers.push_back(std::async(std::launch::async, [this, t, count, threads] {
      std::vector<double> round_trips;
      for (int i = t; i < count; i += threads) {
        const auto sent = Clock::now();
        client_->create(config_maps_, kBenchNamespace, config_map(i));
        round_trips.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
      }
      return round_trips;
    }));
  }
  Creation creation;
  for (auto& writer : writers) {
    const std::vector<double> round_trips = writer.get();  // rethrows a writer's failure
    creation.round_trip_ms.insert(creation.round_trip_ms.end(), round_trips.begin(),
                                  round_trips.end());
  }
  creation.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return creation;
}

}  // namespace tessel::bench
