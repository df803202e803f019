#include "operator/server/https_router.h"

#include <stdexcept>
#include <utility>

namespace tessel::server {

HttpsRouter& HttpsRouter::route(const std::string& method, const std::string& path,
                                HttpsHandler handler) {
  if (!routes_[path].try_emplace(method, std::move(handler)).second)
    throw std::invalid_argument("HTTPS route " + method + " " + path + " is defined twice");
  return *this;
}

HttpsResponse HttpsRouter::operator()(const HttpsRequest& request) const {
  const auto path = routes_.find(request.path);
  if (path == routes_.end()) return {404, "text/plain", request.path + ": not found\n"};
  const auto handler = path->second.find(request.method);
  if (handler != path->second.end()) return handler->second(request);
  std::string allowed;
  for (const auto& [method, unused] : path->second)
    allowed += (allowed.empty() ? "" : ", ") + method;
  return {405,
          "text/plain",
          request.path + ": " + request.method + " is not served; use " + allowed + "\n",
          {{"Allow", allowed}}};
}

}  // namespace tessel::server
