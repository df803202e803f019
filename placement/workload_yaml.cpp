// The YAML form of a workload and the named presets.
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "placement/limits.h"
#include "placement/sync_period.h"
#include "placement/workload.h"

namespace tessel::placement {
namespace {

const std::map<std::string, Workload>& presets() {
  static const std::map<std::string, Workload> table = [] {
    std::map<std::string, Workload> t;
    auto add = [&](const char* name, int layers, int hidden, int heads, int seq, int global) {
      Workload w;
      w.name = name;
      w.layers = layers;
      w.hidden = hidden;
      w.heads = heads;
      w.seq_len = seq;
      w.global_batch = global;
      t[name] = w;
    };
    // The paper's GPT3-XL: 24 layers, hidden 2048, 16 heads (DT-FM's run script), sequence
    // 2048, fp16 with recomputation, micro-batch 1, global batch 1024 sequences.
    add("gpt3-1.3b", 24, 2048, 16, 2048, 1024);
    add("gpt3-6.7b", 32, 4096, 32, 2048, 1024);
    add("gpt2-124m", 12, 768, 12, 1024, 512);
    add("gpt2-350m", 24, 1024, 16, 1024, 512);
    add("gpt2-1.5b", 48, 1600, 25, 1024, 512);
    return t;
  }();
  return table;
}

struct Reader {
  const std::string& source;
  std::string path(const std::string& section, const std::string& key) const {
    return section.empty() ? key : section + "." + key;
  }
  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw WorkloadError(source + ": " + field + ": " + why);
  }
  void known_keys(const YAML::Node& map, const std::string& section,
                  const std::set<std::string>& keys) const {
    if (!map.IsMap()) fail(section.empty() ? "(document)" : section, "must be a mapping");
    for (const auto& kv : map) {
      // as<std::string>() throws YAML's BadConversion for a key that is a mapping or a list.
      if (!kv.first.IsScalar()) {
        fail(section.empty() ? "(document)" : section,
             "a key must be a string (line " + std::to_string(kv.first.Mark().line + 1) + ")");
      }
      const auto key = kv.first.as<std::string>();
      if (!keys.count(key)) fail(path(section, key), "unknown field");
    }
  }
  template <typename T>
  void read(const YAML::Node& map, const std::string& section, const char* key, T& out) const {
    const YAML::Node n = map[key];
    if (!n) return;
    try {
      out = n.as<T>();
    } catch (const YAML::Exception&) {
      fail(path(section, key), "expected " +
                                   std::string(std::is_same_v<T, bool>       ? "true or false"
                                               : std::is_integral_v<T>       ? "an integer"
                                               : std::is_floating_point_v<T> ? "a number"
                                                                             : "a string") +
                                   ", got '" + YAML::Dump(n) + "'");
    }
  }
  // An integer, or "auto": the planner chooses it. Absent is auto too (a plan's job is to
  // choose what it is not given).
  void read_or_auto(const YAML::Node& map, const std::string& section, const char* key, int& out,
                    bool& chosen) const {
    const YAML::Node n = map[key];
    chosen = !n || (n.IsScalar() && n.Scalar() == "auto");
    if (chosen) return;
    try {
      out = n.as<int>();
    } catch (const YAML::Exception&) {
      fail(path(section, key), "expected an integer or auto, got '" + YAML::Dump(n) + "'");
    }
  }
};

}  // namespace

std::vector<std::string> workload_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, w] : presets()) names.push_back(name);
  return names;
}

