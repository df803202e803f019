#include "kube/watch_stream.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fixtures.h"
#include "kube/object.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using testing::kFixtures;
using Type = WatchEvent::Type;

std::string raw_fixture(const std::string& name) {
  std::ifstream in(kFixtures / name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open fixture " + name);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<WatchEvent> drain(WatchDecoder& decoder) {
  std::vector<WatchEvent> events;
  while (auto event = decoder.next()) events.push_back(std::move(*event));
  return events;
}

std::vector<WatchEvent> decode_chunks(const std::vector<std::string_view>& chunks) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  for (std::string_view chunk : chunks) {
    decoder.feed(chunk);
    for (auto& event : drain(decoder)) events.push_back(std::move(event));
  }
  decoder.finish();
  return events;
}

std::vector<WatchEvent> decode_whole(std::string_view body) { return decode_chunks({body}); }

std::vector<WatchEvent> decode_bytewise(std::string_view body) {
  std::vector<std::string_view> chunks;
  for (std::size_t i = 0; i < body.size(); ++i) chunks.push_back(body.substr(i, 1));
  return decode_chunks(chunks);
}

// Chunks of 1..max_size bytes, as libcurl's write callback might see them.
std::vector<WatchEvent> decode_random_chunks(std::string_view body, unsigned seed,
                                             std::size_t max_size) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<std::size_t> size(1, max_size);
  std::vector<std::string_view> chunks;
  for (std::size_t at = 0; at < body.size();) {
    const std::size_t length = std::min(size(random), body.size() - at);
    chunks.push_back(body.substr(at, length));
    at += length;
  }
  return decode_chunks(chunks);
}

std::vector<Type> types_of(const std::vector<WatchEvent>& events) {
  std::vector<Type> types;
  for (const auto& event : events) types.push_back(event.type);
  return types;
}

void expect_same(const std::vector<WatchEvent>& expected, const std::vector<WatchEvent>& actual,
                 const std::string& how) {
  ASSERT_EQ(expected.size(), actual.size()) << how;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].type, actual[i].type) << how << ", event " << i;
    EXPECT_EQ(expected[i].object, actual[i].object) << how << ", event " << i;
  }
}

struct StreamCase {
  std::string file;
  std::vector<Type> types;  // as the fixture README's table lists them
};

const std::vector<StreamCase>& stream_cases() {
  using enum WatchEvent::Type;
  static const std::vector<StreamCase> cases = {
      {"watch-stream-bookmark.jsonl", {Added, Modified, Modified, Deleted, Bookmark, Bookmark}},
      {"watch-stream-pods.jsonl",
       {Added, Modified, Modified, Modified, Deleted, Bookmark, Bookmark, Bookmark}},
      {"watch-stream-nodes.jsonl", {Modified, Bookmark, Bookmark}},
      {"watch-stream-finalizer-delete.jsonl", {Modified, Modified, Deleted}},
      {"watch-stream-labelselector-transitions.jsonl", {Deleted, Added}},
      {"watch-stream-rv0-initial-added.jsonl", {Added, Added, Added}},
      {"watch-stream-no-rv-initial-added.jsonl", {Added, Added, Added}},
      {"watch-stream-table.jsonl", {Modified, Modified}},
      {"watch-410-expired-too-old-rv.jsonl", {Error}},
      {"watch-410-expired-after-restart-cache.jsonl", {Error}},
      {"watch-410-expired-etcd-compacted.jsonl", {Error}},
  };
  return cases;
}

TEST(WatchDecoder, FixtureStreamsHaveTheEventsTheReadmeLists) {
  for (const auto& stream : stream_cases()) {
    EXPECT_EQ(types_of(decode_whole(raw_fixture(stream.file))), stream.types) << stream.file;
  }
}

TEST(WatchDecoder, ChunkingDoesNotChangeTheEvents) {
  for (const auto& stream : stream_cases()) {
    const std::string body = raw_fixture(stream.file);
    const std::vector<WatchEvent> whole = decode_whole(body);
    expect_same(whole, decode_bytewise(body), stream.file + " byte by byte");
    for (unsigned seed = 1; seed <= 5; ++seed) {
      expect_same(whole, decode_random_chunks(body, seed, 97),
                  stream.file + " random chunks, seed " + std::to_string(seed));
    }
    expect_same(whole, decode_random_chunks(body, 42, 4096), stream.file + " large chunks");
  }
}

TEST(WatchDecoder, SeveralStreamsInOneChunkAndBlankLines) {
  const std::string body = raw_fixture("watch-stream-nodes.jsonl") + "\n\r\n" +
                           raw_fixture("watch-stream-finalizer-delete.jsonl");
  EXPECT_EQ(decode_whole(body).size(), 6u);
}

TEST(WatchDecoder, EventsBeforeAMalformedLineAreDelivered) {
  WatchDecoder decoder;
  decoder.feed(raw_fixture("watch-stream-nodes.jsonl") + "{\"type\":\n");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(decoder.next().has_value());
  EXPECT_THROW(decoder.next(), WatchDecodeError);
}

