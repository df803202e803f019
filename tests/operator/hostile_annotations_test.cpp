// net.tessel.dev/links annotations written by a hostile or broken node: every malformed or absurd
// value is refused with the field and the reason named (never a crash, never a message that
// prints the whole of a huge value), and build_cluster_topology then estimates that node's links,
// says so in a note and lists the node as rejected. Measurements too old, or dated in the future,
// are taken as missing, aggregates ("*", "<cluster>/*") as named ones.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "api/link_annotations.h"
#include "api/manifest_error.h"
#include "kube/object.h"
#include "operator/controller/cluster_topology.h"
#include "placement/limits.h"

namespace tessel::controller {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::system_clock;

const std::string kField = "member-a/gpu-1: metadata.annotations[net.tessel.dev/links]";
const std::string kAt = "2026-11-26T00:00:00Z";

// The refusal of `value` as a links annotation of member-a/gpu-1; "(accepted)" when none.
std::string refusal(const std::string& value) {
  try {
    api::parse_node_links(value, "member-a/gpu-1");
  } catch (const api::ManifestError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string entry(const std::string& rtt, const std::string& gbps, const std::string& at) {
  return R"({"rttMs": )" + rtt + R"(, "gbps": )" + gbps + R"(, "at": )" + at + "}";
}
std::string good_entry() { return entry("[0.2, 0.3]", "[5, 40]", "\"" + kAt + "\""); }
std::string one_peer(const std::string& peer, const std::string& value) {
  return R"({"version": 1, "peers": {")" + peer + "\": " + value + "}}";
}

#define EXPECT_REFUSED(value, expected)                                         \
  do {                                                                          \
    const std::string got = refusal(value);                                     \
    EXPECT_NE(got.find(expected), std::string::npos) << "refusal was: " << got; \
  } while (0)

TEST(HostileAnnotations, NotJsonOrNotAnObjectIsRefused) {
  EXPECT_EQ(refusal(R"({"version": 1, "peers": {)"), kField + ": is not a JSON object");
  EXPECT_EQ(refusal("[1, 2]"), kField + ": is not a JSON object");
  EXPECT_EQ(refusal(""), kField + ": is not a JSON object");
  EXPECT_EQ(refusal(std::string("\xff\xfe{}", 4)), kField + ": is not a JSON object");
  // NaN and Infinity are not JSON.
  EXPECT_EQ(refusal(one_peer("gpu-2", entry("[NaN, 1]", "[1, 2]", "\"" + kAt + "\""))),
            kField + ": is not a JSON object");
}

TEST(HostileAnnotations, WrongVersionIsRefusedNamingIt) {
  EXPECT_EQ(refusal(R"({"version": 2, "peers": {}})"), kField + ".version: must be 1, got 2");
  EXPECT_EQ(refusal(R"({"version": "1", "peers": {}})"), kField + ".version: must be 1, got \"1\"");
  EXPECT_EQ(refusal(R"({"peers": {}})"), kField + ".version: must be 1, got null");
  // A version nested 110,000 deep (as deep as the size limit allows) is described, not printed
  // or copied (both recurse).
  const std::string deep = std::string(110000, '[') + std::string(110000, ']');
  EXPECT_EQ(refusal(R"({"version": )" + deep + R"(, "peers": {}})"),
            kField + ".version: must be 1, got a list of 1 items");
  EXPECT_EQ(refusal(R"({"version": 1, "peers": "all"})"),
            kField + ".peers: must be an object, got \"all\"");
}

TEST(HostileAnnotations, OversizeIsRefusedBeforeParsing) {
  std::string big = R"({"version": 1, "peers": {}, "pad": ")";
  big += std::string(api::kMaxLinksAnnotationBytes, 'x') + "\"}";
  EXPECT_REFUSED(big, kField + ": is " + std::to_string(big.size()) +
                          " bytes, more than the limit of " +
                          std::to_string(api::kMaxLinksAnnotationBytes));
}

TEST(HostileAnnotations, TooManyPeersAreRefused) {
  std::string value = R"({"version": 1, "peers": {)";
  for (int i = 0; i <= placement::kMaxDevices; ++i) {
    value += (i ? ",\"n" : "\"n") + std::to_string(i) + "\":0";
  }
  value += "}}";
  ASSERT_LE(value.size(), api::kMaxLinksAnnotationBytes);
  EXPECT_EQ(refusal(value), kField + ".peers: lists 8193 peers, more than the limit of 8192");
}

TEST(HostileAnnotations, AbsurdRoundTripsAreRefused) {
  const std::string at = "\"" + kAt + "\"";
  EXPECT_REFUSED(one_peer("gpu-2", entry("[-0.5, 1]", "[1, 2]", at)),
                 ".peers[gpu-2].rttMs[0]: must be in [0, 120000] ms, got -0.5");
  EXPECT_REFUSED(one_peer("gpu-2", entry("[1e300, 1e301]", "[1, 2]", at)),
                 ".peers[gpu-2].rttMs[0]: must be in [0, 120000] ms, got 1e+300");
  // Beyond a double: whether the parser refuses it or reads infinity, it is refused.
  EXPECT_NE(refusal(one_peer("gpu-2", entry("[1e400, 1e400]", "[1, 2]", at))), "(accepted)");
  // p90 below the median.
  EXPECT_REFUSED(one_peer("gpu-2", entry("[10, 2]", "[1, 2]", at)),
                 ".peers[gpu-2].rttMs[1]: must be in [10, 120000] ms (and >= the median), got 2");
  EXPECT_REFUSED(one_peer("gpu-2", entry("\"fast\"", "[1, 2]", at)),
                 ".peers[gpu-2].rttMs: must be a list of two numbers, got \"fast\"");
  EXPECT_REFUSED(one_peer("gpu-2", entry("[1, 2, 3]", "[1, 2]", at)),
                 ".peers[gpu-2].rttMs: must be a list of two numbers, got [1, 2, 3]");
  // Nested 110,000 deep inside a pair: described, neither copied nor printed.
  const std::string deep = std::string(110000, '[') + std::string(110000, ']');
  EXPECT_REFUSED(one_peer("gpu-2", entry("[1, " + deep + "]", "[1, 2]", at)),
                 ".peers[gpu-2].rttMs: must be a list of two numbers, got a list of 2 items");
}

TEST(HostileAnnotations, AbsurdThroughputIsRefused) {
  const std::string at = "\"" + kAt + "\"";
  EXPECT_REFUSED(one_peer("gpu-2", entry("[1, 2]", "[1, 1e9]", at)),
                 ".peers[gpu-2].gbps[1]: must be in [1e-06, 100000] Gbit/s, got 1000000000");
  EXPECT_REFUSED(one_peer("gpu-2", entry("[1, 2]", "[0, 2]", at)),
                 ".peers[gpu-2].gbps[0]: must be in [1e-06, 100000] Gbit/s, got 0");
  EXPECT_REFUSED(one_peer("gpu-2", entry("[1, 2]", "[-5, 2]", at)),
                 ".peers[gpu-2].gbps[0]: must be in [1e-06, 100000] Gbit/s, got -5");
  EXPECT_REFUSED(one_peer("gpu-2", entry("[1, 2]", "[1, \"10G\"]", at)),
                 ".peers[gpu-2].gbps: must be a list of two numbers, got [1, \"10G\"]");
}

TEST(HostileAnnotations, BadPeerNamesAreRefusedAndShownShort) {
  for (const std::string peer : {"Node_2", "a/b/c", "-gpu", "gpu..2", "/gpu-2", "member-b/"}) {
    EXPECT_EQ(refusal(one_peer(peer, good_entry())),
              kField + ".peers[" + peer + "]: not a node name or <cluster>/<node>")
        << peer;
  }
  EXPECT_EQ(refusal(R"({"version": 1, "peers": {"": )" + good_entry() + "}}"),
            kField + ".peers[]: not a node name or <cluster>/<node>");
  // A 100,000-character name is shown by its first 80 characters and its length.
  const std::string huge(100000, 'a');
  EXPECT_EQ(refusal(one_peer(huge, good_entry())),
            kField + ".peers[" + std::string(80, 'a') +
                "... (100000 bytes)]: not a node name or <cluster>/<node>");
  // Cut short, a name of two-byte characters stays UTF-8 (the message goes into JSON).
  std::string wide = "a";
  for (int i = 0; i < 100; ++i) wide += "\xc3\xa9";  // é: byte 80 is inside one
  const std::string shown = refusal(one_peer(wide, good_entry()));
  EXPECT_NE(shown.find("peers[" + wide.substr(0, 79) + "... (201 bytes)]"), std::string::npos)
      << shown;
  EXPECT_REFUSED(one_peer("gpu-2", R"({"rttMs": [1, 2], "gbps": [1, 2], "at": ")" + kAt +
                                       R"(", "trustMe": true})"),
                 ".peers[gpu-2].trustMe: unknown field");
}

