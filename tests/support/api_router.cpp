#include "tests/support/api_router.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <vector>

#include "tests/support/api_errors.h"

namespace tessel::testing {
namespace {

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? text.npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return std::string(text);
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The path after /api/v1 or /apis/<group>/<version>: [namespaces/<ns>/]<resource>[/<name>[/<sub>]].
ApiPath resource_path(ApiPath path, const std::vector<std::string>& rest) {
  if (rest.empty()) {
    path.type = ApiPath::Type::kGroupVersion;
    return path;
  }
  std::size_t at = 0;
  if (rest[0] == "namespaces" && rest.size() >= 3 && rest[2] != "status" && rest[2] != "finalize") {
    path.namespace_ = rest[1];
    at = 2;
  }
  const std::size_t left = rest.size() - at;
  if (left > 3) return ApiPath{};
  path.resource = rest[at];
  if (left >= 2) path.name = rest[at + 1];
  if (left == 3) path.subresource = rest[at + 2];
  for (std::size_t i = at; i < rest.size(); ++i) {
    if (rest[i].empty()) return ApiPath{};
  }
  if (!path.namespace_.empty() && path.namespace_.find('/') != std::string::npos) return ApiPath{};
  path.type = ApiPath::Type::kResource;
  return path;
}

std::int64_t parse_integer(const std::string& name, const std::string& value) {
  std::int64_t result = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), result);
  if (error != std::errc() || end != value.data() + value.size()) {
    throw bad_request("invalid value for query parameter " + name + ": \"" + value +
                      "\" is not an integer");
  }
  return result;
}

bool parse_bool(const std::string& name, const std::string& value) {
  // Go's strconv.ParseBool, which the server's query decoding uses.
  static const std::map<std::string, bool> kValues = {
      {"1", true},    {"t", true},      {"T", true},      {"true", true},
      {"TRUE", true}, {"True", true},   {"0", false},     {"f", false},
      {"F", false},   {"false", false}, {"FALSE", false}, {"False", false}};
  if (value.empty()) return true;  // a bare ?watch means true
  const auto found = kValues.find(value);
  if (found == kValues.end()) {
    throw bad_request("invalid value for query parameter " + name + ": \"" + value +
                      "\" is not a boolean");
  }
  return found->second;
}

}  // namespace

ApiPath parse_api_path(std::string_view raw) {
  if (raw.empty() || raw.front() != '/') return ApiPath{};
  std::string_view trimmed = raw.substr(1);
  if (!trimmed.empty() && trimmed.back() == '/') trimmed.remove_suffix(1);
  const std::vector<std::string> parts = split(trimmed, '/');
  ApiPath path;
  const std::string& first = parts[0];
  if (first == "version" && parts.size() == 1) {
    path.type = ApiPath::Type::kVersion;
  } else if (first == "healthz" || first == "livez" || first == "readyz") {
    path.type = ApiPath::Type::kHealth;
  } else if (first == "openapi") {
    path.type = ApiPath::Type::kOpenApi;
  } else if (first == "api") {
    if (parts.size() == 1) {
      path.type = ApiPath::Type::kCoreGroup;
    } else if (parts[1] == "v1") {
      path.version = "v1";
      return resource_path(path, std::vector<std::string>(parts.begin() + 2, parts.end()));
    }
  } else if (first == "apis") {
    if (parts.size() == 1) {
      path.type = ApiPath::Type::kGroupList;
    } else if (parts.size() == 2) {
      path.type = ApiPath::Type::kGroup;
      path.group = parts[1];
    } else {
      path.group = parts[1];
      path.version = parts[2];
      return resource_path(path, std::vector<std::string>(parts.begin() + 3, parts.end()));
    }
  }
  return path;
}

