// Everything the operator serves over its one HTTPS server (--https-address): the admission
// webhooks (/validate, /mutate), /metrics, /healthz and /readyz.
#pragma once

#include "operator/server/https_router.h"
#include "operator/server/metrics.h"
#include "operator/server/probes.h"

namespace tessel::server {

// The routes, ready for start_https_server. `metrics` and `readiness` must outlive the server.
HttpsRouter operator_endpoint(const MetricsRegistry& metrics, const Readiness& readiness);

}  // namespace tessel::server
