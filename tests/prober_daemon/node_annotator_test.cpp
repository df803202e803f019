// The Node annotation writer against the API test server (or a real cluster): its own
// annotation only, as field manager tessel-prober; a missing Node and an oversize value refused.
#include "noderuntime/prober/node_annotator.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "api/link_annotations.h"
#include "kube/api_error.h"
#include "kube/resource.h"
#include "tests/support/test_cluster.h"

namespace tessel::prober {
namespace {

using nlohmann::json;

const kube::ResourceInfo& nodes() {
  static const kube::ResourceInfo info = *kube::ResourceRegistry().find_kind("v1", "Node");
  return info;
}

// Values with no more digits than the annotation keeps (api::kSignificantDigits): doubling and
// halving are exact.
api::LinkMeasurement measurement(double rtt_ms, double gbps) {
  return {rtt_ms, rtt_ms * 2, gbps / 2, gbps, "2026-11-26T00:12:03Z"};
}

// A Node of this test only (Nodes are cluster-scoped: the name carries the test's namespace),
// with a label and an annotation of someone else's; deleted at the end.
class NodeAnnotator : public ::testing::Test {
 protected:
  void SetUp() override {
    node_ = cluster_.namespace_name() + "-gpu-1";
    const json node = {{"apiVersion", "v1"},
                       {"kind", "Node"},
                       {"metadata",
                        {{"name", node_},
                         {"labels", {{"topology.kubernetes.io/zone", "zone-a"}}},
                         {"annotations", {{"example.com/owner", "someone else"}}}}}};
    cluster_.admin().create(nodes(), "", node);
  }
  void TearDown() override {
    try {
      cluster_.admin().remove(nodes(), "", node_);
    } catch (const std::exception&) {
      // best effort: a test server goes with the test anyway
    }
  }

  testing::TestCluster cluster_;
  std::string node_;
};

TEST_F(NodeAnnotator, PatchesItsOwnAnnotationOnlyAsTesselProber) {
  // The client's own default manager differs: the patch must name its own.
  auto client = cluster_.client();
  api::NodeLinks links;
  links.peers["gpu-2"] = measurement(0.2, 9.4);
  links.peers["member-b/gpu-7"] = measurement(48, 0.8);
  publish_node_links(*client, node_, links);

  json node = cluster_.admin().get(nodes(), "", node_);
  const json& annotations = node["metadata"]["annotations"];
  ASSERT_TRUE(annotations.contains(api::kLinksAnnotation)) << node.dump();
  EXPECT_EQ(api::parse_node_links(annotations[api::kLinksAnnotation].get<std::string>(), node_),
            links);
  EXPECT_EQ(annotations["example.com/owner"], "someone else");
  EXPECT_EQ(node["metadata"]["labels"]["topology.kubernetes.io/zone"], "zone-a");

  bool found = false;
  for (const json& entry : node["metadata"]["managedFields"]) {
    if (entry.value("manager", "") != kProberFieldManager) continue;
    found = true;
    EXPECT_EQ(entry["operation"], "Update");
    const json& owned = entry["fieldsV1"]["f:metadata"]["f:annotations"];
    EXPECT_TRUE(owned.contains(std::string("f:") + api::kLinksAnnotation)) << entry.dump();
    EXPECT_FALSE(owned.contains("f:example.com/owner")) << entry.dump();
  }
  EXPECT_TRUE(found) << "no managedFields entry of " << kProberFieldManager << ": "
                     << node["metadata"]["managedFields"].dump();

  // A later publish replaces the value, still touching nothing else.
  links.peers.erase("gpu-2");
  publish_node_links(*client, node_, links);
  node = cluster_.admin().get(nodes(), "", node_);
  EXPECT_EQ(api::parse_node_links(
                node["metadata"]["annotations"][api::kLinksAnnotation].get<std::string>(), node_),
            links);
  EXPECT_EQ(node["metadata"]["annotations"]["example.com/owner"], "someone else");
}

TEST_F(NodeAnnotator, AMissingNodeIsAnErrorNamingIt) {
  const std::string missing = cluster_.namespace_name() + "-no-such-node";
  try {
    publish_node_links(cluster_.admin(), missing, {});
    FAIL() << "patched a Node that does not exist";
  } catch (const kube::ApiError& e) {
    EXPECT_TRUE(e.is_not_found()) << e.what();
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // A merge patch never creates: the Node is still missing.
  EXPECT_THROW(cluster_.admin().get(nodes(), "", missing), kube::ApiError);
}

TEST_F(NodeAnnotator, AnOversizeAnnotationIsRefusedBeforeSending) {
  api::NodeLinks links;
  for (int i = 0; i < 2500; ++i) {
    links.peers["member-b/gpu-node-with-a-long-name-" + std::to_string(i)] = measurement(1, 10);
  }
  try {
    publish_node_links(cluster_.admin(), node_, links);
    FAIL() << "an oversize annotation was sent";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("Node " + node_), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(api::kMaxLinksAnnotationBytes)), std::string::npos) << what;
  }
  const json node = cluster_.admin().get(nodes(), "", node_);
  EXPECT_FALSE(node["metadata"]["annotations"].contains(api::kLinksAnnotation));
}

}  // namespace
}  // namespace tessel::prober
