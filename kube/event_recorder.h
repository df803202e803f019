// Kubernetes Events (core/v1) about an object, as client-go's EventRecorder and
// EventCorrelator write them:
// - one Event per (source, involved object, type, reason, message); a repeat within the
//   aggregation window (10 minutes) does not create another Event but PATCHes the existing one
//   with count + 1 and a new lastTimestamp (created again if it has gone meanwhile);
// - a spam filter per source and involved object: a token bucket of 25 events refilled with one
//   every 5 minutes; events beyond it are dropped.
// Recording never throws for an API failure (an Event is not worth failing a reconcile for): it
// is logged and reported in the result. Thread-safe; writes are made one at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/log.h"
#include "kube/resource.h"

namespace tessel::kube {

enum class EventType { kNormal, kWarning };

std::string_view to_string(EventType type);  // "Normal", "Warning"

// Who reports: source.component/host and reportingComponent/reportingInstance.
struct EventSource {
  std::string component;  // "tessel-operator"; required
  std::string host;       // source.host; may be empty
  std::string instance;   // reportingInstance, e.g. the pod name; may be empty
};

struct EventRecorderOptions {
  std::chrono::system_clock::duration aggregation_window = std::chrono::minutes(10);
  // Spam filter (client-go's defaults); burst 0 turns it off.
  int spam_burst = 25;
  std::chrono::system_clock::duration spam_refill_interval = std::chrono::minutes(5);
  // Events remembered for aggregation and spam filtering; the least recently seen go first.
  std::size_t cache_size = 4096;
  // Event timestamps and names; empty: the system clock.
  std::function<std::chrono::system_clock::time_point()> now;
  std::shared_ptr<const Logger> logger;  // nullptr: component "event-recorder" on stderr
};

enum class EventOutcome {
  kCreated,     // a new Event was POSTed
  kAggregated,  // an existing Event's count was PATCHed
  kDropped,     // the spam filter dropped it
  kFailed,      // the API refused or could not be reached; logged
};

// The involvedObject reference of an object: apiVersion, kind, name, namespace, uid,
// resourceVersion (those it has).
nlohmann::json object_reference(const nlohmann::json& object);

// The core/v1 Events about `object`, as `kubectl describe` finds them: in its namespace, or in
// every namespace for a cluster-scoped object (its Events are written to "default" with an
// empty involvedObject.namespace), with a field selector on involvedObject name, namespace,
// kind and uid (when the object has one), all pages.
std::vector<nlohmann::json> events_for_object(Client& client, const nlohmann::json& object);

class EventRecorder {
 public:
  // The client must outlive the recorder. Throws std::invalid_argument for an empty component.
  EventRecorder(Client& client, EventSource source, EventRecorderOptions options = {});
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Records an Event about `object` (which needs apiVersion, kind and metadata.name; else
  // std::invalid_argument, as for an empty reason). The Event goes to the object's namespace,
  // or "default" for a cluster-scoped object, as client-go does.
  EventOutcome record(const nlohmann::json& object, EventType type, const std::string& reason,
                      const std::string& message);

 private:
  struct Seen {
    std::string name;  // of the Event object
    std::string ns;    // its namespace
    std::int64_t count = 0;
    std::string first_timestamp;
    std::chrono::system_clock::time_point last;  // local time of the last occurrence
  };
  struct Bucket {
    double tokens = 0;
    std::chrono::system_clock::time_point refilled;
    std::chrono::system_clock::time_point last_used;
  };

  bool allow(const std::string& key, std::chrono::system_clock::time_point now);
  EventOutcome create(const std::string& key, nlohmann::json event, const std::string& ns,
                      std::chrono::system_clock::time_point now);
  template <typename Map>
  void evict_least_recent(Map& map);

  Client& client_;
  const EventSource source_;
  const EventRecorderOptions options_;
  const std::shared_ptr<const Logger> logger_;
  const ResourceInfo events_;

  std::mutex mutex_;  // held for a whole record(): one write at a time
  std::map<std::string, Seen> seen_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace tessel::kube
