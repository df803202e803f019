// The cross-cluster peers ConfigMap's document: a round trip, every kind of bad input refused
// with the ConfigMap, the field and the reason named, and which pods count as probers.
#include "api/prober_peers.h"

#include <gtest/gtest.h>

#include <string>

#include "api/manifest_error.h"

namespace tessel::api {
namespace {

using nlohmann::json;

const std::string kSource = "member-a: ConfigMap tessel-system/tessel-prober-peers";

std::string error_of(const std::string& text) {
  try {
    parse_prober_peers(text, kSource);
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "(accepted)";
}

// A document for member-a listing one peer entry (JSON text).
std::string one_peer(const std::string& entry) {
  return R"({"version":1,"cluster":"member-a","peers":[)" + entry + "]}";
}

TEST(ProberPeers, RoundTripsCompactAndSorted) {
  ProberPeers peers;
  peers.cluster = "member-a";
  peers.peers = {{"member-c/gpu-1", "gpu-1.example.org", 7471},
                 {"member-b/gpu-2", "10.0.0.6", 9000},
                 {"member-b/gpu-1", "fd00::5", 7471}};
  const std::string text = format_prober_peers(peers);
  EXPECT_EQ(text, R"({"version":1,"cluster":"member-a","peers":[)"
                  R"({"host":"fd00::5","name":"member-b/gpu-1","port":7471},)"
                  R"({"host":"10.0.0.6","name":"member-b/gpu-2","port":9000},)"
                  R"({"host":"gpu-1.example.org","name":"member-c/gpu-1","port":7471}]})");
  const ProberPeers back = parse_prober_peers(text, kSource);
  EXPECT_EQ(back.cluster, "member-a");
  ASSERT_EQ(back.peers.size(), 3u);
  EXPECT_EQ(back.peers[0], (ProberPeer{"member-b/gpu-1", "fd00::5", 7471}));
  EXPECT_EQ(back.peers[2], (ProberPeer{"member-c/gpu-1", "gpu-1.example.org", 7471}));
  EXPECT_EQ(format_prober_peers(back), text);
  // No peers at all is a valid list (the only member, or no prober elsewhere yet).
  EXPECT_EQ(parse_prober_peers(format_prober_peers({"member-a", {}}), kSource),
            (ProberPeers{"member-a", {}}));
  // Parsing sorts what a hand-written document lists out of order.
  const ProberPeers unsorted =
      parse_prober_peers(one_peer(R"({"name":"member-c/n","host":"10.0.0.1","port":1},)"
                                  R"({"name":"member-b/n","host":"10.0.0.2","port":2})"),
                         kSource);
  EXPECT_EQ(unsorted.peers[0].name, "member-b/n");
}

TEST(ProberPeers, BadDocumentsAreRefusedNamingTheFieldAndWhy) {
  const std::string at = kSource + ": data[peers.json]";
  const std::string peer0 = at + ".peers[0]";
  struct Case {
    std::string text, error;
  };
  const std::string long_label(254, 'a');
  const std::vector<Case> cases = {
      {"not json", at + ": is not a JSON object"},
      {"[1,2]", at + ": is not a JSON object"},
      {R"({"version":2,"cluster":"member-a","peers":[]})", at + ".version: must be 1, got 2"},
      {R"({"version":"1","cluster":"member-a","peers":[]})", at + ".version: must be 1, got \"1\""},
      {R"({"version":1,"peers":[]})",
       at + ".cluster: must be a MemberCluster's name (a DNS name: lowercase, at most 253), got "
            "null"},
      {R"({"version":1,"cluster":"Member_A","peers":[]})",
       at + ".cluster: must be a MemberCluster's name (a DNS name: lowercase, at most 253), got "
            "\"Member_A\""},
      {R"({"version":1,"cluster":"member-a","peers":{}})",
       at + ".peers: must be a list, got an object of 0 fields"},
      {R"({"version":1,"cluster":"member-a","peers":[],"extra":1})", at + ".extra: unknown field"},
      {one_peer("7"), peer0 + ": must be an object, got 7"},
      {one_peer(R"({"name":"gpu-1","host":"10.0.0.5","port":7471})"),
       peer0 + ".name: must be <cluster>/<node>, each a DNS name (lowercase, at most 253), got "
               "\"gpu-1\""},
      {one_peer(R"({"name":"member-b/GPU 1","host":"10.0.0.5","port":7471})"),
       peer0 + ".name: must be <cluster>/<node>, each a DNS name (lowercase, at most 253), got "
               "\"member-b/GPU 1\""},
      {one_peer(R"({"name":"member-b/)" + long_label + R"(","host":"10.0.0.5","port":7471})"),
       peer0 +
           ".name: must be <cluster>/<node>, each a DNS name (lowercase, at most 253), got "
           "\"member-b/" +
           std::string(71, 'a') + "... (263 bytes)\""},
      {one_peer(R"({"name":"member-a/gpu-1","host":"10.0.0.5","port":7471})"),
       peer0 + ".name: names a node of cluster member-a itself: its own probers are found "
               "through its API server, not listed"},
      {one_peer(R"({"name":"member-b/gpu-1","host":"","port":7471})"),
       peer0 + ".host: must not be empty"},
      {one_peer(R"({"name":"member-b/gpu-1","host":"10.0.0.5 evil","port":7471})"),
       peer0 + ".host: must be an IP address or a DNS name (lowercase letters, digits, '-' and "
               "'.'), got \"10.0.0.5 evil\""},
      {one_peer(R"({"name":"member-b/gpu-1","host":")" + long_label + R"(","port":7471})"),
       peer0 + ".host: is 254 bytes, more than a DNS name's 253"},
      {one_peer(R"({"name":"member-b/gpu-1","host":5,"port":7471})"),
       peer0 + ".host: must be a string, got 5"},
      {one_peer(R"({"name":"member-b/gpu-1","host":"10.0.0.5","port":0})"),
       peer0 + ".port: must be in 1..65535, got 0"},
      {one_peer(R"({"name":"member-b/gpu-1","host":"10.0.0.5","port":70000})"),
       peer0 + ".port: must be in 1..65535, got 70000"},
      {one_peer(R"({"name":"member-b/gpu-1","host":"10.0.0.5","port":"7471"})"),
       peer0 + ".port: must be a whole number in 1..65535, got \"7471\""},
      {one_peer(R"({"name":"member-b/gpu-1","host":"10.0.0.5","port":7471.5})"),
       peer0 + ".port: must be a whole number in 1..65535, got 7471.5"},
      {one_peer(R"({"name":"member-b/gpu-1","host":"10.0.0.5","port":7471,"secret":"x"})"),
       peer0 + ".secret: unknown field"},
      {one_peer(R"({"name":"member-b/gpu-1","host":"10.0.0.5","port":7471},)"
                R"({"name":"member-b/gpu-1","host":"10.0.0.6","port":7471})"),
       at + ".peers[1].name: \"member-b/gpu-1\" is listed twice (also at data[peers.json]"
            ".peers[0])"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 120));
    EXPECT_EQ(error_of(c.text), c.error);
  }
}

TEST(ProberPeers, EveryBadFieldOfAPeerIsListedAtOnce) {
  const std::string error = error_of(one_peer(R"({"name":"x","host":"","port":0})"));
  EXPECT_NE(error.find("3 errors"), std::string::npos) << error;
  EXPECT_NE(error.find(".peers[0].name"), std::string::npos) << error;
  EXPECT_NE(error.find(".peers[0].host"), std::string::npos) << error;
  EXPECT_NE(error.find(".peers[0].port"), std::string::npos) << error;
}

TEST(ProberPeers, OversizeAndTooManyPeersAreRefusedWithTheLimit) {
  const std::string at = kSource + ": data[peers.json]";
  const std::string huge = one_peer(R"({"name":"member-b/gpu-1","host":")" +
                                    std::string(kMaxProberPeersBytes, 'a') + R"(","port":1})");
  EXPECT_EQ(error_of(huge), at + ": is " + std::to_string(huge.size()) +
                                " bytes, more than the limit of " +
                                std::to_string(kMaxProberPeersBytes));