std::string decode_error(std::string_view body) {
  try {
    decode_whole(body);
  } catch (const WatchDecodeError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no WatchDecodeError for " << body;
  return {};
}

// nlohmann throws out_of_range, not parse_error, for a number no double holds (tests/fuzz found it
// in job.json and safetensors); it escaped the decoder too (regressions/watch_stream).
TEST(WatchDecoder, ANumberOutOfRangeIsADecodeError) {
  EXPECT_EQ(decode_error("{\"type\":\"ADDED\",\"object\":{\"a\":1e400}}\n"),
            "watch stream: a number out of the range of a double: "
            "{\"type\":\"ADDED\",\"object\":{\"a\":1e400}}");
}

TEST(WatchDecoder, MalformedJsonQuotesAtMost200BytesOfTheLine) {
  const std::string line = "{\"type\":\"ADDED\",\"object\":{\"data\":\"" + std::string(300, 'x') +
                           "SECRET-TAIL\"}" + std::string(1000, 'y');
  const std::string message = decode_error(line + "\n");
  EXPECT_NE(message.find("malformed JSON"), std::string::npos) << message;
  EXPECT_NE(message.find(line.substr(0, 200)), std::string::npos) << message;
  EXPECT_EQ(message.find(line.substr(0, 201)), std::string::npos) << message;
  EXPECT_EQ(message.find("SECRET-TAIL"), std::string::npos) << message;
  EXPECT_EQ(message.find("yyy"), std::string::npos) << message;
}

TEST(WatchDecoder, ShortMalformedLineIsQuotedWhole) {
  const std::string message = decode_error("{\"type\":\"ADDED\",\"object\":{\n");
  EXPECT_NE(message.find("{\"type\":\"ADDED\",\"object\":{"), std::string::npos) << message;
}

TEST(WatchDecoder, InvalidEventsNameTheProblem) {
  EXPECT_NE(decode_error("{\"type\":\"UPSERTED\",\"object\":{}}\n").find("unknown event type"),
            std::string::npos);
  EXPECT_NE(decode_error("{\"type\":\"added\",\"object\":{}}\n").find("unknown event type"),
            std::string::npos);
  EXPECT_NE(decode_error("{\"object\":{}}\n").find("no \"type\""), std::string::npos);
  EXPECT_NE(decode_error("{\"type\":3,\"object\":{}}\n").find("no \"type\""), std::string::npos);
  EXPECT_NE(decode_error("{\"type\":\"ADDED\"}\n").find("no \"object\""), std::string::npos);
  EXPECT_NE(decode_error("{\"type\":\"ADDED\",\"object\":null}\n").find("no \"object\""),
            std::string::npos);
  EXPECT_NE(decode_error("[\"ADDED\"]\n").find("not a JSON object"), std::string::npos);
}

TEST(WatchDecoder, StreamCutInsideAnEventFailsAtFinish) {
  const std::string body = raw_fixture("watch-stream-bookmark.jsonl");
  WatchDecoder decoder;
  decoder.feed(std::string_view(body).substr(0, body.size() - 10));
  EXPECT_EQ(drain(decoder).size(), 5u);
  try {
    decoder.finish();
    FAIL() << "finish() accepted a cut-off event";
  } catch (const WatchDecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("ended inside an event"), std::string::npos) << e.what();
  }
}

TEST(WatchDecoder, CompleteEventWithoutItsNewlineIsCutOff) {
  EXPECT_NE(decode_error("{\"type\":\"ADDED\",\"object\":{}}").find("ended inside an event"),
            std::string::npos);
}

TEST(WatchDecoder, EmptyOrWhitespaceTailFinishesCleanly) {
  EXPECT_TRUE(decode_whole("").empty());
  EXPECT_TRUE(decode_whole("\n  \r\n").empty());
  EXPECT_EQ(decode_whole("{\"type\":\"ADDED\",\"object\":{}}\n \r").size(), 1u);
}

TEST(WatchEventType, WireNames) {
  EXPECT_EQ(to_string(WatchEvent::Added), "ADDED");
  EXPECT_EQ(to_string(WatchEvent::Modified), "MODIFIED");
  EXPECT_EQ(to_string(WatchEvent::Deleted), "DELETED");
  EXPECT_EQ(to_string(WatchEvent::Bookmark), "BOOKMARK");
  EXPECT_EQ(to_string(WatchEvent::Error), "ERROR");
}

TEST(WatchBookmark, CarriesOnlyTheResourceVersion) {
  for (const auto& stream : stream_cases()) {
    for (const auto& event : decode_whole(raw_fixture(stream.file))) {
      if (event.type != WatchEvent::Bookmark) continue;
      EXPECT_FALSE(object_resource_version(event.object).empty()) << stream.file;
      // Built-in kinds add zero values ("creationTimestamp": null), nothing more.
      for (const auto& [key, value] : event.object.at("metadata").items()) {
        if (key != "resourceVersion") {
          EXPECT_TRUE(value.is_null()) << stream.file << " " << key;
        }
      }
    }
  }
  const auto bookmark = decode_whole(raw_fixture("watch-stream-bookmark.jsonl")).back();
  EXPECT_EQ(bookmark.object.at("metadata"), json({{"resourceVersion", "364"}}));
}

