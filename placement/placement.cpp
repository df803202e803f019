#include "placement/placement.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
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
  p.interrupted = result.interrupted;
  p.topology_devices = topology.size();
  p.topology_fingerprint = topology_fingerprint(topology);

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
  if (p.topology_devices > 0) j["topology_devices"] = p.topology_devices;
  if (!p.topology_fingerprint.empty()) j["topology_fingerprint"] = p.topology_fingerprint;
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
  j["interrupted"] = p.interrupted;
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

std::string topology_fingerprint(const Topology& topology) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a 64
  auto add = [&](const std::string& text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 0x100000001b3ULL;
    }
  };
  add("devices " + std::to_string(topology.size()) + "\n");
  for (const Device& d : topology.devices) add(std::to_string(d.id) + " " + d.site + "\n");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

namespace {

using nlohmann::json;

// Typed access to the JSON form, every failure naming the source and the field.
class FieldReader {
 public:
  explicit FieldReader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw PlacementError(source_ + ": " + field + ": " + why);
  }

  static std::string shown(const json& v) {
    std::string text = v.dump();
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return text;
  }

  const json& object(const json& v, const std::string& field) const {
    if (!v.is_object()) fail(field, "expected an object, got " + shown(v));
    return v;
  }
  const json& array(const json& v, const std::string& field) const {
    if (!v.is_array()) fail(field, "expected a list, got " + shown(v));
    return v;
  }
  // obj[key], which must be there; field names obj ("" at the top).
  const json& at(const json& obj, const std::string& field, const std::string& key) const {
    const std::string name = field.empty() ? key : field + "." + key;
    const auto it = obj.find(key);
    if (it == obj.end()) fail(name, "missing");
    return *it;
  }
  std::string text(const json& v, const std::string& field) const {
    if (!v.is_string()) fail(field, "expected a string, got " + shown(v));
    return v.get<std::string>();
  }
  bool boolean(const json& v, const std::string& field) const {
    if (!v.is_boolean()) fail(field, "expected true or false, got " + shown(v));
    return v.get<bool>();
  }
  long long integer(const json& v, const std::string& field, long long lo, long long hi) const {
    if (!v.is_number_integer()) fail(field, "expected an integer, got " + shown(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(LLONG_MAX))
      fail(field, shown(v) + " is not in " + std::to_string(lo) + ".." + std::to_string(hi));
    const long long x = v.get<long long>();
    if (x < lo || x > hi)
      fail(field,
           std::to_string(x) + " is not in " + std::to_string(lo) + ".." + std::to_string(hi));
    return x;
  }
  int int_value(const json& v, const std::string& field) const {
    return static_cast<int>(integer(v, field, INT_MIN, INT_MAX));
  }
  std::vector<int> int_list(const json& v, const std::string& field) const {
    array(v, field);
    std::vector<int> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(int_value(v[i], field + "[" + std::to_string(i) + "]"));
    return out;
  }
  // A number of seconds: finite and not negative, or null (written for infinity).
  double seconds(const json& v, const std::string& field) const {
    if (v.is_null()) return INFINITY;
    if (!v.is_number()) fail(field, "expected a number or null, got " + shown(v));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < 0) fail(field, shown(v) + " is not a number of seconds");
    return x;
  }

 private:
  std::string source_;
};

std::string at_index(const std::string& field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

}  // namespace

