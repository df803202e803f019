// The operator's HTTPS endpoint (the admission webhooks, metrics and probes) behind a small
// interface, so that the HTTP library (cpprestsdk, in maintenance upstream) stays in one file.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessel::server {

struct HttpsRequest {
  std::string method;  // "POST"
  std::string path;    // "/validate"
  std::string body;
};

struct HttpsResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers = {};  // besides Content-Type
};

using HttpsHandler = std::function<HttpsResponse(const HttpsRequest&)>;

// A request body larger than this is answered 413 unread: kube-apiserver's own limit for a
// request, so that no AdmissionReview it sends is refused.
inline constexpr uint64_t kMaxRequestBytes = 3 << 20;

class HttpsServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A server answering on https://<host>:<port>/ until destroyed.
class HttpsServer {
 public:
  virtual ~HttpsServer() = default;
  virtual std::string url() const = 0;
};

// Serves `handler` over TLS with the PEM certificate chain and key. A handler that throws is
// answered 500 with the exception's message. Throws HttpsServerError naming the address and the
// cause (a bad certificate or key, the port taken).
std::unique_ptr<HttpsServer> start_https_server(const std::string& host, uint16_t port,
                                                const std::string& cert_pem,
                                                const std::string& key_pem, HttpsHandler handler);

}  // namespace tessel::server
