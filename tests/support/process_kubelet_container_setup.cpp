#include "tests/support/process_kubelet_container_setup.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "kube/base64.h"
#include "kube/object.h"
#include "tests/support/structural_schema_errors.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kDefaultFileMode = 0644;  // the API's defaultMode (420)
constexpr std::string_view kPathSeparators = " \t\n=:,;\"'()<>|&";

std::string string_at(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

bool flag_at(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

const json& array_at(const json& object, const char* key) {
  static const json empty = json::array();
  const auto it = object.find(key);
  return it != object.end() && it->is_array() ? *it : empty;
}

std::string format_map(const std::map<std::string, std::string>& entries) {
  std::string out;
  for (const auto& [key, value] : entries) {
    if (!out.empty()) out += "\n";
    out += key + "=" + go_quote(value);
  }
  return out;
}

// The key inside metadata.labels['key'] (or annotations), if `path` has that form.
std::optional<std::string> subscript(const std::string& path, std::string_view prefix) {
  if (path.size() < prefix.size() + 4 || path.compare(0, prefix.size(), prefix) != 0) {
    return std::nullopt;
  }
  const std::string_view rest = std::string_view(path).substr(prefix.size());
  if (rest.substr(0, 2) != "['" || rest.substr(rest.size() - 2) != "']") return std::nullopt;
  return std::string(rest.substr(2, rest.size() - 4));
}

// The Kubernetes rule for environment variable names: [-._a-zA-Z][-._a-zA-Z0-9]*.
bool is_env_var_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The key/value data of a ConfigMap (data and base64 binaryData) or Secret (base64 data and
// stringData is never stored, so data only).
std::map<std::string, std::string> object_data(const std::string& kind, const json& object) {
  std::map<std::string, std::string> data;
  const auto decode_into = [&](const char* field) {
    const auto it = object.find(field);
    if (it == object.end() || !it->is_object()) return;
    for (const auto& [key, value] : it->items()) {
      const auto bytes = kube::base64_decode(value.is_string() ? value.get<std::string>() : "");
      if (!bytes) {
        throw ContainerConfigError(lower(kind) + " \"" + kube::object_name(object) + "\": key " +
                                   key + " is not valid base64");
      }
      data[key] = *bytes;
    }
  };
  if (kind == "ConfigMap") {
    if (const auto it = object.find("data"); it != object.end() && it->is_object()) {
      for (const auto& [key, value] : it->items()) {
        data[key] = value.is_string() ? value.get<std::string>() : "";
      }
    }
    decode_into("binaryData");
  } else {
    decode_into("data");
  }
  return data;
}

// An env var's configMapKeyRef or secretKeyRef: the kind it reads and the reference.
std::optional<std::pair<std::string, json::const_iterator>> key_reference(const json& value_from) {
  for (const auto& [field, kind] :
       {std::pair{"configMapKeyRef", "ConfigMap"}, std::pair{"secretKeyRef", "Secret"}}) {
    if (const auto it = value_from.find(field); it != value_from.end()) {
      return std::pair{std::string(kind), it};
    }
  }
  return std::nullopt;
}

// A ConfigMap or Secret by name; nullopt when it is missing and optional. Throws `error`
// built from the kubelet's message when it is missing and required.
template <typename Error>
std::optional<std::map<std::string, std::string>> read_data(const ObjectReader& reader,
                                                            const std::string& kind,
                                                            const std::string& ns,
                                                            const std::string& name, bool optional,
                                                            const std::string& message_prefix) {
  const std::optional<json> object = reader(kind, ns, name);
  if (!object) {
    if (optional) return std::nullopt;
    throw Error(message_prefix + lower(kind) + " \"" + name + "\" not found");
  }
  return object_data(kind, *object);
}

void write_file(const fs::path& path, const std::string& content, int mode,
                const std::string& volume) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out || ::chmod(path.c_str(), static_cast<mode_t>(mode & 07777)) != 0) {
    throw VolumeSetupError("MountVolume.SetUp failed for volume \"" + volume +
                           "\" : cannot write " + path.string());
  }
}

// A relative path without "..", as the API requires of volume item paths and subPaths.
fs::path safe_relative(const std::string& path, const std::string& what) {
  const fs::path relative(path);
  bool escapes = relative.is_absolute() || path.empty();
  for (const fs::path& part : relative) escapes = escapes || part == "..";
  if (escapes)
    throw VolumeSetupError(what + ": path \"" + path + "\" must be relative, without ..");
  return relative;
}

int mode_of(const json& item, int default_mode) {
  const auto it = item.find("mode");
  return it != item.end() && it->is_number_integer() ? it->get<int>() : default_mode;
}

// Writes data[key] for each item (all keys when there are no items) under directory.
void write_keys(const fs::path& directory, const std::map<std::string, std::string>& data,
                const json& source, const std::string& volume, const std::string& kind,
                int default_mode) {
  const json& items = array_at(source, "items");
  const std::string setup_failed = "MountVolume.SetUp failed for volume \"" + volume + "\" : ";
  if (items.empty()) {
    for (const auto& [key, value] : data) {
      write_file(directory / safe_relative(key, setup_failed + "key"), value, default_mode, volume);
    }
    return;
  }
  for (const json& item : items) {
    const std::string key = string_at(item, "key");
    const auto it = data.find(key);
    if (it == data.end()) {
      if (flag_at(source, "optional")) continue;
      throw VolumeSetupError(setup_failed + (kind == "ConfigMap" ? "configmap" : "secret") +
                             " references non-existent config key: " + key);
    }
    const fs::path path = directory / safe_relative(string_at(item, "path"), setup_failed + "item");
    fs::create_directories(path.parent_path());
    write_file(path, it->second, mode_of(item, default_mode), volume);
  }
}

void write_downward_api(const fs::path& directory, const json& source, const json& pod,
                        const PodAddresses& addresses, const std::string& volume,
                        int default_mode) {
  const std::string setup_failed = "MountVolume.SetUp failed for volume \"" + volume + "\" : ";
  for (const json& item : array_at(source, "items")) {
    const auto field_ref = item.find("fieldRef");
    if (field_ref == item.end()) {
      throw VolumeSetupError(setup_failed + "item " + string_at(item, "path") +
                             ": only fieldRef is supported by the process kubelet");
    }
    std::string value;
    try {
      value = pod_field(pod, string_at(*field_ref, "fieldPath"), addresses, true);
    } catch (const ContainerConfigError& error) {
      throw VolumeSetupError(setup_failed + error.what());
    }
    const fs::path path = directory / safe_relative(string_at(item, "path"), setup_failed + "item");
    fs::create_directories(path.parent_path());
    write_file(path, value, mode_of(item, default_mode), volume);
  }
}

int default_mode_of(const json& source) {
  const auto it = source.find("defaultMode");
  return it != source.end() && it->is_number_integer() ? it->get<int>() : kDefaultFileMode;
}

// The directory of a hostPath volume on the node: <node_root>/<path>. DirectoryOrCreate and ""
// (no check) create it, as the kubelet (or the container runtime's bind mount) does; Directory
// must exist; the file and device types are not supported.
fs::path node_directory(const json& host_path, const std::string& node_root,
                        const std::string& setup_failed) {
  const std::string path = string_at(host_path, "path");
  const std::string type = string_at(host_path, "type");
  if (path.empty() || path.front() != '/' ||
      std::ranges::any_of(fs::path(path), [](const fs::path& part) { return part == ".."; })) {
    throw VolumeSetupError(setup_failed + "hostPath path \"" + path +
                           "\" is not an absolute path without '..'");
  }
  const fs::path directory = fs::path(node_root) / fs::path(path).relative_path();
  if (type.empty() || type == "DirectoryOrCreate") {
    fs::create_directories(directory);
  } else if (type == "Directory") {
    if (!fs::is_directory(directory))
      throw VolumeSetupError(setup_failed + "hostPath type check failed: " + path +
                             " is not a directory");
  } else {
    throw VolumeSetupError(setup_failed + "hostPath type \"" + type +
                           "\" is not supported by the process kubelet (only Directory, "
                           "DirectoryOrCreate and none)");
  }
  return directory;
}

void prepare_volume(const json& volume, const fs::path& directory, const std::string& node_root,
                    const json& pod, const ObjectReader& reader, const TokenIssuer& issue_token,
                    const PodAddresses& addresses) {
  const std::string name = string_at(volume, "name");
  const std::string ns = kube::object_namespace(pod);
  const std::string setup_failed = "MountVolume.SetUp failed for volume \"" + name + "\" : ";
  if (const auto host_path = volume.find("hostPath"); host_path != volume.end()) {
    fs::create_symlink(node_directory(*host_path, node_root, setup_failed), directory);
    return;
  }
  fs::create_directories(directory);
  if (volume.contains("emptyDir")) return;
  if (const auto source = volume.find("configMap"); source != volume.end()) {
    const auto data =
        read_data<VolumeSetupError>(reader, "ConfigMap", ns, string_at(*source, "name"),
                                    flag_at(*source, "optional"), setup_failed);
    if (data) write_keys(directory, *data, *source, name, "ConfigMap", default_mode_of(*source));
    return;
  }
  if (const auto source = volume.find("secret"); source != volume.end()) {
    const auto data =
        read_data<VolumeSetupError>(reader, "Secret", ns, string_at(*source, "secretName"),
                                    flag_at(*source, "optional"), setup_failed);
    if (data) write_keys(directory, *data, *source, name, "Secret", default_mode_of(*source));
    return;
  }
  if (const auto source = volume.find("downwardAPI"); source != volume.end()) {
    write_downward_api(directory, *source, pod, addresses, name, default_mode_of(*source));
    return;
  }
  if (const auto projected = volume.find("projected"); projected != volume.end()) {
    const int mode = default_mode_of(*projected);
    for (const json& source : array_at(*projected, "sources")) {
      if (const auto it = source.find("configMap"); it != source.end()) {
        const auto data =
            read_data<VolumeSetupError>(reader, "ConfigMap", ns, string_at(*it, "name"),
                                        flag_at(*it, "optional"), setup_failed);
        if (data) write_keys(directory, *data, *it, name, "ConfigMap", mode);
      } else if (const auto it = source.find("secret"); it != source.end()) {
        const auto data = read_data<VolumeSetupError>(reader, "Secret", ns, string_at(*it, "name"),
                                                      flag_at(*it, "optional"), setup_failed);
        if (data) write_keys(directory, *data, *it, name, "Secret", mode);
      } else if (const auto it = source.find("downwardAPI"); it != source.end()) {
        write_downward_api(directory, *it, pod, addresses, name, mode);
      } else if (const auto it = source.find("serviceAccountToken"); it != source.end()) {
        std::string token;
        try {
          token = issue_token(pod, string_at(*it, "audience"),
                              it->value("expirationSeconds", std::int64_t{3600}));
        } catch (const std::exception& error) {
          throw VolumeSetupError(setup_failed + "failed to fetch token: " + error.what());
        }
        const fs::path path =
            directory / safe_relative(string_at(*it, "path"), setup_failed + "token");
        fs::create_directories(path.parent_path());
        write_file(path, token, mode, name);
      } else {
        throw VolumeSetupError(setup_failed + "projected source " +
                               (source.empty() ? "{}" : source.begin().key()) +
                               " is not supported by the process kubelet");
      }
    }
    return;
  }
  json other = volume;
  other.erase("name");
  throw VolumeSetupError(setup_failed + "volume type " +
                         (other.empty() ? std::string("(none)") : other.begin().key()) +
                         " is not supported by the process kubelet");
}

std::string trim_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

bool is_under(const std::string& path, const std::string& directory) {
  return path.size() > directory.size() && path.compare(0, directory.size(), directory) == 0 &&
         path[directory.size()] == '/';
}

std::vector<std::string> mount_paths(const json& container) {
  std::vector<std::string> paths;
  for (const json& mount : array_at(container, "volumeMounts")) {
    paths.push_back(trim_trailing_slashes(string_at(mount, "mountPath")));
  }
  return paths;
}

// Symlinks root + mountPath -> the volume directory (or its subPath).
void link_mounts(const json& container, const fs::path& root, const fs::path& volumes_dir) {
  const std::vector<std::string> paths = mount_paths(container);
  for (const std::string& a : paths) {
    if (a.empty() || a[0] != '/') {
      throw ContainerConfigError("volumeMount path \"" + a + "\" must be absolute");
    }
    for (const std::string& b : paths) {
      if (is_under(a, b) || (&a != &b && a == b)) {
        throw ContainerConfigError("volumeMounts \"" + b + "\" and \"" + a +
                                   "\" nest or repeat, which the process kubelet cannot mount");
      }
    }
  }
  for (const json& mount : array_at(container, "volumeMounts")) {
    const std::string volume = string_at(mount, "name");
    fs::path target = volumes_dir / volume;
    if (!fs::exists(fs::symlink_status(target))) {
      throw ContainerConfigError("volumeMount \"" + volume + "\" names no volume of the pod");
    }
    if (const std::string sub_path = string_at(mount, "subPath"); !sub_path.empty()) {
      try {
        target /= safe_relative(sub_path, "subPath");
      } catch (const VolumeSetupError& error) {
        throw ContainerConfigError(error.what());
      }
      if (!fs::exists(fs::symlink_status(target))) fs::create_directories(target);
    }
    const fs::path link = root / trim_trailing_slashes(string_at(mount, "mountPath")).substr(1);
    fs::create_directories(link.parent_path());
    fs::create_symlink(target, link);
  }
}

std::string entrypoint_of(const std::string& image,
                          const std::map<std::string, std::string>& entrypoints) {
  if (const auto it = entrypoints.find(image); it != entrypoints.end()) return it->second;
  std::string repository = image.substr(0, image.find('@'));
  const std::size_t slash = repository.rfind('/');
  const std::size_t colon = repository.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    repository.resize(colon);
  }
  if (const auto it = entrypoints.find(repository); it != entrypoints.end()) return it->second;
  throw ProcessStartError("exec: no command specified: image \"" + image +
                          "\" has no entrypoint known to the process kubelet");
}