RequestOptions parse_request_options(const HttpServerRequest& request) {
  RequestOptions options;
  for (const auto& [name, value] : request.query) {
    if (name == "labelSelector") {
      options.label_selector = value;
    } else if (name == "fieldSelector") {
      options.field_selector = value;
    } else if (name == "limit") {
      options.limit = parse_integer(name, value);
    } else if (name == "continue") {
      options.continue_token = value;
    } else if (name == "resourceVersion") {
      options.resource_version = value;
    } else if (name == "resourceVersionMatch") {
      if (value != "" && value != "NotOlderThan" && value != "Exact") {
        throw bad_request("invalid resourceVersionMatch: " + value);
      }
      options.resource_version_match = value;
    } else if (name == "watch") {
      options.watch = parse_bool(name, value);
    } else if (name == "allowWatchBookmarks") {
      options.allow_watch_bookmarks = parse_bool(name, value);
    } else if (name == "timeoutSeconds") {
      options.timeout_seconds = parse_integer(name, value);
    } else if (name == "dryRun") {
      if (value != "All") {
        throw bad_request("dryRun: Unsupported value: \"" + value +
                          "\": supported values: \"All\"");
      }
      options.dry_run = true;
    } else if (name == "fieldManager") {
      options.field_manager = value;
    } else if (name == "fieldValidation") {
      if (value != "Ignore" && value != "Warn" && value != "Strict") {
        throw bad_request("fieldValidation: Unsupported value: \"" + value +
                          "\": supported values: \"Ignore\", \"Warn\", \"Strict\"");
      }
      options.field_validation = value;
    } else if (name == "force") {
      options.force = parse_bool(name, value);
    } else if (name == "gracePeriodSeconds") {
      options.grace_period_seconds = parse_integer(name, value);
    } else if (name == "propagationPolicy") {
      options.propagation_policy = value;
    } else if (name == "orphanDependents") {
      options.orphan_dependents = parse_bool(name, value);
    } else if (name == "includeObject") {
      if (value != "None" && value != "Metadata" && value != "Object") {
        throw bad_request("includeObject: Unsupported value: \"" + value +
                          "\": supported values: \"None\", \"Metadata\", \"Object\"");
      }
      options.include_object = value;
    }
    // Other parameters (pretty, timeout, sendInitialEvents...) do not change the answer.
  }
  if (options.limit && *options.limit < 0) options.limit = 0;
  if (!options.resource_version_match.empty() &&
      (!options.resource_version || options.resource_version->empty())) {
    throw bad_request(
        "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
        "unless resourceVersion is provided");
  }
  return options;
}

Representation negotiate_representation(const HttpServerRequest& request, bool allow_conversions) {
  const std::string accept = request.headers.get("Accept").value_or("");
  if (trim(accept).empty()) return {};
  for (const std::string& range : split(accept, ',')) {
    const std::vector<std::string> pieces = split(range, ';');
    const std::string type = lower(trim(pieces[0]));
    std::map<std::string, std::string> parameters;
    for (std::size_t i = 1; i < pieces.size(); ++i) {
      const std::size_t equals = pieces[i].find('=');
      if (equals == std::string::npos) continue;
      parameters[lower(trim(pieces[i].substr(0, equals)))] = trim(pieces[i].substr(equals + 1));
    }
    if (type == "*/*" || type == "application/*") return {};
    if (type != "application/json") continue;
    const auto as = parameters.find("as");
    if (as == parameters.end()) return {};
    const std::string group = parameters.count("g") ? parameters["g"] : "";
    const std::string version = parameters.count("v") ? parameters["v"] : "";
    if (!allow_conversions || group != "meta.k8s.io" || (version != "v1" && version != "v1beta1")) {
      continue;
    }
    if (as->second == "Table") {
      return {Representation::Type::kTable, "meta.k8s.io/" + version};
    }
    if (as->second == "PartialObjectMetadata" || as->second == "PartialObjectMetadataList") {
      return {Representation::Type::kPartialObjectMetadata, "meta.k8s.io/" + version};
    }
  }
  throw not_acceptable();
}

std::string media_type(const HttpServerRequest& request) {
  const std::string content_type = request.headers.get("Content-Type").value_or("");
  return lower(trim(content_type.substr(0, content_type.find(';'))));
}

}  // namespace tessel::testing
