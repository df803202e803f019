// links_from_topology: each link of a job shaped like the placement topology's link between the
// devices its two ranks run on.
#include "noderuntime/stage/topology_links.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace tessel::stage {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TopologyLinks, ShapesEachLinkLikeTheTopologysLinkBetweenTheRanksDevices) {
  const placement::Topology t = placement::load_topology_file(
      std::string(TESSEL_SOURCE_DIR) + "/examples/topologies/4-regional-geo.yaml");
  int virginia = -1, oregon = -1;
  for (const auto& d : t.devices) {
    if (d.site == "Virginia" && virginia < 0) virginia = d.id;
    if (d.site == "Oregon" && oregon < 0) oregon = d.id;
  }
  ASSERT_GE(virginia, 0);
  ASSERT_GE(oregon, 0);
  // Ranks 0 and 2 share a device (unshaped between them); rank 1 is in Oregon.
  const transport::LinkEmulator links = links_from_topology(t, {virginia, oregon, virginia});
  EXPECT_NEAR(links.shape(0, 1).bytes_per_s, 1.15e9 / 8, 1);  // 1.15 Gbit/s
  EXPECT_NEAR(links.shape(0, 1).latency_s, 0.067, 1e-12);     // 67 ms
  EXPECT_EQ(links.shape(1, 0), links.shape(0, 1));
  EXPECT_FALSE(links.shape(0, 2).shaped());
  try {
    links_from_topology(t, {0, t.size()});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "device_of_rank[1]: device " + std::to_string(t.size()) +
                                       " is not in the topology"));
  }
}

}  // namespace
}  // namespace tessel::stage