void set_variable(std::vector<std::pair<std::string, std::string>>& environment,
                  const std::string& name, const std::string& value) {
  for (auto& entry : environment) {
    if (entry.first == name) {
      entry.second = value;
      return;
    }
  }
  environment.emplace_back(name, value);
}

std::map<std::string, std::string> as_map(
    const std::vector<std::pair<std::string, std::string>>& environment) {
  return {environment.begin(), environment.end()};
}

std::string join(const std::vector<std::string>& parts, char separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i)
    out += (i ? std::string(1, separator) : "") + parts[i];
  return out;
}

}  // namespace

std::int64_t container_gpu_request(const json& container) {
  const json resources = container.value("resources", json::object());
  for (const char* kind : {"limits", "requests"}) {
    const json amounts = resources.value(kind, json::object());
    const auto it = amounts.find("nvidia.com/gpu");
    if (it == amounts.end()) continue;
    if (it->is_number_integer() && it->get<std::int64_t>() >= 0) return it->get<std::int64_t>();
    const std::string text = it->is_string() ? it->get<std::string>() : it->dump();
    std::int64_t value = -1;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 0) {
      throw std::invalid_argument("container " + string_at(container, "name") + ": " + kind +
                                  " nvidia.com/gpu \"" + text + "\" is not a whole number");
    }
    return value;
  }
  return 0;
}

