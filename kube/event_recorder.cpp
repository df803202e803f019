#include "kube/event_recorder.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "kube/api_error.h"
#include "kube/http_transport.h"
#include "kube/object.h"

namespace tessel::kube {

using nlohmann::json;
using SystemTime = std::chrono::system_clock::time_point;

namespace {

const ResourceInfo& core_events() {
  static const ResourceRegistry registry;
  static const ResourceInfo* events = registry.find_kind("v1", "Event");
  if (events == nullptr) throw std::logic_error("the builtin registry has no v1 Event");
  return *events;
}

// client-go names an Event "<object name>.<unix nanoseconds in hex>".
std::string event_name(const std::string& object_name, SystemTime now) {
  const auto nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  char hex[24];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(nanos));
  return object_name + "." + hex;
}

std::string field(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string_view to_string(EventType type) {
  return type == EventType::kWarning ? "Warning" : "Normal";
}

json object_reference(const json& object) {
  json reference = {{"apiVersion", field(object, "apiVersion")},
                    {"kind", field(object, "kind")},
                    {"name", object_name(object)}};
  if (const std::string ns = object_namespace(object); !ns.empty()) reference["namespace"] = ns;
  if (const std::string uid = object_uid(object); !uid.empty()) reference["uid"] = uid;
  if (const std::string rv = object_resource_version(object); !rv.empty()) {
    reference["resourceVersion"] = rv;
  }
  return reference;
}

std::vector<json> events_for_object(Client& client, const json& object) {
  const json reference = object_reference(object);
  if (reference["kind"] == "" || reference["name"] == "") {
    throw std::invalid_argument("events for an object: it needs a kind and metadata.name");
  }
  const std::string ns = reference.value("namespace", "");
  std::vector<FieldRequirement> terms = {
      {"involvedObject.name", true, reference["name"]},
      {"involvedObject.namespace", true, ns},
      {"involvedObject.kind", true, reference["kind"]},
  };
  if (reference.contains("uid")) terms.push_back({"involvedObject.uid", true, reference["uid"]});
  ListOptions options;
  options.field_selector = FieldSelector(std::move(terms)).to_string();
  return client.list_all(core_events(), ns, options).items;
}

EventRecorder::EventRecorder(Client& client, EventSource source, EventRecorderOptions options)
    : client_(client),
      source_(std::move(source)),
      options_(std::move(options)),
      logger_(options_.logger ? options_.logger : std::make_shared<const Logger>("event-recorder")),
      events_(core_events()) {
  if (source_.component.empty()) {
    throw std::invalid_argument("event recorder: source component must not be empty");
  }
  if (options_.cache_size == 0) {
    throw std::invalid_argument("event recorder: cache_size must be positive");
  }
}

template <typename Map>
void EventRecorder::evict_least_recent(Map& map) {
  while (map.size() >= options_.cache_size) {
    const auto oldest = std::min_element(map.begin(), map.end(), [](const auto& a, const auto& b) {
      if constexpr (std::is_same_v<typename Map::mapped_type, Seen>) {
        return a.second.last < b.second.last;
      } else {
        return a.second.last_used < b.second.last_used;
      }
    });
    map.erase(oldest);
  }
}

bool EventRecorder::allow(const std::string& key, SystemTime now) {
  if (options_.spam_burst <= 0) return true;
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    evict_least_recent(buckets_);
    it = buckets_.emplace(key, Bucket{static_cast<double>(options_.spam_burst), now, now}).first;
  }
  Bucket& bucket = it->second;
  if (options_.spam_refill_interval > std::chrono::system_clock::duration::zero() &&
      now > bucket.refilled) {
    const double refill = std::chrono::duration<double>(now - bucket.refilled) /
                          std::chrono::duration<double>(options_.spam_refill_interval);
    bucket.tokens = std::min<double>(options_.spam_burst, bucket.tokens + refill);
    bucket.refilled = now;
  }
  bucket.last_used = now;
  if (bucket.tokens < 1.0) return false;
  bucket.tokens -= 1.0;
  return true;
}

EventOutcome EventRecorder::create(const std::string& key, json event, const std::string& ns,
                                   SystemTime now) {
  const json created = client_.create(events_, ns, event);
  Seen& seen = seen_[key];
  seen.name = object_name(created.is_object() ? created : event);
  seen.ns = ns;
  seen.count = event.value("count", std::int64_t{1});
  seen.first_timestamp = field(event, "firstTimestamp");
  seen.last = now;
  return EventOutcome::kCreated;
}

EventOutcome EventRecorder::record(const json& object, EventType type, const std::string& reason,
                                   const std::string& message) {
  const json reference = object_reference(object);
  if (reference["apiVersion"] == "" || reference["kind"] == "" || reference["name"] == "") {
    throw std::invalid_argument("event " + reason +
                                ": the involved object needs apiVersion, kind and metadata.name");
  }
  if (reason.empty()) {
    throw std::invalid_argument("event about " + reference["kind"].get<std::string>() + " " +
                                reference["name"].get<std::string>() + ": empty reason");
  }
  const SystemTime now = options_.now ? options_.now() : std::chrono::system_clock::now();
  const std::string ns = reference.contains("namespace") ? reference["namespace"].get<std::string>()
                                                         : std::string("default");
  const std::string object_key =
      json::array({source_.component, source_.host, reference["kind"], ns, reference["name"],
                   reference.value("uid", ""), reference["apiVersion"]})
          .dump();
  const std::string key =
      json::array({object_key, std::string(to_string(type)), reason, message}).dump();
  const std::vector<LogField> about = {{"object", ns + "/" + reference["name"].get<std::string>()},
                                       {"kind", reference["kind"].get<std::string>()},
                                       {"reason", reason}};

  std::lock_guard lock(mutex_);
  if (!allow(object_key, now)) {
    logger_->debug("event dropped by the spam filter", about);
    return EventOutcome::kDropped;
  }
  const std::string timestamp = format_rfc3339(now);
  try {
    const auto it = seen_.find(key);
    if (it != seen_.end() && now - it->second.last <= options_.aggregation_window) {
      Seen& seen = it->second;
      const json patch = {{"count", seen.count + 1}, {"lastTimestamp", timestamp}};
      try {
        client_.patch(events_, seen.ns, seen.name, PatchType::kStrategicMerge, patch);
        ++seen.count;
        seen.last = now;
        return EventOutcome::kAggregated;
      } catch (const ApiError& error) {
        if (!error.is_not_found()) throw;
        // The Event was deleted (or expired, after the server's event TTL): write it again.
      }
    }
    if (it == seen_.end()) evict_least_recent(seen_);
    json event = {{"apiVersion", "v1"},
                  {"kind", "Event"},
                  {"metadata", {{"name", event_name(reference["name"], now)}, {"namespace", ns}}},
                  {"involvedObject", reference},
                  {"reason", reason},
                  {"message", message},
                  {"type", to_string(type)},
                  {"source", {{"component", source_.component}}},
                  {"firstTimestamp", timestamp},
                  {"lastTimestamp", timestamp},
                  {"count", 1},
                  {"reportingComponent", source_.component}};
    if (!source_.host.empty()) event["source"]["host"] = source_.host;
    if (!source_.instance.empty()) event["reportingInstance"] = source_.instance;
    if (it != seen_.end() && now - it->second.last <= options_.aggregation_window) {
      // Recreating a vanished Event keeps its history.
      event["count"] = it->second.count + 1;
      event["firstTimestamp"] = it->second.first_timestamp;
      event["metadata"]["name"] = it->second.name;
    }
    return create(key, std::move(event), ns, now);
  } catch (const std::exception& error) {
    logger_->warning("event not recorded", [&] {
      std::vector<LogField> fields = about;
      fields.emplace_back("error", error.what());
      return fields;
    }());
    return EventOutcome::kFailed;
  }
}

}  // namespace tessel::kube
