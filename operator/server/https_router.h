// Routes the requests of the operator's one HTTPS server (operator/server/https_server.h) by path
// and method, so that the webhooks, /metrics and the probes share it: a path with no route is
// answered 404, a method its path does not serve 405 with an Allow header.
#pragma once

#include <map>
#include <string>

#include "operator/server/https_server.h"

namespace tessel::server {

class HttpsRouter {
 public:
  // Serves `method` requests for `path` (exact; the query is not part of it) with `handler`.
  // Throws std::invalid_argument when that method of that path already has a handler.
  HttpsRouter& route(const std::string& method, const std::string& path, HttpsHandler handler);

  // What the route answers, or 404 / 405. Copyable into an HttpsHandler.
  HttpsResponse operator()(const HttpsRequest& request) const;

 private:
  std::map<std::string, std::map<std::string, HttpsHandler>> routes_;  // path -> method -> handler
};

}  // namespace tessel::server
