// The plugin's views rendered from fixed objects (fixtures/: a TrainingJob with its status, the
// member clusters' Nodes with their net.tessel.dev/links annotations) and compared with the
// files under golden/. After a deliberate change of the output, regenerate them with
//   TESSEL_UPDATE_GOLDEN=1 build/tests/kubectl_tessel_tests --gtest_filter='KubectlTesselGolden*'
// and review the diff (git diff tests/kubectl_tessel/golden).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/yaml_json.h"
#include "cli/kubectl_tessel/links_matrix.h"
#include "cli/kubectl_tessel/placement_view.h"
#include "cli/kubectl_tessel/plugin_error.h"
#include "cli/kubectl_tessel/text_layout.h"
#include "cli/kubectl_tessel/top_view.h"
#include "cli/kubectl_tessel/yaml_output.h"
#include "placement/atomic_file.h"

namespace tessel::kubectl_tessel {
namespace {

using nlohmann::json;

// The fixtures' measurements are from 2026-11-26T00:12:03Z, one from 20:00 the day before.
const auto kNow =
    std::chrono::sys_days{std::chrono::year{2026} / 11 / 26} + std::chrono::minutes(30);
const std::string kDir = std::string(TESSEL_SOURCE_DIR) + "/tests/kubectl_tessel/";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json fixture(const std::string& name) { return json::parse(read_text(kDir + "fixtures/" + name)); }

std::vector<MemberNodes> members() {
  std::vector<MemberNodes> out;
  for (const json& m : fixture("members.json")) {
    MemberNodes member;
    member.cluster = m["cluster"];
    member.error = m.value("error", "");
    if (m.contains("nodes")) member.nodes = m["nodes"].get<std::vector<json>>();
    out.push_back(std::move(member));
  }
  return out;
}

// Compares `text` with golden/<name>, or writes it there under TESSEL_UPDATE_GOLDEN=1.
void expect_golden(const std::string& name, const std::string& text) {
  const std::string path = kDir + "golden/" + name;
  const char* update = std::getenv("TESSEL_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    placement::write_file_atomically(path, text);
    return;
  }
  EXPECT_EQ(text, read_text(path))
      << "differs from " << path << " (TESSEL_UPDATE_GOLDEN=1 regenerates it)";
}

void expect_fits(const std::string& text, size_t width = kTerminalWidth) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), width) << "too wide: '" << line << "'";
  }
}

TEST(KubectlTesselGolden, PlacementGridAndLinks) {
  const json view = placement_view(fixture("job_running.json"));
  const std::string text = render_placement(view);
  expect_golden("placement.txt", text);
  expect_fits(text);
  expect_golden("placement.json", view.dump(2) + "\n");
  // The links say which stages they join, from the grid.
  EXPECT_EQ(view["links"][0]["between"], "dp s0,1");
  EXPECT_EQ(view["links"][3]["between"], "dp s0,1,2");
  EXPECT_EQ(view["links"][4]["between"], "s1>2");
}

TEST(KubectlTesselGolden, PlacementOnANarrowTerminalWrapsTheReplicas) {
  const std::string text = render_placement(placement_view(fixture("job_running.json")), 50);
  expect_golden("placement_50.txt", text);
  expect_fits(text, 50);
}

TEST(KubectlTesselGolden, Top) {
  const json view = top_view(fixture("job_running.json"));
  const std::string text = render_top(view);
  expect_golden("top.txt", text);
  expect_fits(text);
  expect_golden("top.yaml", to_yaml(view));
}

TEST(KubectlTesselGolden, LinksMatrix) {
  const json view = links_view(members(), "", kNow);
  const std::string text = render_links(view, /*rtt=*/false);
  expect_golden("links.txt", text);
  expect_fits(text);
  expect_golden("links_rtt.txt", render_links(view, /*rtt=*/true));
  expect_golden("links.json", view.dump(2) + "\n");
}

TEST(KubectlTesselGolden, LinksOfOneCluster) {
  const std::string text = render_links(links_view(members(), "member-b", kNow), /*rtt=*/false);
  expect_golden("links_member_b.txt", text);
  expect_fits(text);
}