Placement placement_from_json(const nlohmann::json& j, const std::string& source) {
  const FieldReader r(source);
  if (!j.is_object())
    throw PlacementError(source + ": not a placement: expected a JSON object, got " +
                         FieldReader::shown(j));
  Placement p;
  const long long version = r.integer(r.at(j, "", "format_version"), "format_version", 0, INT_MAX);
  if (version != 1)
    r.fail("format_version", std::to_string(version) + " is not supported (this tessel reads 1)");
  p.topology = r.text(r.at(j, "", "topology"), "topology");
  if (j.contains("topology_devices"))
    p.topology_devices =
        static_cast<int>(r.integer(j["topology_devices"], "topology_devices", 1, INT_MAX));
  if (j.contains("topology_fingerprint"))
    p.topology_fingerprint = r.text(j["topology_fingerprint"], "topology_fingerprint");
  p.model = r.text(r.at(j, "", "model"), "model");
  p.cost_model = r.text(r.at(j, "", "cost_model"), "cost_model");
  p.strategy = r.text(r.at(j, "", "strategy"), "strategy");
  p.schedule = r.text(r.at(j, "", "schedule"), "schedule");
  {
    const json& seed = r.at(j, "", "seed");
    if (!seed.is_number_unsigned())
      r.fail("seed", "expected an integer in 0..2^64-1, got " + FieldReader::shown(seed));
    p.seed = seed.get<uint64_t>();
  }
  p.shape.stages = r.int_value(r.at(j, "", "stages_count"), "stages_count");
  p.shape.replicas = r.int_value(r.at(j, "", "replicas"), "replicas");
  const json& c = r.object(r.at(j, "", "cost"), "cost");
  p.cost.total_s = r.seconds(r.at(c, "cost", "total_s"), "cost.total_s");
  p.cost.data_parallel_s = r.seconds(r.at(c, "cost", "data_parallel_s"), "cost.data_parallel_s");
  p.cost.pipeline_s = r.seconds(r.at(c, "cost", "pipeline_s"), "cost.pipeline_s");
  p.cost.feasible = r.boolean(r.at(c, "cost", "feasible"), "cost.feasible");
  p.predicted_iteration_s =
      r.seconds(r.at(j, "", "predicted_iteration_s"), "predicted_iteration_s");
  p.evaluations = r.integer(r.at(j, "", "evaluations"), "evaluations", 0, LLONG_MAX);
  p.elapsed_s = r.seconds(r.at(j, "", "elapsed_s"), "elapsed_s");
  if (j.contains("interrupted")) p.interrupted = r.boolean(j["interrupted"], "interrupted");
  p.layer_split = r.int_list(r.at(j, "", "layer_split"), "layer_split");

  const json& stages = r.array(r.at(j, "", "stages"), "stages");
  for (size_t s = 0; s < stages.size(); ++s) {
    const std::string field = at_index("stages", s);
    const json& stage = r.object(stages[s], field);
    if (stage.contains("stage") &&
        r.integer(stage["stage"], field + ".stage", 0, INT_MAX) != static_cast<long long>(s))
      r.fail(field + ".stage", FieldReader::shown(stage["stage"]) + ", but it is entry " +
                                   std::to_string(s) + " of the list");
    p.stages.push_back(r.int_list(r.at(stage, field, "devices"), field + ".devices"));
    p.dp_rings.push_back(r.int_list(r.at(stage, field, "dp_ring"), field + ".dp_ring"));
    if (stage.contains("layers")) {
      const int layers = r.int_value(stage["layers"], field + ".layers");
      if (s < p.layer_split.size() && layers != p.layer_split[s])
        r.fail(field + ".layers", std::to_string(layers) + ", but layer_split[" +
                                      std::to_string(s) + "] is " +
                                      std::to_string(p.layer_split[s]));
    }
  }
  const json& pipelines = r.array(r.at(j, "", "pipelines"), "pipelines");
  for (size_t i = 0; i < pipelines.size(); ++i) {
    const std::string field = at_index("pipelines", i);
    const json& pipe = r.object(pipelines[i], field);
    if (pipe.contains("replica") &&
        r.integer(pipe["replica"], field + ".replica", 0, INT_MAX) != static_cast<long long>(i))
      r.fail(field + ".replica", FieldReader::shown(pipe["replica"]) + ", but it is entry " +
                                     std::to_string(i) + " of the list");
    p.pipelines.push_back(r.int_list(r.at(pipe, field, "devices"), field + ".devices"));
  }
  const json& ranks = r.array(r.at(j, "", "rank_map"), "rank_map");
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::string field = at_index("rank_map", i);
    const json& e = r.object(ranks[i], field);
    p.rank_map.push_back({r.int_value(r.at(e, field, "rank"), field + ".rank"),
                          r.int_value(r.at(e, field, "replica"), field + ".replica"),
                          r.int_value(r.at(e, field, "stage"), field + ".stage"),
                          r.int_value(r.at(e, field, "device"), field + ".device")});
  }
  const json& hops = r.array(r.at(j, "", "hop_bottleneck_s"), "hop_bottleneck_s");
  for (size_t i = 0; i < hops.size(); ++i)
    p.hop_bottleneck_s.push_back(r.seconds(hops[i], at_index("hop_bottleneck_s", i)));
  const json& convergence = r.array(r.at(j, "", "convergence"), "convergence");
  for (size_t i = 0; i < convergence.size(); ++i) {
    const std::string field = at_index("convergence", i);
    const json& point = r.array(convergence[i], field);
    if (point.size() != 2) r.fail(field, "expected [evaluations, best cost]");
    p.convergence.emplace_back(r.integer(point[0], field + "[0]", 0, LLONG_MAX),
                               r.seconds(point[1], field + "[1]"));
  }
  return p;
}

