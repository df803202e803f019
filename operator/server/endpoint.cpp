#include "operator/server/endpoint.h"

#include "operator/server/webhook.h"

namespace tessel::server {

HttpsRouter operator_endpoint(const MetricsRegistry& metrics, const Readiness& readiness) {
  HttpsRouter router;
  add_webhook_routes(router);
  add_probe_routes(router, metrics, readiness);
  return router;
}

}  // namespace tessel::server
