// The one seam between tessel's Kubernetes client and an HTTP library: a request goes in, a
// response (or a stream of body bytes) comes out. The libcurl implementation is
// make_curl_transport(); tests may put their own behind the same interface.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kube/config.h"

namespace tessel::kube {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "GET";
  std::string target;  // path and query: "/api/v1/namespaces/default/pods?limit=10"
  HeaderList headers;  // besides those the transport adds (Authorization, User-Agent)
  std::string body;
  // Whole-request timeout for round_trip; for stream, the longest silence between two
  // received chunks. Zero: the transport's default.
  std::chrono::milliseconds timeout{0};
};

struct HttpResponse {
  int status = 0;
  HeaderList headers;  // names as received
  std::string body;    // empty for a 2xx stream: the bytes went to on_data
  // Case-insensitive lookup of the first header of that name.
  std::optional<std::string> header(std::string_view name) const;
};

// No HTTP answer: the connection failed or timed out. The flags are what the retry policy
// (kube/retry.h) needs to decide whether the request may be repeated: a permanent failure (the
// server's certificate failed verification, a malformed URL) is one that waiting does not
// cure. The message names the server and the cause, never a credential.
class TransportError : public std::runtime_error {
 public:
  TransportError(const std::string& message, bool timed_out, bool request_sent,
                 bool permanent = false)
      : std::runtime_error(message),
        timed_out_(timed_out),
        request_sent_(request_sent),
        permanent_(permanent) {}
  bool timed_out() const { return timed_out_; }
  bool request_sent() const { return request_sent_; }
  bool permanent() const { return permanent_; }

 private:
  bool timed_out_;
  bool request_sent_;
  bool permanent_;
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;

  // One request and its whole response. Throws TransportError when no answer came.
  virtual HttpResponse round_trip(const HttpRequest& request) = 0;

  // A request whose 2xx body is handed to on_data as it arrives (a watch). Returns when the
  // server ends the body, on_data returns false, or `stop` is requested (then promptly, even
  // while no bytes arrive). A non-2xx answer is returned whole, with its body, and on_data is
  // not called. Throws TransportError when no answer came, or when the connection broke or
  // went silent past request.timeout mid-body.
  virtual HttpResponse stream(const HttpRequest& request,
                              const std::function<bool(std::string_view)>& on_data,
                              std::stop_token stop) = 0;
};

struct TransportOptions {
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{30'000};  // default for round_trip
  std::string user_agent = "tessel";
};

// libcurl: TLS verified against config.ca_pem (or the system store) unless the config says
// insecure; client certificate and key from memory; the bearer token re-read through
// BearerToken when it comes from a file; HTTP keep-alive with connections reused across
// requests (a pool shared by threads). Throws KubeConfigError for a config it cannot use.
std::unique_ptr<HttpTransport> make_curl_transport(const ClusterConfig& config,
                                                   const TransportOptions& options = {});

}  // namespace tessel::kube
