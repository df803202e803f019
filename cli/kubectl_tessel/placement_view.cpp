#include "cli/kubectl_tessel/placement_view.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "cli/kubectl_tessel/job_fields.h"
#include "cli/kubectl_tessel/text_layout.h"

namespace tessel::kubectl_tessel {

using nlohmann::json;

namespace {

// Where each "<cluster>/<node>" holds cells of the grid: (stage, replica) pairs.
using CellsByNode = std::map<std::string, std::vector<std::pair<int, int>>>;

// Which stages a link joins, from the grid: "s0>1" where the two nodes hold consecutive stages
// of one replica (a pipeline hop), "dp s2" where they hold one stage of two replicas
// (data-parallel neighbours); several: "s0>1 s1>2 dp s0,1".
std::string between(const CellsByNode& cells, const std::string& from, const std::string& to) {
  const auto a = cells.find(from), b = cells.find(to);
  if (a == cells.end() || b == cells.end()) return "";
  std::set<int> hops, data_parallel;  // a hop by its first stage
  for (const auto& [sa, ra] : a->second) {
    for (const auto& [sb, rb] : b->second) {
      if (ra == rb && (sb == sa + 1 || sa == sb + 1)) hops.insert(std::min(sa, sb));
      if (sa == sb && ra != rb) data_parallel.insert(sa);
    }
  }
  std::string out;
  for (const int s : hops) {
    out += (out.empty() ? "s" : " s") + std::to_string(s) + ">" + std::to_string(s + 1);
  }
  std::string stages;
  for (const int s : data_parallel) stages += (stages.empty() ? "" : ",") + std::to_string(s);
  if (!stages.empty()) out += (out.empty() ? "dp s" : " dp s") + stages;
  return out;
}

}  // namespace

json placement_view(const json& job) {
  const std::string name = job_name(job);
  const json* status = field(job, "status", "object", name, "");
  const json* placement = status ? field(*status, "placement", "object", name, ".status") : nullptr;
  const json* stages =
      placement ? field(*placement, "stages", "array", name, ".status.placement") : nullptr;
  if (stages == nullptr || stages->empty()) {
    std::string why =
        "TrainingJob " + name + " has no placement yet (status.placement.stages " + "is empty";
    const std::string phase = job_phase(job);
    if (!phase.empty()) why += "; phase " + phase;
    const std::string placed = condition_message(job, "Placed");
    if (!placed.empty()) why += "; Placed: " + placed;
    throw PluginError(why + ")");
  }
  json view = {{"job", name}, {"phase", job_phase(job)}};
  if (const json* c = field(*placement, "clusters", "string", name, ".status.placement")) {
    view["clusters"] = *c;
  }
  if (const json* p =
          field(*placement, "predictedIterationSeconds", "number", name, ".status.placement")) {
    view["predictedIterationSeconds"] = *p;
  }
  CellsByNode cells;
  view["stages"] = json::array();
  for (size_t s = 0; s < stages->size(); ++s) {
    const std::string path = ".status.placement.stages[" + std::to_string(s) + "]";
    const json& stage = (*stages)[s];
    const json* number = field(stage, "stage", "integer", name, path);
    const json* layers = field(stage, "layers", "integer", name, path);
    const json* replicas = field(stage, "replicas", "array", name, path);
    if (!number || !layers || !replicas) {
      throw PluginError("TrainingJob " + name + ": " + path.substr(1) +
                        " lacks stage, layers or replicas");
    }
    json out = {{"stage", *number}, {"layers", *layers}, {"replicas", json::array()}};
    for (size_t r = 0; r < replicas->size(); ++r) {
      const std::string rpath = path + ".replicas[" + std::to_string(r) + "]";
      const json& replica = (*replicas)[r];
      const json* index = field(replica, "replica", "integer", name, rpath);
      const json* cluster = field(replica, "cluster", "string", name, rpath);
      const json* node = field(replica, "node", "string", name, rpath);
      const json* gpu = field(replica, "gpu", "integer", name, rpath);
      if (!index || !cluster || !node) {
        throw PluginError("TrainingJob " + name + ": " + rpath.substr(1) +
                          " lacks replica, cluster or node");
      }
      json cell_view = {{"replica", *index}, {"cluster", *cluster}, {"node", *node}};
      if (gpu) cell_view["gpu"] = *gpu;
      cells[cluster->get<std::string>() + "/" + node->get<std::string>()].emplace_back(
          number->get<int>(), index->get<int>());
      out["replicas"].push_back(std::move(cell_view));
    }
    view["stages"].push_back(std::move(out));
  }
  view["links"] = json::array();
  if (const json* links = field(*placement, "links", "array", name, ".status.placement")) {
    for (size_t l = 0; l < links->size(); ++l) {
      const std::string path = ".status.placement.links[" + std::to_string(l) + "]";
      const json& link = (*links)[l];
      const json* from = field(link, "from", "string", name, path);
      const json* to = field(link, "to", "string", name, path);
      const json* rtt = field(link, "rttMs", "number", name, path);
      const json* gbps = field(link, "gbps", "number", name, path);
      if (!from || !to || !rtt || !gbps) {
        throw PluginError("TrainingJob " + name + ": " + path.substr(1) +
                          " lacks from, to, rttMs or gbps");
      }
      const json* source = field(link, "source", "string", name, path);
      const json* carries = field(link, "carries", "string", name, path);
      view["links"].push_back({{"from", *from},
                               {"to", *to},
                               {"rttMs", *rtt},
                               {"gbps", *gbps},
                               {"source", source ? *source : json("")},
                               {"carries", carries ? *carries : json("")},
                               {"between", between(cells, *from, *to)}});
    }
  }
  if (const json* omitted =
          field(*placement, "linksOmitted", "integer", name, ".status.placement")) {
    view["linksOmitted"] = *omitted;
  }
  return view;
}

namespace {

std::string cell_text(const json& replica) {
  std::string text =
      replica["cluster"].get<std::string>() + "/" + replica["node"].get<std::string>();
  if (replica.contains("gpu")) text += ":" + replica["gpu"].dump();
  return text;
}

void render_grid(std::ostringstream& out, const json& view, size_t width) {
  size_t replicas = 0, longest = 0;
  for (const json& stage : view["stages"]) {
    replicas = std::max(replicas, stage["replicas"].size());
    for (const json& r : stage["replicas"]) longest = std::max(longest, cell_text(r).size());
  }
  const size_t label = 14;  // "STAGE  LAYERS "
  const size_t room = width > label + 12 ? width - label : 12;
  // A column is as wide as its longest cell, and at most half the room, so that two replicas
  // fit side by side; longer names are abbreviated.
  const size_t column = std::min(std::max<size_t>(longest, 9) + 2, room / 2);
  const size_t per_block = std::max<size_t>(1, room / column);
  for (size_t first = 0; first < std::max<size_t>(replicas, 1); first += per_block) {
    const size_t last = std::min(replicas, first + per_block);
    if (first > 0) out << "\n";
    std::string header = cell("STAGE", 7) + cell("LAYERS", 7);
    for (size_t r = first; r < last; ++r) header += cell("REPLICA " + std::to_string(r), column);
    out << trim_right(header) << "\n";
    for (const json& stage : view["stages"]) {
      std::string line = cell(stage["stage"].dump(), 7) + cell(stage["layers"].dump(), 7);
      for (size_t r = first; r < last; ++r) {
        std::string text = "-";
        for (const json& replica : stage["replicas"]) {
          if (replica["replica"].get<size_t>() == r) text = cell_text(replica);
        }
        line += cell(text, column - 2) + "  ";
      }
      out << trim_right(line) << "\n";
    }
  }
}

void render_links(std::ostringstream& out, const json& view, size_t width) {
  const json& links = view["links"];
  std::string title = "LINKS (" + std::to_string(links.size()) + " listed, slowest first";
  if (view.contains("linksOmitted") && view["linksOmitted"].get<int64_t>() > 0) {
    title += "; " + std::to_string(view["linksOmitted"].get<int64_t>()) + " faster ones omitted";
  }
  out << "\n" << paragraph(title + ")", width);
  if (links.empty()) {
    out << "none: every stage and replica is on one node\n";
    return;
  }
  // BETWEEN, FROM, TO share what the figures leave of the width.
  const size_t figures = 8 + 8 + 12;  // RTT MS, GBIT/S, SOURCE ("aggregated")
  const size_t names = width > figures + 18 ? width - figures : 18;
  const size_t between_w = std::max<size_t>(9, names / 5), node_w = (names - between_w) / 2;
  out << trim_right(cell("BETWEEN", between_w) + cell("FROM", node_w) + cell("TO", node_w) +
                    right("RTT MS", 7) + " " + right("GBIT/S", 7) + "  " + "SOURCE")
      << "\n";
  for (const json& link : links) {
    std::string where = link["between"].get<std::string>();
    if (where.empty()) where = link["carries"].get<std::string>();
    out << trim_right(cell(where, between_w - 1) + " " +
                      cell(link["from"].get<std::string>(), node_w - 1) + " " +
                      cell(link["to"].get<std::string>(), node_w - 1) + " " +
                      right(number(link["rttMs"].get<double>()), 7) + " " +
                      right(number(link["gbps"].get<double>()), 7) + "  " +
                      link["source"].get<std::string>())
        << "\n";
  }
}

}  // namespace

std::string render_placement(const json& view, int width) {
  std::ostringstream out;
  size_t replicas = 0;
  for (const json& stage : view["stages"]) {
    replicas = std::max(replicas, stage["replicas"].size());
  }
  std::vector<std::string> words = {"TrainingJob " + view["job"].get<std::string>() + ":",
                                    std::to_string(view["stages"].size()) + " stages x " +
                                        std::to_string(replicas) + " replicas"};
  if (view.contains("clusters")) words.push_back("in " + view["clusters"].get<std::string>());
  if (view.contains("predictedIterationSeconds")) {
    words.push_back("predicted iteration " +
                    number(view["predictedIterationSeconds"].get<double>()) + " s");
  }
  for (const std::string& line : wrap_words(words, static_cast<size_t>(width), " ")) {
    out << line << "\n";
  }
  out << "\n";
  render_grid(out, view, static_cast<size_t>(width));
  render_links(out, view, static_cast<size_t>(width));
  return out.str();
}

}  // namespace tessel::kubectl_tessel