TEST(HostileAnnotations, BadAggregateNamesAreRefusedWithTheReason) {
  // '*' anywhere but as the whole node name of a site.
  for (const std::string peer : {"a*", "*/x", "member-b/*x", "**", "*gpu-2", "member-b/**"}) {
    EXPECT_EQ(refusal(one_peer(peer, good_entry())),
              kField + ".peers[" + peer +
                  "]: '*' stands only for a whole site: \"*\" (the rest of the node's own "
                  "cluster) or \"<cluster>/*\" (the rest of that cluster)")
        << peer;
  }
  // "<cluster>/*" without a cluster's name.
  for (const std::string peer : {"/*", "*/*", "Member-B/*", "member_b/*"}) {
    EXPECT_EQ(refusal(one_peer(peer, good_entry())),
              kField + ".peers[" + peer + "]: not a cluster name before \"/*\"")
        << peer;
  }
  // The writer's own cluster has one spelling, "*".
  EXPECT_EQ(refusal(one_peer("member-a/*", good_entry())),
            kField +
                ".peers[member-a/*]: aggregates the annotated node's own cluster: its aggregate is "
                "written \"*\"");
  EXPECT_EQ(refusal(one_peer("*", good_entry())), "(accepted)");
  EXPECT_EQ(refusal(one_peer("member-b/*", good_entry())), "(accepted)");
  // An aggregate's values are checked as a named peer's.
  EXPECT_REFUSED(one_peer("member-b/*", entry("[1, 2]", "[1, 1e9]", "\"" + kAt + "\"")),
                 ".peers[member-b/*].gbps[1]: must be in [1e-06, 100000] Gbit/s, got 1000000000");
  EXPECT_REFUSED(one_peer("*", entry("[9, 2]", "[1, 2]", "\"" + kAt + "\"")),
                 ".peers[*].rttMs[1]: must be in [9, 120000] ms (and >= the median), got 2");
}

