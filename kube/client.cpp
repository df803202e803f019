#include "kube/client.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <stdexcept>
#include <thread>
#include <utility>

#include "kube/object.h"

namespace tessel::kube {

using nlohmann::json;

namespace {

constexpr std::int64_t kDefaultPageSize = 500;
// A watch may stay silent until its timeoutSeconds runs out; the transport's silence limit
// must be longer than that.
constexpr std::chrono::seconds kWatchSilenceMargin{30};
// Without timeoutSeconds the API server ends a watch after 30 to 60 minutes.
constexpr std::chrono::minutes kWatchSilenceWithoutTimeout{65};

bool is_success(int status) { return status >= 200 && status <= 299; }

// The path part of a target: logs and error messages name the resource, not the query.
std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

// The text of a Warning header: `299 - "unknown field \"spec.x\""` gives `unknown field
// "spec.x"`. Anything not in that shape is returned whole.
std::string warning_text(std::string_view header) {
  const auto quote = header.find('"');
  if (quote == std::string_view::npos) return std::string(header);
  std::string text;
  for (std::size_t i = quote + 1; i < header.size(); ++i) {
    if (header[i] == '\\' && i + 1 < header.size()) {
      text.push_back(header[++i]);
    } else if (header[i] == '"') {
      break;
    } else {
      text.push_back(header[i]);
    }
  }
  return text;
}

// splitmix64: spreads consecutive seeds so that each request's backoff jitter differs.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string append_query(std::string target,
                         const std::vector<std::pair<std::string, std::string>>& parameters) {
  return target + encode_query(parameters);
}

std::vector<std::pair<std::string, std::string>> write_parameters(const std::string& field_manager,
                                                                  const std::string& validation,
                                                                  bool dry_run) {
  std::vector<std::pair<std::string, std::string>> parameters;
  if (dry_run) parameters.emplace_back("dryRun", "All");
  if (!field_manager.empty()) parameters.emplace_back("fieldManager", field_manager);
  if (!validation.empty()) parameters.emplace_back("fieldValidation", validation);
  return parameters;
}

// The namespace a write to `object` goes to: its metadata.namespace, else `ns`. Both set and
// different is an error, as is a namespace on a cluster-scoped object.
std::string target_namespace(const ResourceInfo& info, const std::string& ns, const json& object) {
  const std::string own = object_namespace(object);
  if (!info.namespaced) {
    if (!own.empty() || !ns.empty()) {
      throw std::invalid_argument(info.kind + " is cluster-scoped: object " + object_name(object) +
                                  " must not name a namespace");
    }
    return "";
  }
  if (!own.empty() && !ns.empty() && own != ns) {
    throw std::invalid_argument(info.kind + " " + object_name(object) + ": metadata.namespace " +
                                own + " differs from the namespace " + ns + " asked for");
  }
  const std::string chosen = own.empty() ? ns : own;
  if (chosen.empty()) {
    throw std::invalid_argument(info.kind + " " + object_name(object) +
                                ": no metadata.namespace and no namespace given");
  }
  return chosen;
}

std::string required_name(const ResourceInfo& info, const json& object) {
  std::string name = object_name(object);
  if (name.empty()) throw std::invalid_argument(info.kind + " object has no metadata.name");
  return name;
}

// The non-empty pieces of `text` between separators.
std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (!text.empty()) {
    const auto at = text.find(separator);
    const std::string_view part = text.substr(0, at);
    if (!part.empty()) parts.push_back(part);
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + 1);
  }
  return parts;
}

// Whether the query of `target` sets watch to a value Go's strconv.ParseBool reads as true.
bool watch_requested(std::string_view target) {
  const auto question = target.find('?');
  if (question == std::string_view::npos) return false;
  for (std::string_view parameter : split(target.substr(question + 1), '&')) {
    if (!parameter.starts_with("watch=")) continue;
    const std::string_view value = parameter.substr(6);
    return value == "1" || value == "t" || value == "T" || value == "true" || value == "TRUE" ||
           value == "True";
  }
  return false;
}

}  // namespace

