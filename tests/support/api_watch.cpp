#include "tests/support/api_watch.h"

#include <algorithm>
#include <optional>

#include "tests/support/api_errors.h"
#include "tests/support/api_list.h"
#include "tests/support/api_object_rules.h"
#include "tests/support/api_representation.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How often an idle watch checks whether its stream was closed.
constexpr std::chrono::milliseconds kPollInterval{200};

// One watch stream: turns stored events into the lines this watcher gets.
class WatchStream {
 public:
  WatchStream(std::shared_ptr<const ResourceType> type, ObjectFilter filter,
              Representation representation, std::string include_object)
      : type_(std::move(type)),
        filter_(std::move(filter)),
        representation_(std::move(representation)),
        include_object_(std::move(include_object)) {}

  // The watch event for a stored change, as this watcher's selectors see it; nullopt when
  // the change does not concern it.
  std::optional<json> event(const StoredEvent& stored) {
    const bool now_matches =
        stored.type != StoredEvent::Type::kDeleted && filter_.matches(*stored.object);
    const bool matched = stored.previous && filter_.matches(*stored.previous);
    switch (stored.type) {
      case StoredEvent::Type::kAdded:
        if (now_matches) return line("ADDED", *stored.object);
        return std::nullopt;
      case StoredEvent::Type::kModified:
        if (now_matches) return line(matched ? "MODIFIED" : "ADDED", *stored.object);
        if (matched) {
          // Leaving the selection: the earlier state, with the change's resourceVersion.
          json last = *stored.previous;
          last["metadata"]["resourceVersion"] = std::to_string(stored.resource_version);
          return line("DELETED", last);
        }
        return std::nullopt;
      case StoredEvent::Type::kDeleted:
        if (matched) return line("DELETED", *stored.object);
        return std::nullopt;
    }
    return std::nullopt;
  }

  json bookmark(std::int64_t resource_version) const {
    json object;
    if (type_->custom) {
      object = {{"apiVersion", type_->api_version()},
                {"kind", type_->kind()},
                {"metadata", json::object()}};
    } else {
      // Built-in kinds serialise their Go zero value around the resourceVersion.
      object = type_->merge_types().empty_object(type_->api_version(), type_->kind());
    }
    object["metadata"]["resourceVersion"] = std::to_string(resource_version);
    return {{"type", "BOOKMARK"}, {"object", object}};
  }

 private:
  json line(const char* type, const json& object) {
    const json versioned = in_version(object, *type_);
    json converted;
    switch (representation_.type) {
      case Representation::Type::kJson:
        converted = versioned;
        break;
      case Representation::Type::kTable:
        converted = table_of_one(*type_, versioned, include_object_, representation_.api_version);
        // Only the first event of a stream carries the column definitions.
        if (sent_columns_) converted["columnDefinitions"] = nullptr;
        sent_columns_ = true;
        break;
      case Representation::Type::kPartialObjectMetadata:
        converted = partial_object_metadata(versioned, representation_.api_version);
        break;
    }
    return {{"type", type}, {"object", converted}};
  }

  std::shared_ptr<const ResourceType> type_;
  ObjectFilter filter_;
  Representation representation_;
  std::string include_object_;
  bool sent_columns_ = false;
};

bool write_line(HttpResponseStream& stream, const json& line) {
  return stream.write(line.dump() + "\n");
}

}  // namespace

HttpServerResponse watch_response(ObjectStore& store, std::shared_ptr<const ResourceType> type,
                                  const std::string& namespace_, const RequestOptions& options,
                                  const Representation& representation,
                                  const WatchSettings& settings) {
  ObjectFilter filter(*type, options);  // 400 for bad selectors, before the stream starts
  const std::string version_text = options.resource_version.value_or("");
  std::optional<std::int64_t> after_version;
  if (!version_text.empty() && version_text != "0") {
    after_version = parse_resource_version(version_text);
  }
  const auto timeout =
      options.timeout_seconds
          ? std::chrono::seconds(std::max<std::int64_t>(*options.timeout_seconds, 0))
          : settings.default_timeout;
  HttpServerResponse response;
  response.headers.set("Content-Type", "application/json");
  response.headers.set("Cache-Control", "no-cache, private");
  auto stream_state = std::make_shared<WatchStream>(type, std::move(filter), representation,
                                                    options.include_object);
  const bool bookmarks = options.allow_watch_bookmarks;
  response.stream = [&store, type, namespace_, after_version, timeout, bookmarks, settings,
                     stream_state](HttpResponseStream& stream) {
    std::int64_t window_start = 0;
    const std::shared_ptr<WatchSubscription> subscription =
        store.watch(type->collection(), namespace_, after_version, &window_start);
    if (!subscription) {
      write_line(
          stream,
          {{"type", "ERROR"},
           {"object", failure_status(410, "Expired",
                                     "too old resource version: " + std::to_string(*after_version) +
                                         " (" + std::to_string(window_start) + ")")}});
      return;
    }
    const std::int64_t floor = after_version.value_or(0);
    const Clock::time_point deadline = Clock::now() + timeout;
    Clock::time_point next_bookmark = Clock::now() + settings.bookmark_interval;
    while (true) {
      Clock::time_point until = std::min(deadline, Clock::now() + kPollInterval);
      if (bookmarks) until = std::min(until, next_bookmark);
      const std::vector<StoredEvent> events = subscription->take(until);
      const WatchSubscription::End end = subscription->ended();
      if (end == WatchSubscription::End::kDropped) {
        stream.abort();
        return;
      }
      for (const StoredEvent& stored : events) {
        const std::optional<json> line = stream_state->event(stored);
        if (line && !write_line(stream, *line)) return;
      }
      if (end == WatchSubscription::End::kClosed || stream.closed()) return;
      const Clock::time_point now = Clock::now();
      if (now >= deadline) return;
      if (bookmarks && now >= next_bookmark) {
        const std::int64_t version = std::max(store.latest_version_of(type->collection()), floor);
        if (!write_line(stream, stream_state->bookmark(version))) return;
        next_bookmark = now + settings.bookmark_interval;
      }
    }
  };
  return response;
}

}  // namespace tessel::testing