namespace {

// The deepest nesting of [ and { in a JSON text (outside strings), stopping past `limit`.
int nesting_depth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

Placement read_placement_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PlacementError(path + ": cannot open the placement: " + std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxPlacementFileBytes)
      throw PlacementError(path + ": more than " + std::to_string(kMaxPlacementFileBytes >> 20) +
                           " MiB: not a placement from `tessel plan --format json`");
  }
  if (in.bad()) throw PlacementError(path + ": cannot read the placement: " + std::strerror(errno));
  return parse_placement_text(text, path);
}

Placement parse_placement_text(const std::string& text, const std::string& path) {
  if (text.size() > kMaxPlacementFileBytes)
    throw PlacementError(path + ": more than " + std::to_string(kMaxPlacementFileBytes >> 20) +
                         " MiB: not a placement from `tessel plan --format json`");
  if (nesting_depth(text, kMaxPlacementJsonDepth) > kMaxPlacementJsonDepth)
    throw PlacementError(path + ": nested more than " + std::to_string(kMaxPlacementJsonDepth) +
                         " levels deep: not a placement from `tessel plan --format json`");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (1e400)
    std::string why = e.what();
    const size_t bracket = why.find("] ");
    if (why.rfind("[json.exception", 0) == 0 && bracket != std::string::npos)
      why = why.substr(bracket + 2);
    throw PlacementError(path + ": not JSON: " + why);
  }
  return placement_from_json(j, path);
}