Workload workload_preset(const std::string& name) {
  const auto it = presets().find(name);
  if (it == presets().end()) {
    std::string known;
    for (const auto& n : workload_preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw WorkloadError("unknown model preset '" + name + "' (known: " + known + ")");
  }
  return it->second;
}

Workload parse_workload_yaml(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw WorkloadError(source + ": line " + std::to_string(e.mark.line + 1) + ", column " +
                        std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  const Reader r{source};
  r.known_keys(root, "", {"format_version", "preset", "model", "training", "data_parallel"});
  if (root["format_version"]) {
    int version = 0;
    r.read(root, "", "format_version", version);
    if (version != 1) r.fail("format_version", "unsupported version " + std::to_string(version));
  }
  Workload w;
  if (root["preset"]) {
    std::string preset;
    r.read(root, "", "preset", preset);
    try {
      w = workload_preset(preset);
    } catch (const WorkloadError& e) {
      r.fail("preset", e.what());
    }
  }
  if (const YAML::Node m = root["model"]) {
    r.known_keys(m, "model",
                 {"name", "layers", "hidden", "ffn_hidden", "heads", "seq_len", "vocab",
                  "precision", "recompute_activations"});
    r.read(m, "model", "name", w.name);
    r.read(m, "model", "layers", w.layers);
    r.read(m, "model", "hidden", w.hidden);
    r.read(m, "model", "ffn_hidden", w.ffn_hidden);
    r.read(m, "model", "heads", w.heads);
    r.read(m, "model", "seq_len", w.seq_len);
    r.read(m, "model", "vocab", w.vocab);
    r.read(m, "model", "recompute_activations", w.recompute_activations);
    if (m["precision"]) {
      std::string p;
      r.read(m, "model", "precision", p);
      try {
        w.precision = parse_precision(p);
      } catch (const WorkloadError& e) {
        r.fail("model.precision", e.what());
      }
    }
  } else if (!root["preset"]) {
    r.fail("model", "missing (give a model section or a preset)");
  }
  if (const YAML::Node t = root["training"]) {
    r.known_keys(t, "training", {"micro_batch", "global_batch"});
    r.read(t, "training", "micro_batch", w.micro_batch);
    r.read(t, "training", "global_batch", w.global_batch);
  }
  if (const YAML::Node d = root["data_parallel"]) {
    r.known_keys(d, "data_parallel",
                 {"mode", "sync_every", "delta_bits", "delayed", "sync_overhead"});
    if (!d["mode"]) r.fail("data_parallel.mode", "missing (synchronous or low-communication)");
    std::string mode;
    r.read(d, "data_parallel", "mode", mode);
    try {
      w.data_parallel.kind = parse_data_parallel_kind(mode);
    } catch (const WorkloadError& e) {
      r.fail("data_parallel.mode", e.what());
    }
    if (!w.data_parallel.low_communication() && d.size() > 1)
      r.fail("data_parallel",
             "sync_every, delta_bits, delayed and sync_overhead apply to low-communication only");
    DataParallelMode& m = w.data_parallel;
    if (m.low_communication()) {
      r.read_or_auto(d, "data_parallel", "sync_every", m.sync_every, m.choose_sync_every);
      r.read_or_auto(d, "data_parallel", "delta_bits", m.delta_bits, m.choose_delta_bits);
      if (m.choose_delta_bits) m.delta_bits = choose_delta_bits().bits;
    }
    r.read(d, "data_parallel", "delayed", m.delayed);
    r.read(d, "data_parallel", "sync_overhead", m.sync_overhead);
  }
  w.validate(source);
  return w;
}

Workload load_workload_file(const std::string& path) {
  std::string error;
  const std::optional<std::string> text = read_file_bounded(path, kMaxModelFileBytes, &error);
  if (!text) throw WorkloadError(path + ": cannot read the model file: " + error);
  return parse_workload_yaml(*text, path);
}

std::string workload_to_yaml(const Workload& w) {
  std::ostringstream o;
  o << "# tessel workload: a GPT model shape and its training batch\n"
    << "format_version: 1\n"
    << "model:\n"
    << "  name: " << w.name << "\n"
    << "  layers: " << w.layers << "\n"
    << "  hidden: " << w.hidden << "\n"
    << "  ffn_hidden: " << w.ffn() << "\n"
    << "  heads: " << w.heads << "\n"
    << "  seq_len: " << w.seq_len << "\n"
    << "  vocab: " << w.vocab << "\n"
    << "  precision: " << to_string(w.precision) << "\n"
    << "  recompute_activations: " << (w.recompute_activations ? "true" : "false") << "\n"
    << "training:\n"
    << "  micro_batch: " << w.micro_batch << "\n"
    << "  global_batch: " << w.global_batch << "\n";
  const DataParallelMode& m = w.data_parallel;
  if (m.low_communication()) {
    o << "data_parallel:\n"
      << "  mode: " << to_string(m.kind) << "\n"
      << "  sync_every: " << (m.choose_sync_every ? "auto" : std::to_string(m.sync_every)) << "\n"
      << "  delta_bits: " << (m.choose_delta_bits ? "auto" : std::to_string(m.delta_bits)) << "\n"
      << "  delayed: " << (m.delayed ? "true" : "false") << "\n";
    if (m.choose_sync_every) o << "  sync_overhead: " << number_text(m.sync_overhead) << "\n";
  }
  return o.str();
}

}  // namespace tessel::placement
