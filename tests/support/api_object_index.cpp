#include "tests/support/api_object_index.h"

#include <algorithm>

namespace tessel::testing {
namespace {

bool key_less(const ObjectIndex::Entry& entry, const std::string& key) { return entry.key < key; }

}  // namespace

StoredObject ObjectIndex::find(const std::string& key) const {
  const auto found = lower_bound(key);
  return found != entries_.end() && found->key == key ? found->object : nullptr;
}

void ObjectIndex::put(const std::string& key, StoredObject object) {
  const auto at = std::lower_bound(entries_.begin(), entries_.end(), key, key_less);
  if (at != entries_.end() && at->key == key) {
    at->object = std::move(object);
  } else {
    entries_.insert(at, {key, std::move(object)});
  }
}

void ObjectIndex::erase(const std::string& key) {
  const auto at = std::lower_bound(entries_.begin(), entries_.end(), key, key_less);
  if (at != entries_.end() && at->key == key) entries_.erase(at);
}

ObjectIndex::Iterator ObjectIndex::lower_bound(const std::string& key) const {
  return std::lower_bound(entries_.begin(), entries_.end(), key, key_less);
}

ObjectIndex::Iterator ObjectIndex::end_of(const KeyRange& range) const {
  return range.last.empty() ? entries_.end() : lower_bound(range.last);
}

KeyRange KeyRange::of_namespace(const std::string& namespace_) {
  // Every key of the namespace starts with "ns/", and '0' is the character after '/'.
  if (namespace_.empty()) return {"", ""};
  return {namespace_ + "/", namespace_ + "0"};
}

IndexAtVersion::IndexAtVersion(const ObjectIndex& index, const KeyRange& range,
                               const PastStates& past)
    : index_(index), range_(range), past_(past) {}

ObjectIndex::Iterator IndexAtVersion::live_begin(const std::string& key) const {
  return std::min(index_.lower_bound(std::max(key, range_.first)), index_.end_of(range_));
}

std::optional<std::string> IndexAtVersion::scan(const std::string& start,
                                                const Visitor& visit) const {
  auto live = live_begin(start);
  const auto live_end = index_.end_of(range_);
  auto past = past_.lower_bound(start);
  while (live != live_end || past != past_.end()) {
    // The smaller key next; where both have it, the past state wins.
    const bool take_past = live == live_end || (past != past_.end() && past->first <= live->key);
    const std::string& key = take_past ? past->first : live->key;
    const StoredObject& object = take_past ? past->second : live->object;
    if (object && !visit(key, object)) return key;
    if (take_past) {
      if (live != live_end && live->key == past->first) ++live;
      ++past;
    } else {
      ++live;
    }
  }
  return std::nullopt;
}

std::size_t IndexAtVersion::count_from(const std::string& key) const {
  const auto live = live_begin(key);
  const auto live_end = index_.end_of(range_);
  auto count = static_cast<std::ptrdiff_t>(live_end - live);
  // Each changed key counts as it was then instead of as it is now.
  for (auto past = past_.lower_bound(key); past != past_.end(); ++past) {
    if (past->second) ++count;
    if (index_.find(past->first)) --count;
  }
  return static_cast<std::size_t>(count);
}

}  // namespace tessel::testing
