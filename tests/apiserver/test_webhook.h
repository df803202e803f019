// An admission webhook for tests: an HTTPS server on a loopback port with a CA of its own,
// recording every AdmissionReview it receives and answering with what the test says.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kube/base64.h"
#include "tests/support/http_server.h"

namespace tessel::testing {

class TestWebhook {
 public:
  // The AdmissionReview's `response` for a request (uid, apiVersion and kind are filled in).
  using Answer = std::function<nlohmann::json(const nlohmann::json& request)>;

  // dns_names: extra names the certificate is valid for ("<service>.<namespace>.svc").
  explicit TestWebhook(const std::vector<std::string>& dns_names = {})
      : certificate_(authority_.issue_server(dns_names)),
        server_([this](const HttpServerRequest& request) { return serve(request); },
                TlsIdentity{certificate_.cert_pem, certificate_.key_pem, ""}) {}

  int port() const { return server_.port(); }
  std::string url(const std::string& path) const {
    return "https://127.0.0.1:" + std::to_string(port()) + path;
  }
  // The CA that signed the certificate, base64 as clientConfig.caBundle takes it.
  std::string ca_bundle() const { return kube::base64_encode(authority_.ca_pem()); }

  void answer(Answer answer) {
    std::lock_guard lock(mutex_);
    answer_ = std::move(answer);
  }
  // Every request waits this long before it is answered.
  void delay(std::chrono::milliseconds delay) {
    std::lock_guard lock(mutex_);
    delay_ = delay;
  }
  std::vector<nlohmann::json> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  // Request targets: "/validate?timeout=10s".
  std::vector<std::string> targets() const {
    std::lock_guard lock(mutex_);
    return targets_;
  }

  static nlohmann::json allow(const nlohmann::json&) { return {{"allowed", true}}; }

 private:
  HttpServerResponse serve(const HttpServerRequest& request) {
    const nlohmann::json review = nlohmann::json::parse(request.body, nullptr, false);
    Answer answer;
    std::chrono::milliseconds delay;
    {
      std::lock_guard lock(mutex_);
      targets_.push_back(request.target);
      requests_.push_back(review.is_object() ? review.value("request", nlohmann::json())
                                             : nlohmann::json());
      answer = answer_;
      delay = delay_;
    }
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    HttpServerResponse response;
    response.headers.set("Content-Type", "application/json");
    if (!review.is_object() || !review.contains("request")) {
      response.status = 400;
      response.body = "not an AdmissionReview";
      return response;
    }
    nlohmann::json answered = answer(review["request"]);
    answered["uid"] = review["request"].value("uid", "");
    response.body = nlohmann::json{
        {"apiVersion", "admission.k8s.io/v1"},
        {"kind", "AdmissionReview"},
        {"response",
         answered}}.dump();
    return response;
  }

  TestCertificateAuthority authority_;
  TestCertificate certificate_;
  mutable std::mutex mutex_;
  Answer answer_ = allow;
  std::chrono::milliseconds delay_{0};
  std::vector<nlohmann::json> requests_;
  std::vector<std::string> targets_;
  HttpServer server_;  // last: stopped before what its handler uses
};

// One webhook entry of a configuration, sent to `url` (or a clientConfig given whole).
inline nlohmann::json webhook_entry(const std::string& name, const nlohmann::json& client_config,
                                    const std::vector<nlohmann::json>& rules) {
  return {{"name", name},
          {"clientConfig", client_config},
          {"rules", rules},
          {"sideEffects", "None"},
          {"admissionReviewVersions", {"v1"}}};
}

inline nlohmann::json rule(const std::vector<std::string>& operations, const std::string& group,
                           const std::string& version, const std::vector<std::string>& resources) {
  return {{"operations", operations},
          {"apiGroups", {group}},
          {"apiVersions", {version}},
          {"resources", resources}};
}

inline nlohmann::json webhook_configuration(const std::string& kind, const std::string& name,
                                            const std::vector<nlohmann::json>& webhooks) {
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", kind},
          {"metadata", {{"name", name}}},
          {"webhooks", webhooks}};
}

}  // namespace tessel::testing
