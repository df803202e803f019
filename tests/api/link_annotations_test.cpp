// The prober's Node annotation: a round trip, aggregates by site, and every kind of bad value
// refused with the node, the annotation and the peer named.
#include "api/link_annotations.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "api/manifest_error.h"

namespace tessel::api {
namespace {

std::string error_of(const std::string& value) {
  try {
    parse_node_links(value, "gpu-node-1");
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string one_peer(const std::string& peer, const std::string& entry) {
  return R"({"version": 1, "peers": {")" + peer + "\": " + entry + "}}";
}

TEST(LinkAnnotations, RoundTripsAndGivesTheLinkTheCostModelReads) {
  NodeLinks links;
  links.peers["gpu-node-2"] = {0.2, 0.35, 0.9, 9.4, "2026-11-26T00:12:03Z"};
  links.peers["member-b/gpu-node-7"] = {48, 51.5, 0.05, 0.8, "2026-11-26T00:13:40Z"};
  const std::string value = format_node_links(links);
  EXPECT_EQ(parse_node_links(value, "gpu-node-1"), links);
  const placement::Link far = links.peers["member-b/gpu-node-7"].link();
  EXPECT_DOUBLE_EQ(far.latency_ms, 24);
  EXPECT_DOUBLE_EQ(far.bandwidth_gbps, 0.8);
}

TEST(LinkAnnotations, ValuesAreWrittenToFourSignificantDigits) {
  NodeLinks links;
  links.peers["gpu-2"] = {20.156888000000002, 20.17387, 0.013012224818129936, 1.8982566469609843,
                          "2026-11-26T09:02:36Z"};
  links.peers["gpu-3"] = {0.21, 0.35, 0.9, 9.4, "2026-11-26T09:02:36Z"};
  const std::string value = format_node_links(links);
  EXPECT_NE(value.find(R"("gpu-2":{"at":"2026-11-26T09:02:36Z","gbps":[0.01301,1.898],)"
                       R"("rttMs":[20.16,20.17]})"),
            std::string::npos)
      << value;
  const NodeLinks back = parse_node_links(value, "gpu-1");
  EXPECT_EQ(back.peers.at("gpu-2"),
            (LinkMeasurement{20.16, 20.17, 0.01301, 1.898, "2026-11-26T09:02:36Z"}));
  EXPECT_EQ(back.peers.at("gpu-3"), links.peers.at("gpu-3"));  // already four digits: unchanged
  EXPECT_EQ(significant(148.23), 148.2);
  EXPECT_EQ(significant(0.000123456), 0.0001235);
}

TEST(LinkAnnotations, BadValuesAreRefusedNamingTheNodeAndPeer) {
  const std::string field = "gpu-node-1: metadata.annotations[net.tessel.dev/links]";
  EXPECT_EQ(error_of("not json"), field + ": is not a JSON object");
  EXPECT_EQ(error_of(R"({"version": 2, "peers": {}})"), field + ".version: must be 1, got 2");
  EXPECT_EQ(error_of(R"({"version": 1, "peers": []})"),
            field + ".peers: must be an object, got []");
  EXPECT_EQ(error_of(one_peer(
                "Node_2", R"({"rttMs": [1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})")),
            field + ".peers[Node_2]: not a node name or <cluster>/<node>");
  EXPECT_EQ(error_of(one_peer(
                "a/b/c", R"({"rttMs": [1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})")),
            field + ".peers[a/b/c]: not a node name or <cluster>/<node>");
  EXPECT_EQ(
      error_of(one_peer("n2", R"({"rttMs": [1], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})")),
      field + ".peers[n2].rttMs: must be a list of two numbers, got [1]");
  EXPECT_EQ(error_of(one_peer(
                "n2", R"({"rttMs": [-1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})")),
            field + ".peers[n2].rttMs[0]: must be in [0, 120000] ms, got -1");
  EXPECT_EQ(error_of(one_peer(
                "n2", R"({"rttMs": [5, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})")),
            field + ".peers[n2].rttMs[1]: must be in [5, 120000] ms (and >= the median), got 2");
  EXPECT_EQ(error_of(one_peer(
                "n2", R"({"rttMs": [1, 2], "gbps": [1, 1e-300], "at": "2026-11-26T00:00:00Z"})")),
            field + ".peers[n2].gbps[1]: must be in [1e-06, 100000] Gbit/s, got 1e-300");
  EXPECT_EQ(
      error_of(one_peer(
          "n2", R"({"rttMs": [1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z", "loss": 0})")),
      field + ".peers[n2].loss: unknown field");
  EXPECT_NE(error_of(std::string(300 * 1024, ' ')).find("more than the limit of 229376"),
            std::string::npos);
  // Every error at once.
  const std::string two = error_of(
      R"({"version": 1, "peers": {"n2": {"rttMs": [-1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"},
                                  "n3": {"rttMs": [1, 2], "gbps": [0, 2], "at": "2026-11-26T00:00:00Z"}}})");
  EXPECT_NE(two.find("2 errors"), std::string::npos) << two;
  EXPECT_NE(two.find("peers[n2].rttMs[0]"), std::string::npos) << two;
  EXPECT_NE(two.find("peers[n3].gbps[0]"), std::string::npos) << two;
}

