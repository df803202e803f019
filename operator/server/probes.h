// The operator's health endpoints and its metrics page, on the HTTPS server the webhooks use:
//   GET /healthz  200 "ok" while the process serves at all (the kubelet's liveness probe);
//   GET /readyz   200 "ok" once the operator says it is ready (informers synced), else 503
//                 with the reason (the readiness probe: no traffic, no webhook calls before);
//   GET /metrics  the registry in the Prometheus text format 0.0.4.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "operator/server/https_router.h"
#include "operator/server/metrics.h"

namespace tessel::server {

// Whether the operator is ready, and why not. Thread-safe.
class Readiness {
 public:
  explicit Readiness(std::string reason = "starting");
  void set_ready();
  void set_not_ready(std::string reason);
  // nullopt when ready.
  std::optional<std::string> not_ready_reason() const;

 private:
  mutable std::mutex mutex_;
  std::optional<std::string> reason_;
};

// Adds GET /healthz, /readyz and /metrics. `metrics` and `readiness` must outlive the router
// and every handler copied from it.
void add_probe_routes(HttpsRouter& router, const MetricsRegistry& metrics,
                      const Readiness& readiness);

}  // namespace tessel::server