void check_placement(const Placement& p, const Topology& topology, const PartitionShape& shape,
                     int model_layers, const std::string& source) {
  const FieldReader r(source);
  const int n = topology.size();
  const int stages = shape.stages, replicas = shape.replicas;
  if (p.topology != topology.id)
    r.fail("topology",
           "planned for '" + p.topology + "', but this topology is '" + topology.id + "'");
  if (p.topology_devices > 0 && p.topology_devices != n)
    r.fail("topology_devices", "planned on " + std::to_string(p.topology_devices) +
                                   " devices, but topology '" + topology.id + "' has " +
                                   std::to_string(n));
  if (!p.topology_fingerprint.empty() && p.topology_fingerprint != topology_fingerprint(topology))
    r.fail("topology_fingerprint", p.topology_fingerprint +
                                       ": planned for other devices than those of topology '" +
                                       topology.id + "' (" + topology_fingerprint(topology) +
                                       "): the same id, but its devices' ids or sites differ");
  if (p.shape.stages != stages || p.shape.replicas != replicas)
    r.fail("stages_count, replicas", "the placement is " + std::to_string(p.shape.stages) + " x " +
                                         std::to_string(p.shape.replicas) +
                                         ", the pipeline to run is " + std::to_string(stages) +
                                         " x " + std::to_string(replicas) + " (stages x replicas)");
  if (static_cast<long long>(stages) * replicas > n)
    r.fail("stages_count, replicas", std::to_string(stages) + " x " + std::to_string(replicas) +
                                         " devices, but topology '" + topology.id + "' has " +
                                         std::to_string(n));

  // The pipelines: the view everything else is checked against.
  if (p.pipelines.size() != static_cast<size_t>(replicas))
    r.fail("pipelines", std::to_string(p.pipelines.size()) +
                            " entries, expected one per replica (" + std::to_string(replicas) +
                            ")");
  std::vector<std::string> used_at(n);  // where each device was first used
  for (int rep = 0; rep < replicas; ++rep) {
    const std::string field = at_index("pipelines", rep) + ".devices";
    const std::vector<int>& pipe = p.pipelines[rep];
    if (pipe.size() != static_cast<size_t>(stages))
      r.fail(field, std::to_string(pipe.size()) + " devices, expected one per stage (" +
                        std::to_string(stages) + ")");
    for (int s = 0; s < stages; ++s) {
      const int d = pipe[s];
      const std::string where = at_index(field, s);
      if (d < 0 || d >= n)
        r.fail(where, "device " + std::to_string(d) + " is not in the topology (" +
                          std::to_string(n) + " devices, 0.." + std::to_string(n - 1) + ")");
      if (!used_at[d].empty())
        r.fail(where,
               "device " + std::to_string(d) + " is used twice (also at " + used_at[d] + ")");
      used_at[d] = where;
    }
  }

  // The views derived from it must agree with it.
  if (p.stages.size() != static_cast<size_t>(stages))
    r.fail("stages", std::to_string(p.stages.size()) + " entries, expected one per stage (" +
                         std::to_string(stages) + ")");
  for (int s = 0; s < stages; ++s) {
    const std::string field = at_index("stages", s) + ".devices";
    if (p.stages[s].size() != static_cast<size_t>(replicas))
      r.fail(field, std::to_string(p.stages[s].size()) + " devices, expected one per replica (" +
                        std::to_string(replicas) + ")");
    for (int rep = 0; rep < replicas; ++rep)
      if (p.stages[s][rep] != p.pipelines[rep][s])
        r.fail(at_index(field, rep),
               "device " + std::to_string(p.stages[s][rep]) + ", but " +
                   at_index("pipelines", rep) + ".devices[" + std::to_string(s) + "] is " +
                   std::to_string(p.pipelines[rep][s]) + " (the two views must agree)");
  }
  if (!p.dp_rings.empty()) {
    if (p.dp_rings.size() != static_cast<size_t>(stages))
      r.fail("stages", "dp_ring: " + std::to_string(p.dp_rings.size()) +
                           " rings, expected one per stage (" + std::to_string(stages) + ")");
    for (int s = 0; s < stages; ++s) {
      const std::string field = at_index("stages", s) + ".dp_ring";
      if (p.dp_rings[s].empty()) continue;  // not given
      std::vector<int> ring = p.dp_rings[s], members = p.stages[s];
      std::sort(ring.begin(), ring.end());
      std::sort(members.begin(), members.end());
      if (ring != members)
        r.fail(field, "not an order of the stage's devices (" +
                          std::to_string(p.dp_rings[s].size()) + " entries; each of the stage's " +
                          std::to_string(replicas) + " devices must appear once)");
    }
  }
  const long long ranks = static_cast<long long>(stages) * replicas;
  if (static_cast<long long>(p.rank_map.size()) != ranks)
    r.fail("rank_map", std::to_string(p.rank_map.size()) +
                           " entries, expected stages x replicas = " + std::to_string(ranks));
  std::vector<char> rank_seen(static_cast<size_t>(ranks), 0);
  for (size_t i = 0; i < p.rank_map.size(); ++i) {
    const RankEntry& e = p.rank_map[i];
    const std::string field = at_index("rank_map", i);
    if (e.replica < 0 || e.replica >= replicas)
      r.fail(field + ".replica",
             std::to_string(e.replica) + " is not in 0.." + std::to_string(replicas - 1));
    if (e.stage < 0 || e.stage >= stages)
      r.fail(field + ".stage",
             std::to_string(e.stage) + " is not in 0.." + std::to_string(stages - 1));
    const long long rank = static_cast<long long>(e.replica) * stages + e.stage;
    if (e.rank != rank)
      r.fail(field + ".rank", std::to_string(e.rank) + ", but replica " +
                                  std::to_string(e.replica) + " x " + std::to_string(stages) +
                                  " + stage " + std::to_string(e.stage) + " = " +
                                  std::to_string(rank));
    if (rank_seen[rank]++)
      r.fail(field + ".rank", "rank " + std::to_string(rank) + " listed twice");
    if (e.device != p.pipelines[e.replica][e.stage])
      r.fail(field + ".device", "device " + std::to_string(e.device) + ", but pipelines[" +
                                    std::to_string(e.replica) + "].devices[" +
                                    std::to_string(e.stage) + "] is " +
                                    std::to_string(p.pipelines[e.replica][e.stage]));
  }

  // The layer split, against the model that will run.
  if (p.layer_split.size() != static_cast<size_t>(stages))
    r.fail("layer_split", std::to_string(p.layer_split.size()) +
                              " entries, expected one per stage (" + std::to_string(stages) + ")");
  long long layers = 0;
  for (int s = 0; s < stages; ++s) {
    if (p.layer_split[s] < 1)
      r.fail(at_index("layer_split", s),
             std::to_string(p.layer_split[s]) + " layers; every stage needs at least 1");
    layers += p.layer_split[s];
  }
  if (model_layers > 0 && layers != model_layers)
    r.fail("layer_split", "sums to " + std::to_string(layers) +
                              " layers, but the model to run has " + std::to_string(model_layers) +
                              " (the placement is for model '" + p.model + "')");
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
    << p.evaluations << " evaluations in " << seconds(p.elapsed_s)
    << (p.interrupted ? " (interrupted: the best placement found so far)" : "") << "\n"
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