TEST(LinkAnnotations, AggregatesBySiteRoundTripBesideNamedPeers) {
  NodeLinks links;
  links.peers["gpu-node-2"] = {0.2, 0.35, 0.9, 9.4, "2026-11-26T00:12:03Z"};
  links.peers["*"] = {0.3, 0.5, 0.8, 9.0, "2026-11-26T00:10:00Z"};
  links.peers["member-b/gpu-node-7"] = {48, 51.5, 0.05, 0.8, "2026-11-26T00:13:40Z"};
  links.peers["member-b/*"] = {50, 60, 0.04, 0.7, "2026-11-26T00:09:00Z"};
  links.peers["member-c.example/*"] = {90, 99, 0.01, 0.2, "2026-11-26T00:08:00Z"};
  const std::string value = format_node_links(links);
  // Written by "<node>" (the cluster unknown) and by "<cluster>/<node>".
  EXPECT_EQ(parse_node_links(value, "gpu-node-1"), links);
  EXPECT_EQ(parse_node_links(value, "member-a/gpu-node-1"), links);
  EXPECT_TRUE(is_aggregate("*"));
  EXPECT_TRUE(is_aggregate("member-b/*"));
  EXPECT_FALSE(is_aggregate("gpu-node-2"));
  EXPECT_FALSE(is_aggregate("member-b/gpu-node-7"));
  EXPECT_EQ(site_aggregate("gpu-node-2"), "*");
  EXPECT_EQ(site_aggregate("member-b/gpu-node-7"), "member-b/*");
}

