#include "tests/support/api_list.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "kube/base64.h"
#include "tests/support/api_errors.h"
#include "tests/support/api_object_rules.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

struct ContinueToken {
  std::int64_t resource_version = 0;
  std::string start;  // the first key to list
};

std::string base64url(std::string_view bytes) {
  std::string text = kube::base64_encode(bytes);
  while (!text.empty() && text.back() == '=') text.pop_back();
  std::replace(text.begin(), text.end(), '+', '-');
  std::replace(text.begin(), text.end(), '/', '_');
  return text;
}

ContinueToken decode_continue_token(const std::string& token) {
  std::string text = token;
  std::replace(text.begin(), text.end(), '-', '+');
  std::replace(text.begin(), text.end(), '_', '/');
  while (text.size() % 4 != 0) text += '=';
  const std::optional<std::string> decoded = kube::base64_decode(text);
  if (!decoded) throw bad_request("continue key is not valid: illegal base64 data");
  const json parsed = json::parse(*decoded, nullptr, false);
  if (!parsed.is_object() || parsed.value("v", "") != "meta.k8s.io/v1" || !parsed.contains("rv") ||
      !parsed["rv"].is_number_integer() || !parsed.contains("start") ||
      !parsed["start"].is_string()) {
    throw bad_request(
        "continue key is not valid: incorrect encoded start resourceVersion "
        "(version meta.k8s.io/v1)");
  }
  return {parsed["rv"].get<std::int64_t>(), parsed["start"].get<std::string>()};
}

json with_identity(json object, const ResourceType& type) {
  object = in_version(std::move(object), type);
  object["apiVersion"] = type.api_version();
  object["kind"] = type.kind();
  return object;
}

}  // namespace

ObjectFilter::ObjectFilter(const ResourceType& type, const RequestOptions& options) {
  // kube-apiserver decodes the label selector first, then the field selector, then checks the
  // fields against the resource's (ConvertFieldLabel, in the selector's term order).
  try {
    labels_ = LabelSelector::parse(options.label_selector);
    fields_ = FieldSelector::parse(options.field_selector);
  } catch (const std::invalid_argument& error) {
    throw bad_request(error.what());
  }
  const std::vector<std::string>& extra = type.extra_field_labels();
  for (const FieldRequirement& requirement : fields_.requirements()) {
    const std::string& field = requirement.field;
    if (field != "metadata.name" && field != "metadata.namespace" &&
        std::find(extra.begin(), extra.end(), field) == extra.end()) {
      throw bad_request("field label not supported: " + field);
    }
  }
}

bool ObjectFilter::matches(const json& object) const {
  return labels_.matches(object) && fields_.matches(object);
}

std::int64_t parse_resource_version(const std::string& value) {
  std::int64_t version = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), version);
  if (error != std::errc() || end != value.data() + value.size() || version < 0) {
    throw bad_request("invalid resource version: " + value);
  }
  return version;
}

std::string encode_continue_token(std::int64_t resource_version, const std::string& start_key) {
  nlohmann::ordered_json token;
  token["v"] = "meta.k8s.io/v1";
  token["rv"] = resource_version;
  token["start"] = start_key;
  return base64url(token.dump());
}

ListResult list_collection(const ObjectStore& store, const ResourceType& type,
                           const std::string& namespace_, const RequestOptions& options,
                           std::chrono::milliseconds future_wait) {
  const ObjectFilter filter(type, options);
  const std::string version_text = options.resource_version.value_or("");
  std::optional<std::int64_t> at_version;
  std::string start;
  bool paginate = options.limit.value_or(0) > 0;
  bool consistent = true;  // a continue token with rv -1 continues inconsistently
  if (!options.continue_token.empty()) {
    if (!version_text.empty() && version_text != "0") {
      throw bad_request("specifying resource version is not allowed when using continue");
    }
    const ContinueToken token = decode_continue_token(options.continue_token);
    start = token.start;
    if (token.resource_version == -1) {
      consistent = false;
    } else if (token.resource_version < store.window_start()) {
      throw expired(
          "The provided continue parameter is too old to display a consistent list result. You "
          "can start a new list without the continue parameter, or use the continue token in "
          "this response to retrieve the remainder of the results. Continuing with the provided "
          "token results in an inconsistent list - objects that were created, modified, or "
          "deleted between the time the first chunk was returned and now may show up in the "
          "list.",
          encode_continue_token(-1, token.start));
    } else {
      at_version = token.resource_version;
    }
  } else if (!version_text.empty()) {
    const std::int64_t requested = parse_resource_version(version_text);
    if (requested == 0) {
      paginate = false;  // served from the watch cache, which does not paginate
    } else {
      if (requested > store.current_resource_version() &&
          !store.wait_for_version(requested, future_wait)) {
        throw too_large_resource_version(requested, store.current_resource_version());
      }
      if (options.resource_version_match == "Exact") {
        if (requested < store.window_start()) {
          throw expired("The resourceVersion for the provided list is too old.");
        }
        at_version = requested;
      }
    }
  }
  PageRequest request;
  request.at_version = at_version;
  request.start = start;
  request.limit = paginate ? static_cast<std::size_t>(*options.limit) : 0;
  if (!filter.empty())
    request.filter = [&filter](const json& object) { return filter.matches(object); };
  Page page;
  try {
    page = store.list(type.collection(), namespace_, request);
  } catch (const std::out_of_range&) {
    throw expired("The resourceVersion for the provided list is too old.");
  }
  ListResult result;
  result.resource_version = page.resource_version;
  for (const auto& [key, object] : page.items) result.items.push_back(with_identity(*object, type));
  if (page.remaining > 0) {
    const std::int64_t token_version = consistent ? page.resource_version : -1;
    result.continue_token = encode_continue_token(token_version, page.items.back().first + '\0');
    if (filter.empty()) result.remaining_item_count = static_cast<std::int64_t>(page.remaining);
  }
  return result;
}

json list_body(const ResourceType& type, const ListResult& result) {
  json metadata = {{"resourceVersion", std::to_string(result.resource_version)}};
  if (type.custom || !result.continue_token.empty()) {
    metadata["continue"] = result.continue_token;
  }
  if (result.remaining_item_count) metadata["remainingItemCount"] = *result.remaining_item_count;
  json items = json::array();
  for (const json& item : result.items) {
    if (type.custom) {
      items.push_back(item);
    } else {
      json bare = item;
      bare.erase("apiVersion");
      bare.erase("kind");
      items.push_back(std::move(bare));
    }
  }
  return {{"apiVersion", type.api_version()},
          {"kind", type.list_kind},
          {"metadata", metadata},
          {"items", items}};
}

}  // namespace tessel::testing