std::string request_verb(std::string_view method, std::string_view target) {
  std::string lower(method);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::vector<std::string_view> parts = split(path_of(target), '/');
  // /api/<version>/... and /apis/<group>/<version>/... name resources; anything else does not.
  std::size_t prefix = 0;
  if (parts.size() >= 3 && parts[0] == "api") prefix = 2;
  if (parts.size() >= 4 && parts[0] == "apis") prefix = 3;
  if (prefix == 0) return lower;
  parts.erase(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(prefix));
  std::string verb;
  if (parts[0] == "watch" || parts[0] == "proxy") {  // the deprecated /watch/... and /proxy/...
    if (parts.size() < 2) return lower;
    verb = parts[0];
    parts.erase(parts.begin());
  } else if (lower == "post") {
    verb = "create";
  } else if (lower == "get" || lower == "head") {
    verb = "get";
  } else if (lower == "put") {
    verb = "update";
  } else if (lower == "patch" || lower == "delete") {
    verb = lower;
  } else {
    return lower;
  }
  // namespaces/<ns>/<resource>/...: the resource follows, unless it is the namespace's own
  // subresource (status, finalize).
  if (parts[0] == "namespaces" && parts.size() > 2 && parts[2] != "status" &&
      parts[2] != "finalize") {
    parts.erase(parts.begin(), parts.begin() + 2);
  }
  const bool named = parts.size() >= 2;
  if (!named && verb == "get") return watch_requested(target) ? "watch" : "list";
  if (!named && verb == "delete") return "deletecollection";
  return verb;
}

std::string_view content_type(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kApply:
      return "application/apply-patch+yaml";
  }
  return "application/json";
}

std::string_view to_string(WatchResult::End end) {
  switch (end) {
    case WatchResult::End::kServerClosed:
      return "server closed";
    case WatchResult::End::kStopped:
      return "stopped";
    case WatchResult::End::kHandlerStopped:
      return "handler stopped";
    case WatchResult::End::kDecodeError:
      return "decode error";
  }
  return "unknown";
}

json DeleteOptions::to_json() const {
  json body = json::object();
  if (precondition_uid) body["preconditions"]["uid"] = *precondition_uid;
  if (precondition_resource_version) {
    body["preconditions"]["resourceVersion"] = *precondition_resource_version;
  }
  if (!propagation_policy.empty()) body["propagationPolicy"] = propagation_policy;
  if (grace_period_seconds) body["gracePeriodSeconds"] = *grace_period_seconds;
  if (dry_run) body["dryRun"] = json::array({"All"});
  return body.empty() ? json() : body;
}

Client::Client(std::shared_ptr<HttpTransport> transport, ClientOptions options)
    : transport_(std::move(transport)),
      options_(std::move(options)),
      logger_(options_.logger ? options_.logger : std::make_shared<const Logger>("kube-client")),
      bucket_(options_.qps, options_.burst, options_.clock ? *options_.clock : Clock::real()),
      seed_(options_.seed) {
  if (!transport_) throw std::invalid_argument("kube::Client: no HTTP transport");
}

std::uint64_t Client::next_seed() {
  std::lock_guard lock(mutex_);
  return mix(seed_++);
}

HttpRequest Client::make_request(const std::string& method, std::string target, std::string body,
                                 std::string_view content_type) const {
  HttpRequest request;
  request.method = method;
  request.target = std::move(target);
  request.headers.emplace_back("Accept", "application/json");
  if (!body.empty()) request.headers.emplace_back("Content-Type", std::string(content_type));
  request.headers.emplace_back("User-Agent", options_.user_agent);
  request.body = std::move(body);
  request.timeout = options_.request_timeout;
  return request;
}

HttpResponse Client::send(HttpRequest request) {
  const std::string verb =
      options_.on_response ? request_verb(request.method, request.target) : std::string();
  HttpResponse response;
  std::exception_ptr transport_error;
  auto attempt = [&] {
    bucket_.acquire();
    AttemptOutcome outcome;
    outcome.method = request.method;
    transport_error = nullptr;
    try {
      response = transport_->round_trip(request);
      if (options_.on_response) options_.on_response(verb, response.status);
      outcome.http_status = response.status;
      outcome.ok = is_success(response.status);
      if (!outcome.ok) {
        outcome.retry_after_seconds =
            ApiError(response.status, response.body, response.header("Retry-After").value_or(""))
                .retry_after_seconds();
      }
    } catch (const TransportError& error) {
      if (options_.on_response) options_.on_response(verb, 0);
      transport_error = std::current_exception();
      outcome.timed_out = error.timed_out();
      outcome.connection_error = !error.timed_out() && !error.permanent();
      outcome.request_sent = error.request_sent();
    }
    return outcome;
  };
  const Sleeper sleep =
      options_.sleeper
          ? options_.sleeper
          : Sleeper([](std::chrono::nanoseconds d) { std::this_thread::sleep_for(d); });
  const RetryResult result =
      with_retries(attempt, options_.backoff, sleep, next_seed(), [&](const RetryDecision& d) {
        logger_->info("retrying request", {{"method", request.method},
                                           {"path", std::string(path_of(request.target))},
                                           {"reason", d.reason}});
      });
  if (transport_error) std::rethrow_exception(transport_error);
  if (result.attempts > 1 && !result.outcome.ok) {
    logger_->warning("request failed", {{"method", request.method},
                                        {"path", std::string(path_of(request.target))},
                                        {"reason", result.reason}});
  }
  log_warnings(request, response);
  return response;
}

