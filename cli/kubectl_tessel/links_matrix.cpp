#include "cli/kubectl_tessel/links_matrix.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "api/link_annotations.h"
#include "api/manifest_error.h"
#include "api/pod_template.h"
#include "cli/kubectl_tessel/plugin_error.h"
#include "cli/kubectl_tessel/text_layout.h"

namespace tessel::kubectl_tessel {

using nlohmann::json;

namespace {

// A Node's GPUs: allocatable nvidia.com/gpu (a whole number, as a string or a number), else 0.
int gpu_count(const json& node) {
  const json status = node.value("status", json::object());
  if (!status.is_object()) return 0;
  const json allocatable = status.value("allocatable", json::object());
  if (!allocatable.is_object() || !allocatable.contains(api::kGpuResource)) return 0;
  const json& value = allocatable[api::kGpuResource];
  if (value.is_number_integer()) return value.get<int>();
  if (!value.is_string()) return 0;
  const std::string text = value.get<std::string>();
  if (text.empty() || text.size() > 6 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return 0;
  }
  return std::stoi(text);
}

std::string annotation_of(const json& node) {
  const json metadata = node.value("metadata", json::object());
  const json annotations =
      metadata.is_object() ? metadata.value("annotations", json::object()) : json::object();
  if (!annotations.is_object() || !annotations.contains(api::kLinksAnnotation) ||
      !annotations[api::kLinksAnnotation].is_string()) {
    return "";
  }
  return annotations[api::kLinksAnnotation].get<std::string>();
}

struct Site {
  std::string cluster, node;
  std::string name() const { return cluster + "/" + node; }
};

}  // namespace

json links_view(const std::vector<MemberNodes>& members, const std::string& only_cluster,
                std::chrono::system_clock::time_point now) {
  std::vector<MemberNodes> sorted = members;
  std::sort(sorted.begin(), sorted.end(),
            [](const MemberNodes& a, const MemberNodes& b) { return a.cluster < b.cluster; });
  json view = {{"nodes", json::array()},
               {"columns", json::array()},
               {"links", json::array()},
               {"unreadable", json::array()}};
  std::vector<Site> sites;
  std::vector<std::string> annotations;
  std::vector<std::string> known;
  for (const MemberNodes& member : sorted) {
    known.push_back(member.cluster);
    if (!member.error.empty()) {
      view["unreadable"].push_back({{"cluster", member.cluster}, {"error", member.error}});
      continue;
    }
    std::vector<std::pair<std::string, std::string>> gpu_nodes;  // name, annotation
    for (const json& node : member.nodes) {
      if (gpu_count(node) <= 0) continue;
      const json metadata = node.value("metadata", json::object());
      gpu_nodes.emplace_back(metadata.value("name", ""), annotation_of(node));
    }
    std::sort(gpu_nodes.begin(), gpu_nodes.end());
    for (auto& [name, annotation] : gpu_nodes) {
      sites.push_back({member.cluster, name});
      annotations.push_back(std::move(annotation));
    }
  }
  if (!only_cluster.empty() && std::find(known.begin(), known.end(), only_cluster) == known.end()) {
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    throw PluginError("--cluster " + only_cluster + ": no MemberCluster of that name (members: " +
                      (list.empty() ? "none" : list) + ")");
  }
  for (size_t i = 0; i < sites.size(); ++i) {
    view["columns"].push_back({{"index", i + 1}, {"name", sites[i].name()}});
  }
  for (size_t i = 0; i < sites.size(); ++i) {
    const Site& from = sites[i];
    if (!only_cluster.empty() && from.cluster != only_cluster) continue;
    json row = {{"index", i + 1}, {"cluster", from.cluster}, {"node", from.node}};
    if (annotations[i].empty()) {
      row["annotation"] = "absent";
      view["nodes"].push_back(std::move(row));
      continue;
    }
    api::NodeLinks links;
    try {
      links = api::parse_node_links(annotations[i], from.name());
    } catch (const api::ManifestError& e) {
      row["annotation"] = "refused";
      row["reason"] = e.what();
      view["nodes"].push_back(std::move(row));
      continue;
    }
    row["annotation"] = "measured";
    view["nodes"].push_back(std::move(row));
    for (size_t j = 0; j < sites.size(); ++j) {
      if (j == i) continue;
      const Site& to = sites[j];
      const bool same = to.cluster == from.cluster;
      const std::string named = same ? to.node : to.name();
      const char* source = "measured";
      auto it = links.peers.find(named);
      if (it == links.peers.end()) {
        it = links.peers.find(api::site_aggregate(named));
        source = "aggregated";
      }
      if (it == links.peers.end()) continue;
      const api::LinkMeasurement& m = it->second;
      // parse_node_links has checked `at`.
      const auto at = api::parse_measured_at(m.measured_at).value_or(std::chrono::sys_seconds{});
      const bool stale = now - at > kOperatorLinkMaxAge || at - now > kOperatorClockSkew;
      view["links"].push_back({{"from", from.name()},
                               {"to", to.name()},
                               {"gbps", m.bulk_gbps},
                               {"smallGbps", m.small_gbps},
                               {"rttMs", m.rtt_p50_ms},
                               {"rttP90Ms", m.rtt_p90_ms},
                               {"source", source},
                               {"at", m.measured_at},
                               {"stale", stale}});
    }
  }
  return view;
}

namespace {

// A figure's mark: '?' stale (the operator takes it as missing), '*' from an aggregate.
std::string mark(const json& link) {
  if (link["stale"].get<bool>()) return "?";
  return link["source"] == "aggregated" ? "*" : " ";
}

// One matrix: the field `key` of each link as its cell.
void render_matrix(std::ostringstream& out, const json& view, const char* key, size_t width) {
  std::map<std::pair<std::string, std::string>, const json*> cells;  // (from, to) -> link
  for (const json& link : view["links"]) {
    cells[{link["from"].get<std::string>(), link["to"].get<std::string>()}] = &link;
  }
  size_t longest = 9;
  for (const json& row : view["nodes"]) {
    longest = std::max(longest, row["cluster"].get<std::string>().size() + 1 +
                                    row["node"].get<std::string>().size());
  }
  const size_t number_w = 4, label_w = std::min<size_t>(longest, 22), column_w = 7;
  const size_t used = number_w + label_w + 1;
  const size_t per_block = std::max<size_t>(1, width > used ? (width - used) / column_w : 1);
  const json& columns = view["columns"];
  for (size_t first = 0; first < columns.size(); first += per_block) {
    const size_t last = std::min(columns.size(), first + per_block);
    if (first > 0) out << "\n";
    std::string header = right("#", number_w - 1) + " " + cell("FROM \\ TO", label_w) + " ";
    for (size_t c = first; c < last; ++c) {
      header += right(columns[c]["index"].dump() + " ", column_w);
    }
    out << trim_right(header) << "\n";
    for (const json& row : view["nodes"]) {
      const std::string from =
          row["cluster"].get<std::string>() + "/" + row["node"].get<std::string>();
      std::string line = right(row["index"].dump(), number_w - 1) + " " + cell(from, label_w) + " ";
      const std::string annotation = row["annotation"].get<std::string>();
      if (annotation != "measured") {
        line += annotation == "refused" ? "  (annotation refused: see below)"
                                        : "  (no net.tessel.dev/links annotation)";
        out << line << "\n";
        continue;
      }
      for (size_t c = first; c < last; ++c) {
        std::string text;
        if (columns[c]["index"] == row["index"]) {
          text = ". ";
        } else {
          const auto it = cells.find({from, columns[c]["name"].get<std::string>()});
          text = it == cells.end()
                     ? "- "
                     : number((*it->second)[key].get<double>(), 3) + mark(*it->second);
        }
        line += right(text, column_w);
      }
      out << trim_right(line) << "\n";
    }
  }
}

}  // namespace

std::string render_links(const json& view, bool rtt, int width) {
  std::ostringstream out;
  const size_t w = static_cast<size_t>(width);
  if (view["columns"].empty()) {
    out << "No GPU node (allocatable nvidia.com/gpu) in the member clusters read.\n";
  } else {
    out << "Gbit/s (bulk) that each row's node measured to each column's node\n"
           "(- unmeasured, * from the row node's site aggregate, ? older than 1 h: the\n"
           "operator takes it as unmeasured):\n";
    render_matrix(out, view, "gbps", w);
    if (rtt) {
      out << "\nMedian round trip in ms, row to column:\n";
      render_matrix(out, view, "rttMs", w);
    }
    // The columns' names, when the rows (one cluster's) do not list them all.
    if (view["nodes"].size() < view["columns"].size()) {
      std::vector<std::string> words;
      for (const json& c : view["columns"]) {
        words.push_back(c["index"].dump() + " " + c["name"].get<std::string>());
      }
      out << "\nColumns:\n";
      for (const std::string& line : wrap_words(words, w - 2)) out << "  " << line << "\n";
    }
  }
  for (const json& row : view["nodes"]) {
    if (row["annotation"] == "refused") {
      out << "\n"
          << paragraph(row["cluster"].get<std::string>() + "/" + row["node"].get<std::string>() +
                           ": annotation refused (the operator does not use it): " +
                           row["reason"].get<std::string>(),
                       w);
    }
  }
  for (const json& member : view["unreadable"]) {
    out << "\n"
        << paragraph("MemberCluster " + member["cluster"].get<std::string>() +
                         " not read: " + member["error"].get<std::string>(),
                     w);
  }
  return out.str();
}

}  // namespace tessel::kubectl_tessel