  ProberPeers many{"member-a", {}};
  for (size_t i = 0; i <= kMaxProberPeers; ++i)
    many.peers.push_back({"member-b/n" + std::to_string(i), "10.0.0.1", 7471});
  EXPECT_EQ(error_of(format_prober_peers(many)), at + ".peers: lists 5001 peers, more than the "
                                                      "limit of 5000");
  many.peers.pop_back();
  EXPECT_EQ(parse_prober_peers(format_prober_peers(many), kSource).peers.size(), kMaxProberPeers);

  // A list of bad peers is reported up to 20 errors, then counted.
  ProberPeers bad{"member-a", {}};
  for (int i = 0; i < 30; ++i) bad.peers.push_back({"member-b/n" + std::to_string(i), "", 7471});
  const std::string error = error_of(format_prober_peers(bad));
  EXPECT_NE(error.find("21 errors"), std::string::npos) << error;
  EXPECT_NE(error.find("and 10 more peers not checked after 20 errors"), std::string::npos);
}

// A prober pod as the API server holds it once it runs.
json prober_pod(const std::string& name, const std::string& node, const std::string& ip,
                const json& port) {
  return {{"metadata",
           {{"name", name},
            {"namespace", "tessel-system"},
            {"creationTimestamp", "2026-11-26T00:00:00Z"}}},
          {"spec",
           {{"nodeName", node},
            {"containers", {{{"name", "prober"}, {"ports", json::array({port})}}}}}},
          {"status", {{"phase", "Running"}, {"podIP", ip}}}};
}