void Client::log_warnings(const HttpRequest& request, const HttpResponse& response) const {
  for (const auto& [name, value] : response.headers) {
    if (name.size() != 7 || !std::equal(name.begin(), name.end(), "warning", [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == b;
        })) {
      continue;
    }
    logger_->warning("server warning", {{"method", request.method},
                                        {"path", std::string(path_of(request.target))},
                                        {"warning", warning_text(value)}});
  }
}

json Client::parse_body(const HttpRequest& request, const HttpResponse& response) const {
  if (!is_success(response.status)) {
    const std::string retry_after = response.header("Retry-After").value_or("");
    json status = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
    if (status.is_object() && status.value("kind", "") == "Status") {
      throw ApiError(response.status, response.body, retry_after);
    }
    // Not a Status (a proxy's page, "404 page not found"): say which request got it.
    std::string message = request.method + " " + std::string(path_of(request.target)) + ": HTTP " +
                          std::to_string(response.status);
    const std::string text = ApiError(response.status, response.body).message();
    if (!text.empty()) message += ": " + text;
    const json synthesized = {{"kind", "Status"},
                              {"apiVersion", "v1"},
                              {"status", "Failure"},
                              {"code", response.status},
                              {"message", message}};
    throw ApiError(response.status, synthesized.dump(), retry_after);
  }
  if (response.body.find_first_not_of(" \t\r\n") == std::string::npos) return json();
  json body = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    throw std::runtime_error(request.method + " " + std::string(path_of(request.target)) +
                             ": HTTP " + std::to_string(response.status) +
                             " answer is not JSON: " + response.body.substr(0, 200));
  }
  return body;
}

json Client::request(const std::string& method, const std::string& target, const std::string& body,
                     std::string_view content_type) {
  HttpRequest request = make_request(method, target, body, content_type);
  const HttpResponse response = send(request);
  return parse_body(request, response);
}

json Client::get(const ResourceInfo& info, const std::string& ns, const std::string& name,
                 const std::string& subresource) {
  if (name.empty()) throw std::invalid_argument("get " + info.gvr.resource + ": empty name");
  return request("GET", path(info, ns, name, subresource));
}

json Client::list(const ResourceInfo& info, const std::string& ns, const ListOptions& options) {
  if (options.watch) throw std::invalid_argument("list " + info.gvr.resource + ": watch is set");
  return request("GET", path(info, ns) + query_string(options));
}

ListResult Client::list_all(const ResourceInfo& info, const std::string& ns, ListOptions options) {
  if (!options.limit) options.limit = kDefaultPageSize;
  const std::string requested_version = options.resource_version;
  const std::string requested_match = options.resource_version_match;
  ListResult result;
  for (;;) {
    json page;
    try {
      page = list(info, ns, options);
    } catch (const ApiError& error) {
      // Only a continue token that expired between pages falls back to one full list.
      if (!error.is_gone() || options.continue_token.empty()) throw;
      logger_->info("continue token expired, listing again in full",
                    {{"resource", info.gvr.resource}, {"namespace", ns}});
      options.limit.reset();
      options.continue_token.clear();
      options.resource_version = requested_version;
      options.resource_version_match = requested_match;
      page = list(info, ns, options);
      result.items.clear();
    }
    if (!page.is_object()) {
      throw std::runtime_error("list " + info.gvr.resource + ": answer is not a List object");
    }
    const json metadata = page.value("metadata", json::object());
    if (const auto items = page.find("items"); items != page.end() && items->is_array()) {
      for (const json& item : *items) result.items.push_back(item);
    }
    result.resource_version = metadata.value("resourceVersion", "");
    const std::string next = metadata.value("continue", "");
    if (next.empty()) return result;
    options.continue_token = next;
    // The server refuses a resourceVersion together with a continue token.
    options.resource_version.clear();
    options.resource_version_match.clear();
  }
}

