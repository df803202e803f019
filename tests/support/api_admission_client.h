// The HTTPS call kube-apiserver makes to an admission webhook: a POST of an AdmissionReview to
// the webhook's URL (with ?timeout=<n>s appended, as client-go's rest client does), the server
// verified with the configuration's caBundle, cut off after timeoutSeconds. libcurl directly:
// the test server does not use the kube/ client it checks.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace tessel::testing {

struct WebhookEndpoint {
  std::string url;        // what the request is for: "https://svc.ns.svc:443/validate"
  std::string ca_bundle;  // PEM; empty: the system's trust roots
  // Where to connect instead of the URL's host and port (a Service's endpoint), keeping the
  // URL's host for SNI and certificate verification. Empty: the URL's own.
  std::string connect_host;
  int connect_port = 0;
};

struct WebhookReply {
  // The error a Go client reports, worded as kube-apiserver logs it after
  // `failed to call webhook: `, e.g. `Post "https://...?timeout=10s": context deadline
  // exceeded`. Empty when an HTTP response came back.
  std::string error;
  int status = 0;
  std::string body;
};

// Throws nothing: every failure is in the reply's error.
WebhookReply post_admission_review(const WebhookEndpoint& endpoint, const std::string& body,
                                   std::chrono::seconds timeout);

}  // namespace tessel::testing
