// job.json's links on clusters (issue 20): unshaped_links_json writes {"shape": false} and the
// measured pairs by the names the stage's parser reads, stage_job_json carries them as given,
// and a pair the stages would refuse (a rank out of range, a link of a rank to itself, a value
// JSON cannot hold) is refused naming its field. (tests/stage/stage_job_file_links_test.cpp
// reads the output with the stage's parser.)
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "api/stage_job_file.h"

namespace tessel::api {
namespace {

using nlohmann::ordered_json;

const std::string kExample = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml";

// The example's 2 stages x 2 replicas, one replica per cluster.
StageJobFile four_ranks() {
  StageJobFile f;
  for (int r = 0; r < 4; ++r) {
    f.ranks.push_back({r % 2, r / 2, "0.0.0.0", 0, r / 2 == 0 ? "member-a/gpu-0" : "member-b/n1"});
  }
  f.data_path = "/data/fables.txt";
  f.rendezvous = StageEndpoint{"operator.hub.example:7443", "/etc/tessel/stage/token", ""};
  return f;
}

std::string error_of(const StageJobFile& f) {
  try {
    stage_job_json(load_trainingjob_file(kExample).spec, f);
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "";
}

TEST(StageJobLinks, UnshapedLinksListThePairsAsGiven) {
  const std::vector<StageLinkPair> pairs = {{0, 2, 0.9, 75.0}, {1, 3, 9.4, 0.25}};
  EXPECT_EQ(unshaped_links_json(pairs),
            (ordered_json{{"shape", false},
                          {"pairs",
                           {{{"a", 0}, {"b", 2}, {"gbps", 0.9}, {"latency_ms", 75.0}},
                            {{"a", 1}, {"b", 3}, {"gbps", 9.4}, {"latency_ms", 0.25}}}}}));
  EXPECT_EQ(unshaped_links_json({}), (ordered_json{{"shape", false}}));

  StageJobFile f = four_ranks();
  f.links = unshaped_links_json(pairs);
  EXPECT_EQ(stage_job_json(load_trainingjob_file(kExample).spec, f)["links"], f.links);
}

TEST(StageJobLinks, RefusesAPairTheStagesWouldRefuse) {
  const double inf = std::numeric_limits<double>::infinity();
  struct Bad {
    std::vector<StageLinkPair> pairs;
    std::string expected;
  };
  const std::vector<Bad> cases = {
      {{{0, 4, 1, 1}}, "links.pairs[0].b: must be a rank in [0, 3], got 4"},
      {{{0, 1, 1, 1}, {-1, 1, 1, 1}}, "links.pairs[1].a: must be a rank in [0, 3], got -1"},
      {{{2, 2, 1, 1}}, "links.pairs[0].b: a link joins two different ranks, got 2 twice"},
      {{{0, 2, inf, 1}}, "links.pairs[0].gbps: must be a finite number >= 0, got"},
      {{{0, 2, 1, -3}}, "links.pairs[0].latency_ms: must be a finite number >= 0, got -3"},
  };
  for (const Bad& bad : cases) {
    StageJobFile f = four_ranks();
    f.links = unshaped_links_json(bad.pairs);
    const std::string error = error_of(f);
    EXPECT_NE(error.find(bad.expected), std::string::npos)
        << bad.expected << ": got '" << error << "'";
  }

  StageJobFile f = four_ranks();
  f.links = {{"shape", "no"}, {"pairs", {{{"b", 1}}}}};
  const std::string error = error_of(f);
  EXPECT_NE(error.find("links.shape: expected true or false, got \"no\""), std::string::npos)
      << error;
  EXPECT_NE(error.find("links.pairs[0].a: must be a rank in [0, 3], got nothing"),
            std::string::npos)
      << error;
  f.links = {{"pairs", 3}};
  EXPECT_NE(error_of(f).find("links.pairs: expected an array of {a, b, gbps, latency_ms}"),
            std::string::npos)
      << error_of(f);
}

}  // namespace
}  // namespace tessel::api