TEST(HostileAnnotations, ALinkToItselfIsRefused) {
  // By its node name (a peer of its own cluster) and by its full name.
  EXPECT_EQ(refusal(one_peer("gpu-1", good_entry())),
            kField + ".peers[gpu-1]: is the annotated node itself: a node has no link to itself");
  EXPECT_EQ(refusal(one_peer("member-a/gpu-1", good_entry())),
            kField +
                ".peers[member-a/gpu-1]: is the annotated node itself: a node has no link to "
                "itself");
  // The node of the same name in another cluster is another node.
  EXPECT_EQ(refusal(one_peer("member-b/gpu-1", good_entry())), "(accepted)");
}

TEST(HostileAnnotations, BadTimestampsAreRefused) {
  for (const std::string at :
       {"\"yesterday\"", "\"2026-13-01T00:00:00Z\"", "\"2026-02-30T00:00:00Z\"",
        "\"2026-11-26T24:00:00Z\"", "\"2026-11-26 00:00:00Z\"", "\"2026-11-26T00:00:00\"",
        "\"2026-11-26T00:00:00+25:00\"", "1764115200", "null", "[]"}) {
    EXPECT_REFUSED(one_peer("gpu-2", entry("[1, 2]", "[1, 2]", at)),
                   ".peers[gpu-2].at: must be an RFC 3339 time");
  }
  EXPECT_REFUSED(one_peer("gpu-2", R"({"rttMs": [1, 2], "gbps": [1, 2]})"),
                 ".peers[gpu-2].at: must be an RFC 3339 time (\"2026-11-26T00:12:03Z\"), got null");
  EXPECT_REFUSED(one_peer("gpu-2", entry("[1, 2]", "[1, 2]", "\"" + std::string(65, '2') + "\"")),
                 ".peers[gpu-2].at: must be an RFC 3339 time");
}

TEST(HostileAnnotations, RfcThreeThreeThreeNineTimesAreReadWithTheirOffsets) {
  using std::chrono::sys_days;
  const auto midnight = sys_days{std::chrono::year{2026} / 11 / 26};
  EXPECT_EQ(api::parse_measured_at("2026-11-26T00:00:00Z"), midnight);
  EXPECT_EQ(api::parse_measured_at("2026-11-26T01:00:00.123+01:00"), midnight);
  EXPECT_EQ(api::parse_measured_at("2026-11-25t19:30:00-04:30"), midnight);
  EXPECT_EQ(api::parse_measured_at("2024-02-29T00:00:00Z"),
            sys_days{std::chrono::year{2024} / 2 / 29});
  EXPECT_FALSE(api::parse_measured_at("2025-02-29T00:00:00Z"));
}

