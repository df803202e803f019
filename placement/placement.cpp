#include "placement/placement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

namespace tessel::placement {

Placement build_placement(const Topology& topology, const CostModel& model,
                          const FullCostModel& predictor, const SearchResult& result,
                          const SearchOptions& options) {
  const PartitionShape shape = model.shape();
  const Groups groups = groups_from_labels(result.best, shape);
  const Evaluation eval = model.evaluate(groups);
  const Evaluation pred = predictor.evaluate_in_order(groups, eval.stage_group);

  Placement p;
  p.topology = topology.id;
  p.model = predictor.workload().name;
  p.cost_model = model.name();
  p.strategy = to_string(options.strategy);
  p.schedule = to_string(predictor.schedule().kind);
  p.seed = options.seed;
  p.shape = shape;
  p.cost = eval.cost;
  p.predicted_iteration_s = pred.predicted_iteration_s;
  p.layer_split = pred.layer_split;
  p.dp_rings = pred.dp_rings;
  p.evaluations = result.evaluations;
  p.elapsed_s = result.elapsed_s;
  p.convergence = result.convergence;

  // Follow the matchings of consecutive stages, replica by replica.
  const int stages = shape.stages, replicas = shape.replicas;
  p.pipelines.assign(replicas, std::vector<int>(stages));
  const auto& first = groups[eval.stage_group[0]];
  for (int r = 0; r < replicas; ++r) p.pipelines[r][0] = first[r];
  for (int s = 0; s + 1 < stages; ++s) {
    const HopMatching& hop = eval.hops[s];
    p.hop_bottleneck_s.push_back(hop.bottleneck_s);
    std::map<int, int> next;
    for (size_t i = 0; i < hop.from_device.size(); ++i) next[hop.from_device[i]] = hop.to_device[i];
    for (int r = 0; r < replicas; ++r) p.pipelines[r][s + 1] = next.at(p.pipelines[r][s]);
  }
  p.stages.assign(stages, std::vector<int>(replicas));
  for (int r = 0; r < replicas; ++r)
    for (int s = 0; s < stages; ++s) {
      p.stages[s][r] = p.pipelines[r][s];
      p.rank_map.push_back({r * stages + s, r, s, p.pipelines[r][s]});
    }
  return p;
}

namespace {
// JSON has no infinity: an infeasible prediction is written as null.
nlohmann::json number(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }
}  // namespace

nlohmann::json placement_to_json(const Placement& p) {
  nlohmann::json j;
  j["format_version"] = 1;
  j["topology"] = p.topology;
  j["model"] = p.model;
  j["cost_model"] = p.cost_model;
  j["strategy"] = p.strategy;
  j["schedule"] = p.schedule;
  j["seed"] = p.seed;
  j["stages_count"] = p.shape.stages;
  j["replicas"] = p.shape.replicas;
  j["cost"] = {{"total_s", number(p.cost.total_s)},
               {"data_parallel_s", number(p.cost.data_parallel_s)},
               {"pipeline_s", number(p.cost.pipeline_s)},
               {"feasible", p.cost.feasible}};
  j["predicted_iteration_s"] = number(p.predicted_iteration_s);
  j["evaluations"] = p.evaluations;
  j["elapsed_s"] = p.elapsed_s;
  j["stages"] = nlohmann::json::array();
  for (size_t s = 0; s < p.stages.size(); ++s)
    j["stages"].push_back(
        {{"stage", s},
         {"devices", p.stages[s]},
         {"layers", s < p.layer_split.size() ? p.layer_split[s] : 0},
         {"dp_ring", s < p.dp_rings.size() ? p.dp_rings[s] : std::vector<int>{}}});
  j["pipelines"] = nlohmann::json::array();
  for (size_t r = 0; r < p.pipelines.size(); ++r)
    j["pipelines"].push_back({{"replica", r}, {"devices", p.pipelines[r]}});
  j["rank_map"] = nlohmann::json::array();
  for (const auto& e : p.rank_map)
    j["rank_map"].push_back(
        {{"rank", e.rank}, {"replica", e.replica}, {"stage", e.stage}, {"device", e.device}});
  j["layer_split"] = p.layer_split;
  j["hop_bottleneck_s"] = p.hop_bottleneck_s;
  j["convergence"] = nlohmann::json::array();
  for (const auto& [evals, best] : p.convergence) j["convergence"].push_back({evals, best});
  return j;
}

Placement placement_from_json(const nlohmann::json& j) {
  try {
    Placement p;
    if (j.at("format_version").get<int>() != 1)
      throw std::invalid_argument("format_version: unsupported");
    p.topology = j.at("topology").get<std::string>();
    p.model = j.at("model").get<std::string>();
    p.cost_model = j.at("cost_model").get<std::string>();
    p.strategy = j.at("strategy").get<std::string>();
    p.schedule = j.at("schedule").get<std::string>();
    p.seed = j.at("seed").get<uint64_t>();
    p.shape.stages = j.at("stages_count").get<int>();
    p.shape.replicas = j.at("replicas").get<int>();
    const auto& c = j.at("cost");
    auto num = [](const nlohmann::json& x) { return x.is_null() ? INFINITY : x.get<double>(); };
    p.cost = {num(c.at("total_s")), num(c.at("data_parallel_s")), num(c.at("pipeline_s")),
              c.at("feasible").get<bool>()};
    p.predicted_iteration_s = num(j.at("predicted_iteration_s"));
    p.evaluations = j.at("evaluations").get<long>();
    p.elapsed_s = j.at("elapsed_s").get<double>();
    for (const auto& s : j.at("stages")) {
      p.stages.push_back(s.at("devices").get<std::vector<int>>());
      p.dp_rings.push_back(s.at("dp_ring").get<std::vector<int>>());
    }
    for (const auto& r : j.at("pipelines"))
      p.pipelines.push_back(r.at("devices").get<std::vector<int>>());
    for (const auto& e : j.at("rank_map"))
      p.rank_map.push_back({e.at("rank").get<int>(), e.at("replica").get<int>(),
                            e.at("stage").get<int>(), e.at("device").get<int>()});
    p.layer_split = j.at("layer_split").get<std::vector<int>>();
    p.hop_bottleneck_s = j.at("hop_bottleneck_s").get<std::vector<double>>();
    for (const auto& c2 : j.at("convergence"))
      p.convergence.emplace_back(c2.at(0).get<long>(), c2.at(1).get<double>());
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("placement JSON: ") + e.what());
  }
}

