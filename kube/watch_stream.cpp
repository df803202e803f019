#include "kube/watch_stream.h"

#include <algorithm>
#include <array>
#include <utility>

#include "kube/object.h"

namespace tessel::kube {

namespace {

using nlohmann::json;

constexpr std::array<std::pair<std::string_view, WatchEvent::Type>, 5> kTypeNames{{
    {"ADDED", WatchEvent::Added},
    {"MODIFIED", WatchEvent::Modified},
    {"DELETED", WatchEvent::Deleted},
    {"BOOKMARK", WatchEvent::Bookmark},
    {"ERROR", WatchEvent::Error},
}};

// At most this many bytes of an offending line reach an error message.
constexpr std::size_t kMaxQuoted = 200;

std::string quote(std::string_view line) {
  if (line.size() <= kMaxQuoted) return std::string(line);
  return std::string(line.substr(0, kMaxQuoted)) + "... (" + std::to_string(line.size()) +
         " bytes)";
}

[[noreturn]] void fail(const std::string& problem, std::string_view line) {
  throw WatchDecodeError("watch stream: " + problem + ": " + quote(line));
}

bool is_blank(std::string_view text) {
  return text.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

std::string_view to_string(WatchEvent::Type type) {
  for (const auto& [name, value] : kTypeNames) {
    if (value == type) return name;
  }
  return "UNKNOWN";
}

WatchEvent parse_watch_event(std::string_view line) {
  json event;
  try {
    event = json::parse(line);
  } catch (const json::parse_error& e) {
    // Not e.what(): nlohmann quotes the last token read, which can be a whole long string.
    fail("malformed JSON at byte " + std::to_string(e.byte), line);
  } catch (const json::out_of_range&) {
    fail("a number out of the range of a double", line);  // e.g. 1e400
  }
  if (!event.is_object()) fail("event is not a JSON object", line);

  const auto type = event.find("type");
  if (type == event.end() || !type->is_string()) fail("event has no \"type\" string", line);
  const auto known = std::find_if(kTypeNames.begin(), kTypeNames.end(), [&](const auto& entry) {
    return entry.first == type->get_ref<const std::string&>();
  });
  if (known == kTypeNames.end()) fail("unknown event type", line);

  const auto object = event.find("object");
  if (object == event.end() || !object->is_object()) fail("event has no \"object\"", line);
  return WatchEvent{known->second, std::move(*object)};
}

void WatchDecoder::feed(std::string_view chunk) {
  if (consumed_ > 0) {
    buffer_.erase(0, consumed_);
    scanned_ -= consumed_;
    consumed_ = 0;
  }
  buffer_.append(chunk);
}

std::optional<WatchEvent> WatchDecoder::next() {
  for (;;) {
    const std::size_t newline = buffer_.find('\n', scanned_);
    if (newline == std::string::npos) {
      scanned_ = buffer_.size();
      return std::nullopt;
    }
    const std::string_view line(buffer_.data() + consumed_, newline - consumed_);
    consumed_ = newline + 1;
    scanned_ = consumed_;
    if (!is_blank(line)) return parse_watch_event(line);
  }
}

void WatchDecoder::finish() const {
  const std::size_t last_newline = buffer_.rfind('\n');
  const std::size_t tail_start =
      last_newline == std::string::npos || last_newline < consumed_ ? consumed_ : last_newline + 1;
  const std::string_view tail = std::string_view(buffer_).substr(tail_start);
  if (!is_blank(tail)) fail("stream ended inside an event", tail);
}

WatchPosition::WatchPosition(std::string list_resource_version)
    : resource_version_(std::move(list_resource_version)) {}

std::optional<ApiError> WatchPosition::observe(const WatchEvent& event) {
  if (event.type != WatchEvent::Error) {
    std::string seen = object_resource_version(event.object);
    if (!seen.empty()) resource_version_ = std::move(seen);
    return std::nullopt;
  }
  ApiError error = ApiError::from_status(event.object);
  observe_error(error);
  return error;
}

void WatchPosition::observe_error(const ApiError& error) {
  if (error.is_gone()) needs_relist_ = true;
}

void WatchPosition::reset(std::string list_resource_version) {
  resource_version_ = std::move(list_resource_version);
  needs_relist_ = false;
}

ListOptions WatchPosition::resume_options(ListOptions base) const {
  if (needs_relist_) {
    throw std::logic_error("watch: resourceVersion " + resource_version_ +
                           " has expired; relist before watching again");
  }
  base.watch = true;
  base.allow_watch_bookmarks = true;
  base.resource_version = resource_version_;
  base.resource_version_match.clear();
  base.limit.reset();
  base.continue_token.clear();
  return base;
}

}  // namespace tessel::kube
