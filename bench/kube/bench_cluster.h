// An in-process API test server (HTTP or HTTPS) with a namespace full of ConfigMaps, and a
// client that talks to it through a kubeconfig, as a controller would.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/resource.h"
#include "tests/support/api_test_server.h"

namespace tessel::bench {

// The namespace the benchmark objects live in.
inline constexpr const char* kBenchNamespace = "bench";

class BenchCluster {
 public:
  // Starts the server (its kubeconfig goes to a temporary directory) and creates the namespace.
  explicit BenchCluster(bool tls);
  ~BenchCluster();  // removes the temporary directory
  BenchCluster(const BenchCluster&) = delete;
  BenchCluster& operator=(const BenchCluster&) = delete;

  // Creates ConfigMaps bench-00000 ... from `threads` threads sharing the client.
  struct Creation {
    double seconds = 0;                 // all of them
    std::vector<double> round_trip_ms;  // each create, in no particular order
  };
  Creation create_config_maps(int count, int threads);

  // A new client with no rate limit (each informer or writer may have its own).
  std::shared_ptr<kube::Client> new_client() const;

  kube::Client& client() const { return *client_; }
  const kube::ResourceInfo& config_maps() const { return config_maps_; }
  testing::ApiTestServer& server() { return server_; }

 private:
  testing::ApiTestServer server_;
  std::string directory_;
  kube::ClusterConfig config_;
  std::shared_ptr<kube::Client> client_;
  kube::ResourceInfo config_maps_;
};

// The name of the i-th benchmark ConfigMap.
std::string config_map_name(int index);

// A ConfigMap of a realistic size (labels, four data keys; about 0.8 KB as the server stores it
// with managedFields).
nlohmann::json config_map(int index);

}  // namespace tessel::bench