// What the matrix holds, cell by cell, whatever the golden files say.
TEST(KubectlTesselLinks, NamedFiguresWinAggregatesFillTheRestOthersAreUnmeasured) {
  const json view = links_view(members(), "", kNow);
  const auto find = [&](const std::string& from, const std::string& to) -> const json* {
    for (const json& link : view["links"]) {
      if (link["from"] == from && link["to"] == to) return &link;
    }
    return nullptr;
  };
  const json* named = find("member-a/gpu-a2", "member-b/gpu-b1");
  ASSERT_NE(named, nullptr);
  EXPECT_EQ((*named)["source"], "measured");
  EXPECT_DOUBLE_EQ((*named)["gbps"].get<double>(), 0.81);
  const json* aggregate = find("member-a/gpu-a2", "member-b/gpu-b4");
  ASSERT_NE(aggregate, nullptr);
  EXPECT_EQ((*aggregate)["source"], "aggregated");
  EXPECT_DOUBLE_EQ((*aggregate)["gbps"].get<double>(), 0.6);
  // "*" is gpu-b1's own cluster only.
  EXPECT_NE(find("member-b/gpu-b1", "member-b/gpu-b4"), nullptr);
  EXPECT_EQ(find("member-b/gpu-b1", "member-a/gpu-a2"), nullptr);
  // Nothing from a refused annotation, nor to or from a node without GPUs.
  EXPECT_EQ(find("member-b/gpu-b3", "member-b/gpu-b1"), nullptr);
  for (const json& link : view["links"]) {
    EXPECT_EQ(link["from"].get<std::string>().find("cpu-a3"), std::string::npos);
    EXPECT_EQ(link["to"].get<std::string>().find("cpu-a3"), std::string::npos);
  }
  // Older than the operator's hour: shown, marked stale.
  const json* old = find("member-a/gpu-a1", "member-b/gpu-b4");
  ASSERT_NE(old, nullptr);
  EXPECT_TRUE((*old)["stale"].get<bool>());
  EXPECT_FALSE((*named)["stale"].get<bool>());
  ASSERT_EQ(view["unreadable"].size(), 1u);
  EXPECT_EQ(view["unreadable"][0]["cluster"], "member-c");
  bool refused = false;
  for (const json& node : view["nodes"]) {
    if (node["node"] == "gpu-b3") {
      refused = true;
      EXPECT_EQ(node["annotation"], "refused");
      EXPECT_NE(node["reason"].get<std::string>().find("member-b/gpu-b3"), std::string::npos);
    }
  }
  EXPECT_TRUE(refused);
}

TEST(KubectlTesselLinks, AnUnknownClusterIsNamedWithTheMembers) {
  try {
    links_view(members(), "member-x", kNow);
    FAIL() << "no error";
  } catch (const PluginError& e) {
    EXPECT_STREQ(e.what(),
                 "--cluster member-x: no MemberCluster of that name (members: member-a, "
                 "member-b, member-c)");
  }
}

TEST(KubectlTesselErrors, AJobWithoutPlacementSaysWhy) {
  try {
    placement_view(fixture("job_pending.json"));
    FAIL() << "no error";
  } catch (const PluginError& e) {
    EXPECT_STREQ(e.what(),
                 "TrainingJob research/waiting has no placement yet (status.placement.stages is "
                 "empty; phase Pending; Placed: NotEnoughGPUs: needs 16 GPUs; 8 free in 1 "
                 "reachable member cluster(s))");
  }
  try {
    top_view(fixture("job_pending.json"));
    FAIL() << "no error";
  } catch (const PluginError& e) {
    EXPECT_STREQ(e.what(),
                 "TrainingJob research/waiting has no progress yet (status.progress is empty; "
                 "phase Pending): its stages report once they run");
  }
}

TEST(KubectlTesselErrors, AMalformedFieldIsNamed) {
  json job = fixture("job_running.json");
  job["status"]["placement"]["stages"][1]["replicas"][2]["node"] = 7;
  try {
    placement_view(job);
    FAIL() << "no error";
  } catch (const PluginError& e) {
    EXPECT_STREQ(e.what(),
                 "TrainingJob research/fables: .status.placement.stages[1].replicas[2].node is "
                 "7, not a string");
  }
  job = fixture("job_running.json");
  job["status"]["progress"]["stages"][0]["bubble"] = "lots";
  EXPECT_THROW(top_view(job), PluginError);
}

TEST(KubectlTesselYaml, StringsThatReadAsOtherScalarsAreQuotedAndTheDocumentReadsBack) {
  const json value = {{"a", "1"},    {"b", "true"}, {"c", ""},   {"d", "null"},
                      {"e", "text"}, {"f", 2.5},    {"g", true}, {"h", json::array({1, "2"})}};
  const std::string yaml = to_yaml(value);
  EXPECT_EQ(api::yaml_to_json(yaml, "out"), value) << yaml;
}

TEST(KubectlTesselText, AbbreviationKeepsBothEnds) {
  EXPECT_EQ(abbreviate("member-a/gpu-b2-rack17-slot04-h200", 20), "member-a/~lot04-h200");
  EXPECT_EQ(abbreviate("short", 20), "short");
  EXPECT_EQ(number(9.4), "9.4");
  EXPECT_EQ(number(18234.0), "18234");
  EXPECT_EQ(number(0.04567, 3), "0.0457");
}

}  // namespace
}  // namespace tessel::kubectl_tessel
