// Kept apart from client.cpp so that the client links without libcurl where a test supplies
// its own transport.
#include "kube/client.h"

namespace tessel::kube {

std::shared_ptr<Client> Client::from_config(const ClusterConfig& config, ClientOptions options) {
  TransportOptions transport;
  transport.user_agent = options.user_agent;
  if (options.request_timeout.count() > 0) transport.request_timeout = options.request_timeout;
  return std::make_shared<Client>(make_curl_transport(config, transport), std::move(options));
}

}  // namespace tessel::kube