TEST(WatchPosition, LastResourceVersionIsTheLastEvents) {
  for (const auto& stream : stream_cases()) {
    const auto events = decode_whole(raw_fixture(stream.file));
    if (events.back().type == WatchEvent::Error) continue;
    WatchPosition position("1");
    for (const auto& event : events) EXPECT_FALSE(position.observe(event).has_value());
    EXPECT_EQ(position.resource_version(), object_resource_version(events.back().object))
        << stream.file;
    EXPECT_FALSE(position.needs_relist());
  }
}

TEST(WatchPosition, BookmarksAdvanceThePosition) {
  const auto events = decode_whole(raw_fixture("watch-stream-nodes.jsonl"));
  WatchPosition position("200");
  position.observe(events.at(1));
  EXPECT_EQ(position.resource_version(), "248");
}

TEST(WatchPosition, ResumeOptionsWatchFromTheLastResourceVersion) {
  ListOptions base;
  base.label_selector = "tessel.dev/team=llm";
  base.field_selector = "metadata.name=gpt-a";
  base.limit = 500;
  base.continue_token = "abc";
  base.resource_version = "0";
  base.resource_version_match = "NotOlderThan";
  base.timeout_seconds = 300;

  WatchPosition position("351");
  for (const auto& event : decode_whole(raw_fixture("watch-stream-bookmark.jsonl"))) {
    position.observe(event);
  }
  const ListOptions resume = position.resume_options(base);
  EXPECT_EQ(resume.resource_version, "364");
  EXPECT_TRUE(resume.watch);
  EXPECT_TRUE(resume.allow_watch_bookmarks);
  EXPECT_EQ(resume.label_selector, base.label_selector);
  EXPECT_EQ(resume.field_selector, base.field_selector);
  EXPECT_EQ(resume.timeout_seconds, 300);
  EXPECT_FALSE(resume.limit.has_value());
  EXPECT_TRUE(resume.continue_token.empty());
  EXPECT_TRUE(resume.resource_version_match.empty());
}

TEST(WatchPosition, ExpiredWatchesNeedARelist) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"watch-410-expired-too-old-rv.jsonl", "too old resource version: 100 (261)"},
      {"watch-410-expired-after-restart-cache.jsonl", "too old resource version: 5 (431)"},
      {"watch-410-expired-etcd-compacted.jsonl",
       "The resourceVersion for the provided watch is too old."},
  };
  for (const auto& [file, message] : cases) {
    WatchPosition position("100");
    const auto events = decode_whole(raw_fixture(file));
    ASSERT_EQ(events.size(), 1u) << file;
    const std::optional<ApiError> error = position.observe(events[0]);
    ASSERT_TRUE(error.has_value()) << file;
    EXPECT_EQ(error->code(), 410) << file;
    EXPECT_EQ(error->reason(), "Expired") << file;
    EXPECT_TRUE(error->is_gone()) << file;
    EXPECT_EQ(error->message(), message) << file;
    EXPECT_NE(std::string(error->what()).find(message), std::string::npos) << error->what();
    EXPECT_TRUE(position.needs_relist()) << file;
    EXPECT_EQ(position.resource_version(), "100") << file;
    EXPECT_THROW(position.resume_options({}), std::logic_error) << file;

    position.reset("431");
    EXPECT_FALSE(position.needs_relist());
    EXPECT_EQ(position.resume_options({}).resource_version, "431");
  }
}

TEST(WatchPosition, Http410OnTheWatchRequestNeedsARelist) {
  WatchPosition position("100");
  const json status = {{"kind", "Status"},    {"apiVersion", "v1"},
                       {"status", "Failure"}, {"message", "too old resource version: 100 (261)"},
                       {"reason", "Expired"}, {"code", 410}};
  position.observe_error(ApiError(410, status.dump()));
  EXPECT_TRUE(position.needs_relist());
}

TEST(WatchPosition, OtherErrorsResumeFromTheSamePlace) {
  WatchPosition position("364");
  const WatchEvent internal{WatchEvent::Error, json{{"kind", "Status"},
                                                    {"status", "Failure"},
                                                    {"message", "etcd leader changed"},
                                                    {"reason", "InternalError"},
                                                    {"code", 500}}};
  const auto error = position.observe(internal);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), 500);
  EXPECT_FALSE(position.needs_relist());
  position.observe_error(ApiError(503, "service unavailable"));
  EXPECT_FALSE(position.needs_relist());
  EXPECT_EQ(position.resume_options({}).resource_version, "364");
}

}  // namespace
}  // namespace tessel::kube
