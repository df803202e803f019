#include "operator/server/probes.h"

#include <utility>

namespace tessel::server {

Readiness::Readiness(std::string reason) : reason_(std::move(reason)) {}

void Readiness::set_ready() {
  std::lock_guard lock(mutex_);
  reason_.reset();
}

void Readiness::set_not_ready(std::string reason) {
  std::lock_guard lock(mutex_);
  reason_ = std::move(reason);
}

std::optional<std::string> Readiness::not_ready_reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

void add_probe_routes(HttpsRouter& router, const MetricsRegistry& metrics,
                      const Readiness& readiness) {
  router.route("GET", "/healthz", [](const HttpsRequest&) {
    return HttpsResponse{200, "text/plain", "ok\n"};
  });
  router.route("GET", "/readyz", [&readiness](const HttpsRequest&) {
    if (const std::optional<std::string> reason = readiness.not_ready_reason())
      return HttpsResponse{503, "text/plain", "not ready: " + *reason + "\n"};
    return HttpsResponse{200, "text/plain", "ok\n"};
  });
  router.route("GET", "/metrics", [&metrics](const HttpsRequest&) {
    return HttpsResponse{200, std::string(kMetricsContentType), metrics.render()};
  });
}

}  // namespace tessel::server
