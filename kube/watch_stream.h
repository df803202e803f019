// The watch protocol without the socket: decoding the body of a watch response into events,
// and the reflector's bookkeeping of where to resume after the stream ends.
//
// A watch body is one JSON event per line, {"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR",
// "object":{...}}, delivered in chunks that need not respect line boundaries. A watch ends
// cleanly (timeoutSeconds ran out, connection dropped) and is resumed from the last
// resourceVersion seen; an ERROR event with a 410 Expired Status means that version is gone
// from the server's window and the caller must list again.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kube/api_error.h"
#include "kube/resource.h"

namespace tessel::kube {

struct WatchEvent {
  enum Type { Added, Modified, Deleted, Bookmark, Error };

  Type type;
  // The object's new state (Deleted: its last state); Bookmark: only metadata.resourceVersion
  // is meaningful; Error: a metav1.Status.
  nlohmann::json object;
};

// "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR": the wire names.
std::string_view to_string(WatchEvent::Type type);

// A watch body that is not a sequence of events. what() names the problem and quotes at most
// the first 200 bytes of the offending line (objects can be large and hold secrets' data).
class WatchDecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Splits the chunks of a watch response body into events. Feed each chunk as it arrives, then
// pull the events it completed:
//   decoder.feed(chunk);
//   while (auto event = decoder.next()) handle(*event);
// and call finish() at the end of the body. Pulling one event at a time means the events
// before a malformed line are all delivered before next() throws.
class WatchDecoder {
 public:
  void feed(std::string_view chunk);

  // The next complete event, or nullopt until more bytes arrive. Blank lines are skipped.
  // Throws WatchDecodeError for a line that is not valid JSON, not an object, or has an
  // unknown type or no object.
  std::optional<WatchEvent> next();

  // The body ended. Throws WatchDecodeError when it ended inside a line (a cut-off event).
  // Complete lines not yet pulled stay available to next().
  void finish() const;

 private:
  std::string buffer_;
  std::size_t consumed_ = 0;  // bytes of buffer_ already returned as events
  std::size_t scanned_ = 0;   // bytes of buffer_ known to hold no newline after consumed_
};

// One line of a watch body (without its newline) as an event; throws WatchDecodeError.
WatchEvent parse_watch_event(std::string_view line);

// Where a reflector stands in a resource's history: the last resourceVersion it saw, and
// whether that version is still usable. Start it from a list's metadata.resourceVersion, feed
// it every watch event, and re-watch with resume_options() whenever a watch ends.
class WatchPosition {
 public:
  WatchPosition() = default;
  explicit WatchPosition(std::string list_resource_version);

  // Records the event's metadata.resourceVersion (bookmarks included; an object without one
  // leaves it unchanged). For an Error event, returns the Status as
  // an ApiError: the watch is over, and a 410 Expired one makes needs_relist() true.
  std::optional<ApiError> observe(const WatchEvent& event);

  // An error answer to the watch request itself (an HTTP 410 makes needs_relist() true).
  void observe_error(const ApiError& error);

  // The last resourceVersion seen; "" before any list or event.
  const std::string& resource_version() const { return resource_version_; }

  // The resourceVersion is gone from the server: list again, then reset().
  bool needs_relist() const { return needs_relist_; }

  // After a relist: continue from the list's metadata.resourceVersion.
  void reset(std::string list_resource_version);

  // The options of the next watch: base's selectors and timeout, watch=true,
  // allowWatchBookmarks=true, resourceVersion=the last seen. limit, continue and
  // resourceVersionMatch are list-only and dropped. Throws std::logic_error while
  // needs_relist().
  ListOptions resume_options(ListOptions base) const;

 private:
  std::string resource_version_;
  bool needs_relist_ = false;
};

}  // namespace tessel::kube