namespace {

void yaml_value(std::ostringstream& o, const nlohmann::json& v, int indent);

void yaml_list_inline(std::ostringstream& o, const nlohmann::json& v) {
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i].dump();
  o << "]";
}

bool is_scalar_list(const nlohmann::json& v) {
  return v.is_array() && std::all_of(v.begin(), v.end(), [](const nlohmann::json& x) {
           return x.is_primitive() ||
                  (x.is_array() &&
                   std::all_of(x.begin(), x.end(), [](const auto& y) { return y.is_primitive(); }));
         });
}

// A small JSON -> YAML writer (block style, short lists inline): JSON scalars are valid YAML.
void yaml_value(std::ostringstream& o, const nlohmann::json& v, int indent) {
  const std::string pad(indent, ' ');
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      o << pad << it.key() << ":";
      if (it->is_primitive()) {
        o << " " << it->dump() << "\n";
      } else if (is_scalar_list(*it)) {
        o << " [";
        for (size_t i = 0; i < it->size(); ++i) {
          o << (i ? ", " : "");
          if ((*it)[i].is_array())
            yaml_list_inline(o, (*it)[i]);
          else
            o << (*it)[i].dump();
        }
        o << "]\n";
      } else {
        o << "\n";
        yaml_value(o, *it, indent + 2);
      }
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (item.is_object()) {
        std::ostringstream inner;
        yaml_value(inner, item, indent + 2);
        std::string text = inner.str();
        text.replace(indent, 2, "- ");
        o << text;
      } else {
        o << pad << "- " << item.dump() << "\n";
      }
    }
  }
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}

// "Oregon x2, Tokyo" for the sites of a list of devices, in order of first appearance.
std::string sites_of(const std::vector<int>& devices, const Topology& t) {
  std::vector<std::pair<std::string, int>> counts;
  for (int d : devices) {
    const std::string& site = t.devices[d].site;
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto& c) { return c.first == site; });
    if (it == counts.end())
      counts.emplace_back(site, 1);
    else
      ++it->second;
  }
  std::string s;
  for (const auto& [site, n] : counts)
    s += (s.empty() ? "" : ", ") + site + (n > 1 ? " x" + std::to_string(n) : "");
  return s;
}

std::string seconds(double s) {
  if (!std::isfinite(s)) return "infeasible";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f s", s);
  return buf;
}

}  // namespace

std::string placement_to_yaml(const Placement& p) {
  std::ostringstream o;
  o << "# tessel placement\n";
  yaml_value(o, placement_to_json(p), 0);
  return o.str();
}

std::string placement_to_table(const Placement& p, const Topology& topology) {
  std::ostringstream o;
  o << "placement of " << p.shape.stages << " stages x " << p.shape.replicas << " replicas on "
    << p.topology << " (model " << p.model << ")\n"
    << "cost model " << p.cost_model << ", strategy " << p.strategy << ", seed " << p.seed << ": "
    << p.evaluations << " evaluations in " << seconds(p.elapsed_s) << "\n"
    << (p.cost_model == "paper"
            ? "cost " + seconds(p.cost.total_s) + " = data-parallel " +
                  seconds(p.cost.data_parallel_s) + " + pipeline " + seconds(p.cost.pipeline_s)
            : "cost (iteration time) " + seconds(p.cost.feasible ? p.cost.total_s : INFINITY) +
                  "; slowest data-parallel all-reduce " + seconds(p.cost.data_parallel_s) +
                  " (overlapped with the backward)")
    << "\n";
  if (!p.cost.feasible) {
    char over[128];
    std::snprintf(over, sizeof over,
                  "does not fit in GPU memory: about %.1f GiB short (more stages or larger GPUs)\n",
                  p.cost.total_s - kInfeasibleCost);
    o << over;
  }
  o << "predicted iteration (" << p.schedule << "): " << seconds(p.predicted_iteration_s) << "\n\n";
  o << "stage  layers  devices (replica 0.." << p.shape.replicas - 1 << ")  sites\n";
  for (size_t s = 0; s < p.stages.size(); ++s) {
    char head[32];
    std::snprintf(head, sizeof head, "%5zu  %6d  ", s,
                  p.layer_split.empty() ? 0 : p.layer_split[s]);
    o << head << join(p.stages[s]) << "  [" << sites_of(p.stages[s], topology) << "]\n";
  }
  o << "\nreplica  pipeline devices (stage 0.." << p.shape.stages - 1 << ")  sites\n";
  for (size_t r = 0; r < p.pipelines.size(); ++r) {
    char head[32];
    std::snprintf(head, sizeof head, "%7zu  ", r);
    o << head << join(p.pipelines[r]) << "  [" << sites_of(p.pipelines[r], topology) << "]\n";
  }
  o << "\nrank = replica x " << p.shape.stages << " + stage\n";
  return o.str();
}

}  // namespace tessel::placement