std::string Client::write_query(const WriteOptions& options) const {
  return encode_query(
      write_parameters(options.field_manager, options.field_validation, options.dry_run));
}

json Client::create(const ResourceInfo& info, const std::string& ns, const json& object,
                    const WriteOptions& options) {
  if (!object.is_object()) throw std::invalid_argument("create " + info.kind + ": not an object");
  return request("POST", path(info, target_namespace(info, ns, object)) + write_query(options),
                 object.dump(), "application/json");
}

json Client::update(const ResourceInfo& info, const json& object, const WriteOptions& options) {
  const std::string name = required_name(info, object);
  return request("PUT", path(info, target_namespace(info, "", object), name) + write_query(options),
                 object.dump(), "application/json");
}

json Client::update_status(const ResourceInfo& info, const json& object,
                           const WriteOptions& options) {
  const std::string name = required_name(info, object);
  return request(
      "PUT", path(info, target_namespace(info, "", object), name, "status") + write_query(options),
      object.dump(), "application/json");
}

json Client::patch(const ResourceInfo& info, const std::string& ns, const std::string& name,
                   PatchType type, const json& patch, const PatchOptions& options,
                   const std::string& subresource) {
  if (name.empty()) throw std::invalid_argument("patch " + info.gvr.resource + ": empty name");
  if (options.force && type != PatchType::kApply) {
    throw std::invalid_argument("patch " + info.gvr.resource + "/" + name +
                                ": force is only for server-side apply");
  }
  std::string manager = options.field_manager;
  if (type == PatchType::kApply && manager.empty()) manager = options_.field_manager;
  auto parameters = write_parameters(manager, options.field_validation, options.dry_run);
  if (type == PatchType::kApply) parameters.emplace_back("force", options.force ? "true" : "false");
  return request("PATCH", append_query(path(info, ns, name, subresource), parameters), patch.dump(),
                 content_type(type));
}

json Client::apply(const ResourceInfo& info, const json& object, const ApplyOptions& options,
                   const std::string& subresource) {
  if (!object.is_object() || !object.contains("apiVersion") || !object.contains("kind")) {
    throw std::invalid_argument("apply " + info.kind +
                                ": the object needs apiVersion, kind and metadata.name");
  }
  const std::string name = required_name(info, object);
  return patch(
      info, target_namespace(info, "", object), name, PatchType::kApply, object,
      PatchOptions{options.field_manager, options.force, options.field_validation, options.dry_run},
      subresource);
}

json Client::remove(const ResourceInfo& info, const std::string& ns, const std::string& name,
                    const DeleteOptions& options) {
  if (name.empty()) throw std::invalid_argument("delete " + info.gvr.resource + ": empty name");
  const json body = options.to_json();
  return request("DELETE", path(info, ns, name), body.is_null() ? "" : body.dump(),
                 "application/json");
}

json Client::create_subresource(const ResourceInfo& info, const std::string& ns,
                                const std::string& name, const std::string& subresource,
                                const json& body, const WriteOptions& options) {
  if (name.empty() || subresource.empty()) {
    throw std::invalid_argument("create " + info.gvr.resource +
                                " subresource: name and subresource are required");
  }
  return request("POST", path(info, ns, name, subresource) + write_query(options), body.dump(),
                 "application/json");
}

json Client::create(const json& object, const WriteOptions& options) {
  return create(resource_for(object), "", object, options);
}

json Client::update(const json& object, const WriteOptions& options) {
  return update(resource_for(object), object, options);
}

json Client::update_status(const json& object, const WriteOptions& options) {
  return update_status(resource_for(object), object, options);
}

json Client::apply(const json& object, const ApplyOptions& options) {
  return apply(resource_for(object), object, options);
}

json Client::remove(const json& object, const DeleteOptions& options) {
  const ResourceInfo info = resource_for(object);
  return remove(info, info.namespaced ? object_namespace(object) : "", required_name(info, object),
                options);
}