TEST(LinkAnnotations, BadAggregateNamesAreRefusedWithTheReason) {
  const std::string field = "member-a/gpu-node-1: metadata.annotations[net.tessel.dev/links]";
  const std::string entry = R"({"rttMs": [1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})";
  const auto refusal = [&](const std::string& peer) {
    try {
      parse_node_links(one_peer(peer, entry), "member-a/gpu-node-1");
    } catch (const ManifestError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string star =
      ": '*' stands only for a whole site: \"*\" (the rest of the node's own cluster) or "
      "\"<cluster>/*\" (the rest of that cluster)";
  for (const std::string peer : {"a*", "*/x", "member-b/*x", "**", "member-b/gpu-*", "a/b/*"}) {
    EXPECT_EQ(refusal(peer), field + ".peers[" + peer + "]" + star) << peer;
  }
  for (const std::string peer : {"/*", "*/*", "Member-B/*"}) {
    EXPECT_EQ(refusal(peer), field + ".peers[" + peer + "]: not a cluster name before \"/*\"")
        << peer;
  }
  EXPECT_EQ(refusal("member-a/*"),
            field +
                ".peers[member-a/*]: aggregates the annotated node's own cluster: its aggregate is "
                "written \"*\"");
  EXPECT_EQ(refusal("member-b/*"), "(accepted)");
  EXPECT_EQ(refusal("*"), "(accepted)");
}

TEST(LinkAnnotations, AnAggregateIsTheMedianOfEachFieldAndTheOldestTime) {
  const LinkMeasurement one = aggregate_measurements({{1, 2, 0.5, 5, "2026-11-26T00:12:03Z"}});
  EXPECT_EQ(one, (LinkMeasurement{1, 2, 0.5, 5, "2026-11-26T00:12:03Z"}));
  // Odd count: the middle value of each field, each field on its own.
  const LinkMeasurement odd = aggregate_measurements({{1, 9, 0.5, 5, "2026-11-26T00:12:03Z"},
                                                      {3, 4, 0.1, 9, "2026-11-26T00:11:00Z"},
                                                      {2, 3, 0.9, 1, "2026-11-26T01:00:00+02:00"}});
  EXPECT_EQ(odd, (LinkMeasurement{2, 4, 0.5, 5, "2026-11-26T01:00:00+02:00"}));
  // Even count: the mean of the two middle values; p90 stays >= p50, so the entry parses.
  const LinkMeasurement even = aggregate_measurements({{1, 1, 1, 1, "2026-11-26T00:00:00Z"},
                                                       {4, 8, 2, 10, "2026-11-26T00:00:00Z"},
                                                       {2, 3, 3, 20, "2026-11-26T00:00:00Z"},
                                                       {10, 11, 4, 40, "2026-11-26T00:00:00Z"}});
  EXPECT_EQ(even, (LinkMeasurement{3, 5.5, 2.5, 15, "2026-11-26T00:00:00Z"}));
  NodeLinks links;
  links.peers["*"] = even;
  EXPECT_EQ(parse_node_links(format_node_links(links), "gpu-node-1"), links);
  EXPECT_THROW(aggregate_measurements({}), std::invalid_argument);
  EXPECT_THROW(aggregate_measurements({{1, 2, 1, 2, "yesterday"}}), std::invalid_argument);
}

TEST(LinkAnnotations, ABulkRateOverSeveralStreamsCarriesTheirCountAndOneStreamsRate) {
  NodeLinks links;
  links.peers["member-b/gpu-node-7"] = {150, 151, 0.02, 0.9, "2026-11-26T00:13:40Z", 5, 0.2236};
  links.peers["gpu-node-2"] = {0.2, 0.35, 0.9, 9.4, "2026-11-26T00:12:03Z"};  // one stream
  const std::string value = format_node_links(links);
  EXPECT_NE(value.find(R"("streams":[5,0.2236])"), std::string::npos) << value;
  EXPECT_NE(value.find(R"("gpu-node-2":{"at":"2026-11-26T00:12:03Z","gbps":[0.9,9.4],)"
                       R"("rttMs":[0.2,0.35]})"),
            std::string::npos)
      << value;
  EXPECT_EQ(parse_node_links(value, "gpu-node-1"), links);
  // What the planner prices is the bulk rate of all the streams.
  EXPECT_DOUBLE_EQ(links.peers["member-b/gpu-node-7"].link().bandwidth_gbps, 0.9);

  const std::string at = "gpu-node-1: metadata.annotations[net.tessel.dev/links].peers[gpu-2]";
  const auto with_streams = [](const std::string& streams) {
    return one_peer("gpu-2", R"({"rttMs": [1, 2], "gbps": [0.5, 5], "streams": )" + streams +
                                 R"(, "at": "2026-11-26T00:12:03Z"})");
  };
  EXPECT_EQ(error_of(with_streams("[4, 1.5]")), "(accepted)");
  EXPECT_EQ(error_of(with_streams("4")),
            at + ".streams: must be a list of two numbers, got 4");
  const std::string count = ".streams[0]: must be a whole number of TCP streams in [2, 16] (one "
                            "stream is written without \"streams\"), got ";
  EXPECT_EQ(error_of(with_streams("[1, 1.5]")), at + count + "1");
  EXPECT_EQ(error_of(with_streams("[17, 1.5]")), at + count + "17");
  EXPECT_EQ(error_of(with_streams("[2.5, 1.5]")), at + count + "2.5");
  EXPECT_EQ(error_of(with_streams("[4, 0]")),
            at + ".streams[1]: must be in [1e-06, 100000] Gbit/s, got 0");
}

TEST(LinkAnnotations, AnAggregatesStreamsAreTheMedianCountAndOneStreamRate) {
  // A one-stream measurement's stream rate is its bulk rate.
  const LinkMeasurement mixed =
      aggregate_measurements({{150, 151, 0.02, 0.9, "2026-11-26T00:00:00Z", 5, 0.2},
                              {150, 151, 0.02, 0.3, "2026-11-26T00:00:00Z"},
                              {150, 151, 0.02, 0.8, "2026-11-26T00:00:00Z", 4, 0.25}});
  EXPECT_EQ(mixed.streams, 4);
  EXPECT_DOUBLE_EQ(mixed.stream_gbps, 0.25);
  EXPECT_DOUBLE_EQ(mixed.bulk_gbps, 0.8);
  // Mostly one stream: the aggregate is one stream, written without "streams".
  const LinkMeasurement one =
      aggregate_measurements({{1, 1, 1, 9, "2026-11-26T00:00:00Z", 5, 2},
                              {1, 1, 1, 9, "2026-11-26T00:00:00Z"},
                              {1, 1, 1, 9, "2026-11-26T00:00:00Z"}});
  EXPECT_EQ(one.streams, 1);
  EXPECT_EQ(one.stream_gbps, 0);
}

}  // namespace
}  // namespace tessel::api