std::string pod_field(const json& pod, const std::string& field_path, const PodAddresses& addresses,
                      bool allow_maps) {
  if (field_path == "metadata.name") return kube::object_name(pod);
  if (field_path == "metadata.namespace") return kube::object_namespace(pod);
  if (field_path == "metadata.uid") return kube::object_uid(pod);
  if (field_path == "spec.nodeName") return pod.value("spec", json::object()).value("nodeName", "");
  if (field_path == "spec.serviceAccountName") {
    return pod.value("spec", json::object()).value("serviceAccountName", "");
  }
  if (field_path == "status.hostIP") return addresses.host_ip;
  if (field_path == "status.podIP" || field_path == "status.podIPs") return addresses.pod_ip;
  if (const auto key = subscript(field_path, "metadata.labels")) {
    return kube::get_label(pod, *key).value_or("");
  }
  if (const auto key = subscript(field_path, "metadata.annotations")) {
    return kube::get_annotation(pod, *key).value_or("");
  }
  if (allow_maps && field_path == "metadata.labels") return format_map(kube::object_labels(pod));
  if (allow_maps && field_path == "metadata.annotations") {
    return format_map(kube::object_annotations(pod));
  }
  throw ContainerConfigError("unsupported fieldPath: " + field_path);
}

std::string expand_variables(const std::string& text,
                             const std::map<std::string, std::string>& variables) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char next = text[i + 1];
    if (next == '$') {
      out += '$';
      ++i;
    } else if (next == '(') {
      const std::size_t close = text.find(')', i + 2);
      if (close == std::string::npos) {
        out += text.substr(i);
        break;
      }
      const std::string name = text.substr(i + 2, close - i - 2);
      const auto it = variables.find(name);
      out += it != variables.end() ? it->second : "$(" + name + ")";
      i = close;
    } else {
      out += '$';
    }
  }
  return out;
}