ResourceInfo Client::resource_for(std::string_view api_version, std::string_view kind) {
  if (api_version.empty() || kind.empty()) {
    throw std::invalid_argument("resource lookup needs an apiVersion and a kind (got \"" +
                                std::string(api_version) + "\", \"" + std::string(kind) + "\")");
  }
  {
    std::lock_guard lock(mutex_);
    if (const ResourceInfo* found = registry_.find_kind(api_version, kind)) return *found;
  }
  // Discovery, outside the lock: the core group lives under /api, the others under /apis.
  const std::string discovery_path = api_version.find('/') == std::string_view::npos
                                         ? "/api/" + std::string(api_version)
                                         : "/apis/" + std::string(api_version);
  const json document = request("GET", discovery_path);
  std::vector<ResourceInfo> discovered;
  try {
    discovered = parse_api_resource_list(document);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument("discovery " + discovery_path + ": " + error.what());
  }
  std::lock_guard lock(mutex_);
  for (ResourceInfo& info : discovered) registry_.add(std::move(info));
  if (const ResourceInfo* found = registry_.find_kind(api_version, kind)) return *found;
  throw std::invalid_argument("kind " + std::string(kind) + " is not served by " +
                              std::string(api_version) + " (discovery " + discovery_path + ")");
}

ResourceInfo Client::resource_for(const json& object) {
  if (!object.is_object()) throw std::invalid_argument("resource lookup: not a JSON object");
  const auto api_version = object.find("apiVersion");
  const auto kind = object.find("kind");
  if (api_version == object.end() || !api_version->is_string() || kind == object.end() ||
      !kind->is_string()) {
    throw std::invalid_argument("object " + object_name(object) +
                                " has no apiVersion or kind string");
  }
  return resource_for(api_version->get<std::string>(), kind->get<std::string>());
}

void Client::register_resource(ResourceInfo info) {
  std::lock_guard lock(mutex_);
  registry_.add(std::move(info));
}

WatchResult Client::watch(const ResourceInfo& info, const std::string& ns, ListOptions options,
                          const WatchHandler& on_event, std::stop_token stop) {
  options.watch = true;
  HttpRequest request = make_request("GET", path(info, ns) + query_string(options), "", "");
  request.timeout =
      options.timeout_seconds
          ? std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::seconds(*options.timeout_seconds) + kWatchSilenceMargin)
          : std::chrono::duration_cast<std::chrono::milliseconds>(kWatchSilenceWithoutTimeout);

  WatchDecoder decoder;
  WatchResult result;
  bool handler_stopped = false;
  std::optional<std::string> decode_error;
  // on_data runs inside the transport (a C library's callback): nothing may be thrown through.
  std::exception_ptr handler_error;
  auto on_data = [&](std::string_view chunk) {
    try {
      decoder.feed(chunk);
      while (auto event = decoder.next()) {
        ++result.events;
        if (!on_event(*event)) {
          handler_stopped = true;
          return false;
        }
      }
      return true;
    } catch (const WatchDecodeError& error) {
      decode_error = error.what();
    } catch (...) {
      handler_error = std::current_exception();
    }
    return false;
  };

  bucket_.acquire();
  const std::string verb =
      options_.on_response ? request_verb(request.method, request.target) : std::string();
  HttpResponse response;
  try {
    response = transport_->stream(request, on_data, stop);
  } catch (const TransportError&) {
    if (options_.on_response) options_.on_response(verb, 0);
    throw;
  }
  const bool answered = response.status != 0 || !stop.stop_requested();
  if (answered && options_.on_response) options_.on_response(verb, response.status);
  if (handler_error) std::rethrow_exception(handler_error);
  if (!answered) {  // stopped before the server answered
    result.end = WatchResult::End::kStopped;
    return result;
  }
  log_warnings(request, response);
  if (!is_success(response.status)) parse_body(request, response);  // throws the ApiError

  if (decode_error) {
    result.end = WatchResult::End::kDecodeError;
    result.detail = *decode_error;
  } else if (handler_stopped) {
    result.end = WatchResult::End::kHandlerStopped;
  } else if (stop.stop_requested()) {
    result.end = WatchResult::End::kStopped;
  } else {
    try {
      decoder.finish();
      result.end = WatchResult::End::kServerClosed;
    } catch (const WatchDecodeError& error) {
      result.end = WatchResult::End::kDecodeError;
      result.detail = error.what();
    }
  }
  return result;
}

}  // namespace tessel::kube
