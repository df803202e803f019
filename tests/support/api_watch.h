// WATCH of the Kubernetes API test server: a chunked stream of {"type","object"} lines from a
// resourceVersion (or starting with a synthetic ADDED per existing object), with selector
// transitions (an object leaving the selection is DELETED, one entering it ADDED), bookmarks,
// 410 ERROR events for expired resourceVersions, timeoutSeconds, and Table or
// PartialObjectMetadata objects when the Accept header asks for them. Each watch reads its own
// queue, so a slow watcher never blocks a writer.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tests/support/api_resources.h"
#include "tests/support/api_router.h"
#include "tests/support/api_store.h"
#include "tests/support/http_server.h"

namespace tessel::testing {

struct WatchSettings {
  std::chrono::seconds default_timeout{1800};
  std::chrono::milliseconds bookmark_interval{1000};
};

// Checks the request (selectors: ApiError 400) and returns the streamed response.
HttpServerResponse watch_response(ObjectStore& store, std::shared_ptr<const ResourceType> type,
                                  const std::string& namespace_, const RequestOptions& options,
                                  const Representation& representation,
                                  const WatchSettings& settings);

}  // namespace tessel::testing