std::string rewrite_mount_paths(const std::string& text, const std::vector<std::string>& paths,
                                const std::string& root) {
  const auto separator = [](char c) { return kPathSeparators.find(c) != std::string_view::npos; };
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '/' && (i == 0 || separator(text[i - 1]))) {
      for (const std::string& path : paths) {
        const std::size_t end = i + path.size();
        if (path.size() > 1 && text.compare(i, path.size(), path) == 0 &&
            (end == text.size() || text[end] == '/' || separator(text[end]))) {
          out += root;
          break;
        }
      }
    }
    out += text[i];
  }
  return out;
}

void prepare_volumes(const json& pod, const std::string& volumes_dir, const std::string& node_root,
                     const ObjectReader& reader, const TokenIssuer& issue_token,
                     const PodAddresses& addresses) {
  fs::remove_all(volumes_dir);
  fs::create_directories(volumes_dir);
  const json spec = pod.value("spec", json::object());
  for (const json& volume : array_at(spec, "volumes")) {
    const std::string name = string_at(volume, "name");
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      throw VolumeSetupError("volume name \"" + name + "\" is not a valid directory name");
    }
    prepare_volume(volume, fs::path(volumes_dir) / name, node_root, pod, reader, issue_token,
                   addresses);
  }
}

std::vector<std::pair<std::string, std::string>> container_environment(
    const json& container, const ContainerContext& context) {
  const json& pod = *context.pod;
  const std::string ns = kube::object_namespace(pod);
  std::vector<std::pair<std::string, std::string>> environment;
  for (const json& source : array_at(container, "envFrom")) {
    const std::string prefix = string_at(source, "prefix");
    std::optional<std::map<std::string, std::string>> data;
    if (const auto it = source.find("configMapRef"); it != source.end()) {
      data = read_data<ContainerConfigError>(context.reader, "ConfigMap", ns,
                                             string_at(*it, "name"), flag_at(*it, "optional"), "");
    } else if (const auto it = source.find("secretRef"); it != source.end()) {
      data = read_data<ContainerConfigError>(context.reader, "Secret", ns, string_at(*it, "name"),
                                             flag_at(*it, "optional"), "");
    }
    if (!data) continue;
    for (const auto& [key, value] : *data) {
      // The kubelet skips keys that are no valid variable names (and records an event).
      if (is_env_var_name(prefix + key)) set_variable(environment, prefix + key, value);
    }
  }
  for (const json& variable : array_at(container, "env")) {
    const std::string name = string_at(variable, "name");
    const auto value_from = variable.find("valueFrom");
    if (value_from == variable.end()) {
      set_variable(environment, name,
                   expand_variables(string_at(variable, "value"), as_map(environment)));
      continue;
    }
    if (const auto it = value_from->find("fieldRef"); it != value_from->end()) {
      set_variable(environment, name,
                   pod_field(pod, string_at(*it, "fieldPath"), context.addresses));
    } else if (const auto ref = key_reference(*value_from)) {
      const auto& [kind, it] = *ref;
      const std::string source = string_at(*it, "name");
      const auto data = read_data<ContainerConfigError>(context.reader, kind, ns, source,
                                                        flag_at(*it, "optional"), "");
      if (!data) continue;
      const std::string key = string_at(*it, "key");
      const auto entry = data->find(key);
      if (entry == data->end()) {
        if (flag_at(*it, "optional")) continue;
        throw ContainerConfigError("couldn't find key " + key + " in " + kind + " " + ns + "/" +
                                   source);
      }
      set_variable(environment, name, entry->second);
    } else {
      throw ContainerConfigError(
          "env " + name + ": valueFrom " +
          (value_from->empty() ? std::string("{}") : value_from->begin().key()) +
          " is not supported by the process kubelet");
    }
  }
  return environment;
}