TEST(HostileAnnotations, ThousandsOfBadPeersGiveABoundedMessage) {
  std::string value = R"({"version": 1, "peers": {)";
  for (int i = 0; i < 2500; ++i) {
    value += (i ? ",\"n" : "\"n") + std::to_string(i) +
             "\":" + entry("[-1, 1]", "[1, 2]", "\"" + kAt + "\"");
  }
  value += "}}";
  ASSERT_LE(value.size(), api::kMaxLinksAnnotationBytes);
  try {
    api::parse_node_links(value, "member-a/gpu-1");
    FAIL() << "accepted";
  } catch (const api::ManifestError& e) {
    ASSERT_EQ(e.errors().size(), 21u);
    EXPECT_EQ(e.errors().back().text(),
              "metadata.annotations[net.tessel.dev/links].peers: and 2480 more peers not checked "
              "after 20 errors");
    EXPECT_LT(std::string(e.what()).size(), 4096u);
  }
}

// --- what the operator's topology makes of them --------------------------------------------------

GpuNode gpu_node(const std::string& name, const std::string& links) {
  GpuNode n;
  n.cluster = "member-a";
  n.name = name;
  n.free_gpus = 1;
  n.region = "r";
  n.zone = "r-a";
  n.gpu_product = "NVIDIA-H100-80GB-HBM3";
  if (!links.empty()) n.annotations[api::kLinksAnnotation] = links;
  return n;
}

std::string links_at(const std::string& peer, double gbps, system_clock::time_point at) {
  api::NodeLinks links;
  links.peers[peer] = {0.2, 0.3, gbps / 4, gbps, kube::format_rfc3339(at)};
  return api::format_node_links(links);
}

TEST(HostileAnnotations, ARefusedAnnotationIsEstimatedNotedAndNamedAsRejected) {
  const std::vector<GpuNode> nodes = {
      gpu_node("gpu-1", one_peer("gpu-2", entry("[1, 2]", "[1, 1e9]", "\"" + kAt + "\""))),
      gpu_node("gpu-2", "{broken"), gpu_node("gpu-3", "")};
  const ClusterTopology c = build_cluster_topology(nodes);
  EXPECT_EQ(c.measured_pairs, 0);
  EXPECT_EQ(c.estimated_pairs, 3);
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(0, 1), LinkEstimates{}.same_zone.bandwidth_gbps);
  ASSERT_EQ(c.rejected.size(), 2u);
  EXPECT_EQ(c.rejected[0].cluster, "member-a");
  EXPECT_EQ(c.rejected[0].node, "gpu-1");
  EXPECT_EQ(c.rejected[0].reason,
            "metadata.annotations[net.tessel.dev/links].peers[gpu-2].gbps[1]: must be in [1e-06, "
            "100000] Gbit/s, got 1000000000");
  EXPECT_EQ(c.rejected[1].node, "gpu-2");
  EXPECT_EQ(c.rejected[1].reason,
            "metadata.annotations[net.tessel.dev/links]: is not a JSON object");
  ASSERT_EQ(c.notes.size(), 2u);
  EXPECT_EQ(c.notes[1],
            "member-a/gpu-2: metadata.annotations[net.tessel.dev/links]: is not a JSON object (its "
            "links are estimated)");
}

TEST(HostileAnnotations, ARefusedNodesPeersStillCountTheirOwnDirection) {
  // gpu-1's annotation is refused; gpu-2 measured the link to it: that direction is used.
  const auto now = system_clock::now();
  const std::vector<GpuNode> nodes = {gpu_node("gpu-1", "not json"),
                                      gpu_node("gpu-2", links_at("gpu-1", 12, now))};
  const ClusterTopology c = build_cluster_topology(nodes, {}, {.now = now});
  EXPECT_EQ(c.measured_pairs, 1);
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(0, 1), 12);
  EXPECT_EQ(c.rejected.size(), 1u);
}

