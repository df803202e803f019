// LIST of the Kubernetes API test server: label and field selectors, resourceVersion
// semantics (unset, 0, NotOlderThan, Exact), limit/continue pagination over a consistent
// snapshot, and the list body as kube-apiserver writes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/api_field_selector.h"
#include "tests/support/api_label_selector.h"
#include "tests/support/api_resources.h"
#include "tests/support/api_router.h"
#include "tests/support/api_store.h"

namespace tessel::testing {

// The labelSelector and fieldSelector of a list or watch, checked against the field labels the
// resource supports (ApiError 400 otherwise).
class ObjectFilter {
 public:
  ObjectFilter(const ResourceType& type, const RequestOptions& options);
  bool matches(const nlohmann::json& object) const;
  bool empty() const { return labels_.empty() && fields_.empty(); }

 private:
  LabelSelector labels_;
  FieldSelector fields_;
};

struct ListResult {
  std::int64_t resource_version = 0;
  std::vector<nlohmann::json> items;  // with apiVersion and kind
  std::string continue_token;
  std::optional<std::int64_t> remaining_item_count;
};

// Throws ApiError: 400 for bad selectors, resourceVersions or continue tokens, 410 when the
// snapshot asked for is older than the history window, 504 when the resourceVersion asked
// for is not reached within `future_wait`.
ListResult list_collection(const ObjectStore& store, const ResourceType& type,
                           const std::string& namespace_, const RequestOptions& options,
                           std::chrono::milliseconds future_wait);

// The <Kind>List body: custom resources' items keep apiVersion and kind and the list always
// has metadata.continue; built-in lists drop both from the items and omit an empty continue.
nlohmann::json list_body(const ResourceType& type, const ListResult& result);

// The opaque continue token: base64url of {"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}.
std::string encode_continue_token(std::int64_t resource_version, const std::string& start_key);

// A resourceVersion query value; ApiError 400 when it is not a decimal integer.
std::int64_t parse_resource_version(const std::string& value);

}  // namespace tessel::testing