std::string termination_message_file(const json& container, const std::string& pod_dir) {
  const std::string path = string_at(container, "terminationMessagePath");
  if (path.empty()) return "";
  if (path[0] != '/' || path.find("/../") != std::string::npos || path.ends_with("/..")) {
    throw ContainerConfigError("terminationMessagePath \"" + path +
                               "\" must be an absolute path without ..");
  }
  return (fs::path(pod_dir) / "root" / string_at(container, "name")).string() + path;
}

std::string read_termination_message(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::string message(kMaxTerminationMessageBytes, '\0');
  in.read(message.data(), static_cast<std::streamsize>(message.size()));
  message.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return message;
}

ProcessSpec prepare_container(const json& container, const ContainerContext& context) {
  const std::string name = string_at(container, "name");
  const fs::path pod_dir(context.pod_dir);
  const fs::path root = pod_dir / "root" / name;
  fs::remove_all(root);
  fs::create_directories(root);
  link_mounts(container, root, pod_dir / "volumes");
  std::vector<std::string> mounts = mount_paths(container);
  if (const std::string file = termination_message_file(container, context.pod_dir);
      !file.empty()) {
    fs::create_directories(fs::path(file).parent_path());
    std::ofstream(file, std::ios::trunc).close();
    mounts.push_back(string_at(container, "terminationMessagePath"));
  }
  const auto rewrite = [&](const std::string& text) {
    return rewrite_mount_paths(text, mounts, root.string());
  };

  std::vector<std::pair<std::string, std::string>> pod_environment =
      container_environment(container, context);
  for (auto& entry : pod_environment) entry.second = rewrite(entry.second);
  const std::map<std::string, std::string> variables = as_map(pod_environment);

  std::vector<std::string> command_line;
  for (const json& word : array_at(container, "command")) {
    command_line.push_back(rewrite(expand_variables(word.get<std::string>(), variables)));
  }
  if (command_line.empty()) {
    command_line.push_back(entrypoint_of(string_at(container, "image"), context.image_entrypoints));
  }
  for (const json& word : array_at(container, "args")) {
    command_line.push_back(rewrite(expand_variables(word.get<std::string>(), variables)));
  }

  std::vector<std::pair<std::string, std::string>> environment = context.base_environment;
  set_variable(environment, "HOSTNAME", kube::object_name(*context.pod));
  for (const auto& [key, value] : pod_environment) set_variable(environment, key, value);
  set_variable(environment, "TESSEL_MOUNT_ROOT", root.string());
  if (!context.gpu_devices.empty()) {
    set_variable(environment, "NVIDIA_VISIBLE_DEVICES", join(context.gpu_devices, ','));
    set_variable(environment, "CUDA_VISIBLE_DEVICES", join(context.gpu_devices, ','));
  }

  ProcessSpec spec;
  spec.working_directory = pod_dir.string();
  if (const std::string working_dir = string_at(container, "workingDir"); !working_dir.empty()) {
    // A workingDir is in the container's file system: under its root.
    spec.working_directory =
        (working_dir[0] == '/' ? root / working_dir.substr(1) : pod_dir / working_dir).string();
    fs::create_directories(spec.working_directory);
  }
  const auto path = std::find_if(environment.begin(), environment.end(),
                                 [](const auto& entry) { return entry.first == "PATH"; });
  spec.executable = find_executable(command_line[0], path != environment.end() ? path->second : "");
  spec.arguments = command_line;
  for (const auto& [key, value] : environment) spec.environment.push_back(key + "=" + value);
  spec.log_path = (pod_dir / (name + ".log")).string();
  return spec;
}

}  // namespace tessel::testing