TEST(HostileAnnotations, StaleAndFutureMeasurementsAreTakenAsMissingAndNoted) {
  const auto now = system_clock::now();
  const std::vector<GpuNode> nodes = {
      gpu_node("gpu-1", links_at("gpu-2", 40, now - hours(3))),     // stale
      gpu_node("gpu-2", ""),                                        //
      gpu_node("gpu-3", links_at("gpu-4", 40, now + hours(2))),     // from the future
      gpu_node("gpu-4", ""),                                        //
      gpu_node("gpu-5", links_at("gpu-6", 40, now - minutes(59))),  // fresh enough
      gpu_node("gpu-6", links_at("gpu-5", 30, now + minutes(4)))};  // within the skew
  const ClusterTopology c = build_cluster_topology(nodes, {}, {.now = now});
  EXPECT_EQ(c.stale_measurements, 2);
  EXPECT_EQ(c.measured_pairs, 1);
  EXPECT_EQ(c.estimated_pairs, 14);
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(0, 1), LinkEstimates{}.same_zone.bandwidth_gbps);
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(4, 5), 30);  // the slower direction
  EXPECT_TRUE(c.rejected.empty());
  ASSERT_EQ(c.notes.size(), 2u);
  EXPECT_EQ(c.notes[0],
            "member-a/gpu-1: 1 of its 1 link measurements are older than 1h (the oldest at " +
                kube::format_rfc3339(now - hours(3)) +
                ", 3h old) (those links are estimated unless the peer measured them)");
  EXPECT_EQ(c.notes[1],
            "member-a/gpu-3: 1 of its 1 link measurements are dated more than 5m in the future (" +
                kube::format_rfc3339(now + hours(2)) +
                ", 2h ahead) (those links are estimated unless the peer measured them)");
  // The age limit is the caller's: with 4 hours, gpu-1's measurement counts.
  const ClusterTopology lenient =
      build_cluster_topology(nodes, {}, {.now = now, .max_age = hours(4)});
  EXPECT_EQ(lenient.stale_measurements, 1);
  EXPECT_EQ(lenient.measured_pairs, 2);
}

TEST(HostileAnnotations, StaleAggregatesAreTakenAsMissingAndAStaleNamedPeerIsNotAggregated) {
  const auto now = system_clock::now();
  api::NodeLinks stale_aggregate;  // gpu-1: "*" three hours old
  stale_aggregate.peers["*"] = {0.2, 0.3, 10, 40, kube::format_rfc3339(now - hours(3))};
  api::NodeLinks listed_stale;  // gpu-3: gpu-4 by name, stale; "*" fresh
  listed_stale.peers["gpu-4"] = {0.2, 0.3, 10, 40, kube::format_rfc3339(now - hours(3))};
  listed_stale.peers["*"] = {0.2, 0.3, 5, 20, kube::format_rfc3339(now)};
  const std::vector<GpuNode> nodes = {
      gpu_node("gpu-1", api::format_node_links(stale_aggregate)), gpu_node("gpu-2", ""),
      gpu_node("gpu-3", api::format_node_links(listed_stale)), gpu_node("gpu-4", "")};
  const ClusterTopology c = build_cluster_topology(nodes, {}, {.now = now});
  EXPECT_EQ(c.stale_measurements, 2);
  // gpu-1's stale "*" stands for nothing: its pairs are estimated (but gpu-3's fresh "*" covers
  // gpu-3 - gpu-1). gpu-3 listed gpu-4 by name: its "*" does not stand for gpu-4.
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(0, 1), LinkEstimates{}.same_zone.bandwidth_gbps);
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(2, 3), LinkEstimates{}.same_zone.bandwidth_gbps);
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(2, 0), 20);
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(2, 1), 20);
  EXPECT_EQ(c.measured_pairs, 2);
  EXPECT_EQ(c.aggregated_pairs, 2);
  EXPECT_EQ(c.estimated_pairs, 4);
  ASSERT_EQ(c.notes.size(), 3u);
  EXPECT_EQ(c.notes[0],
            "member-a/gpu-1: 1 of its 1 link measurements are older than 1h (the oldest at " +
                kube::format_rfc3339(now - hours(3)) +
                ", 3h old) (those links are estimated unless the peer measured them)");
  EXPECT_NE(c.notes[1].find("member-a/gpu-3: 1 of its 2 link measurements are older than 1h"),
            std::string::npos)
      << c.notes[1];
  EXPECT_NE(c.notes[2].find("2 node pairs rest on site aggregates"), std::string::npos)
      << c.notes[2];
}

TEST(HostileAnnotations, AFreshnessOutOfRangeIsRefusedNamingIt) {
  const std::vector<GpuNode> nodes = {gpu_node("gpu-1", "")};
  try {
    build_cluster_topology(nodes, {}, {.max_age = std::chrono::seconds(0)});
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "link measurement max age must be > 0s, got 0s");
  }
  EXPECT_THROW(build_cluster_topology(nodes, {}, {.max_clock_skew = std::chrono::seconds(-1)}),
               std::invalid_argument);
}

}  // namespace
}  // namespace tessel::controller