TEST(ProberEndpoints, OnlyRunningBoundProbersWithAnAddressAndAProbePortCount) {
  const json probe = {{"name", "probe"}, {"containerPort", 7471}};
  json pending = prober_pod("p-pending", "n-pending", "10.0.0.1", probe);
  pending["status"]["phase"] = "Pending";
  json deleting = prober_pod("p-deleting", "n-deleting", "10.0.0.2", probe);
  deleting["metadata"]["deletionTimestamp"] = "2026-11-26T00:01:00Z";
  json no_ip = prober_pod("p-no-ip", "n-no-ip", "", probe);
  no_ip["status"].erase("podIP");
  json unbound = prober_pod("p-unbound", "", "10.0.0.3", probe);
  unbound["spec"].erase("nodeName");
  const json other_port =
      prober_pod("p-other", "n-other", "10.0.0.4", {{"name", "metrics"}, {"containerPort", 9090}});
  const json no_ports = {{"metadata", {{"name", "p-bare"}}},
                         {"spec", {{"nodeName", "n-bare"}, {"containers", {{{"name", "x"}}}}}},
                         {"status", {{"phase", "Running"}, {"podIP", "10.0.0.9"}}}};
  const json zero_port =
      prober_pod("p-zero", "n-zero", "10.0.0.5", {{"name", "probe"}, {"containerPort", 0}});
  const json container_port = prober_pod("p-c", "n-c", "10.0.0.6", probe);
  const json host_port = prober_pod(
      "p-h", "n-h", "10.0.0.7", {{"name", "probe"}, {"containerPort", 7471}, {"hostPort", 17471}});
  const json host_port_zero = prober_pod(
      "p-h0", "n-h0", "10.0.0.8", {{"name", "probe"}, {"containerPort", 7472}, {"hostPort", 0}});

  const std::vector<ProberEndpoint> endpoints =
      prober_endpoints({pending, deleting, no_ip, unbound, other_port, no_ports, zero_port,
                        host_port, container_port, host_port_zero, json::object(), json(5)});
  EXPECT_EQ(endpoints, (std::vector<ProberEndpoint>{{"n-c", "10.0.0.6", 7471},
                                                    {"n-h", "10.0.0.7", 17471},
                                                    {"n-h0", "10.0.0.8", 7472}}));
}

TEST(ProberEndpoints, TwoProbersOnOneNodeGiveTheNewest) {
  const json probe = {{"name", "probe"}, {"containerPort", 7471}};
  json old_pod = prober_pod("prober-old", "gpu-1", "10.0.0.1", probe);
  json new_pod = prober_pod("prober-new", "gpu-1", "10.0.0.2", probe);
  new_pod["metadata"]["creationTimestamp"] = "2026-11-26T00:05:00Z";
  const std::vector<ProberEndpoint> want{{"gpu-1", "10.0.0.2", 7471}};
  EXPECT_EQ(prober_endpoints({old_pod, new_pod}), want);
  EXPECT_EQ(prober_endpoints({new_pod, old_pod}), want);
}

}  // namespace
}  // namespace tessel::api
