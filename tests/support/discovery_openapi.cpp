// OpenAPI v3 documents: the index, a CRD group-version's generated document, and the minimal
// document of a built-in group-version.
#include <openssl/sha.h>

#include <cctype>
#include <cstdio>
#include <map>
#include <set>

#include "tests/support/discovery.h"
#include "tests/support/discovery_openapi_text.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

const std::string kIndexPath = "/openapi/v3";
const std::string kMetaRef = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.";

struct GroupVersion {
  std::string group;
  std::string version;
  std::string key() const {
    return group.empty() ? "api/" + version : "apis/" + group + "/" + version;
  }
  std::string prefix() const { return "/" + key(); }
  bool operator<(const GroupVersion& o) const {
    return std::tie(group, version) < std::tie(o.group, o.version);
  }
};

// kube-apiserver's hash of a document: SHA-512 of its JSON, upper-case hex.
std::string document_hash(const json& document) {
  const std::string text = document.dump();
  unsigned char digest[SHA512_DIGEST_LENGTH];
  SHA512(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  std::string out;
  char hex[3];
  for (unsigned char byte : digest) {
    std::snprintf(hex, sizeof hex, "%02X", byte);
    out += hex;
  }
  return out;
}

const json* find_crd(const std::vector<json>& crds, const ApiResource& info) {
  for (const auto& crd : crds) {
    const json spec = crd.value("spec", json::object());
    if (spec.value("group", "") == info.group &&
        spec.value("names", json::object()).value("plural", "") == info.resource) {
      return &crd;
    }
  }
  return nullptr;
}

const json* find_crd_version(const json& crd, const std::string& version) {
  const json& spec = crd.at("spec");
  if (!spec.contains("versions") || !spec["versions"].is_array()) return nullptr;
  for (const auto& v : spec["versions"]) {
    if (v.is_object() && v.value("name", "") == version) return &v;
  }
  return nullptr;
}

// "tessel.dev" -> "tesselDev" (for tags) and "TesselDev" (for operation ids).
std::string rest_friendly(const std::string& name, bool upper_first) {
  std::string out;
  bool upper = upper_first;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

// "tessel.dev" -> "dev.tessel", the prefix of a CRD's schema names.
std::string reversed_group(const std::string& group) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto dot = group.find('.', start);
    parts.push_back(group.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  std::string out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) out += (out.empty() ? "" : ".") + *it;
  return out;
}

json gvk(const std::string& group, const std::string& version, const std::string& kind) {
  return {{"group", group}, {"version", version}, {"kind", kind}};
}

json media(const std::string& ref) {
  const json schema = {{"$ref", ref}};
  return {{"application/json", {{"schema", schema}}}, {"application/yaml", {{"schema", schema}}}};
}

json parameters(std::initializer_list<const char*> names) {
  json out = json::array();
  for (const char* name : names) out.push_back(openapi_parameters().at(name));
  return out;
}

const std::initializer_list<const char*> kListParameters = {
    "allowWatchBookmarks",  "continue",       "fieldSelector",
    "labelSelector",        "limit",          "resourceVersion",
    "resourceVersionMatch", "timeoutSeconds", "watch"};
const std::initializer_list<const char*> kWriteParameters = {"dryRun", "fieldManager",
                                                             "fieldValidation"};

// Everything about one custom resource that its operations are made of.
struct CustomResource {
  std::string group, version, kind, plural;
  bool namespaced = true;
  bool status = false;

  std::string object_ref() const { return "#/components/schemas/" + schema_name(kind); }
  std::string schema_name(const std::string& k) const {
    return reversed_group(group) + "." + version + "." + k;
  }
  // "readTesselDevV1alpha1NamespacedTrainingJobStatus"; infix goes before the scope.
  std::string id(const std::string& verb, const std::string& suffix = "",
                 const std::string& infix = "") const {
    return verb + rest_friendly(group, true) + rest_friendly(version, true) + infix +
           (namespaced ? "Namespaced" : "") + kind + suffix;
  }
  json operation(const std::string& action, const std::string& operation_id,
                 const std::string& description, json params) const {
    return {{"tags", {rest_friendly(group, false) + "_" + version}},
            {"description", description},
            {"operationId", operation_id},
            {"parameters", std::move(params)},
            {"x-kubernetes-action", action},
            {"x-kubernetes-group-version-kind", gvk(group, version, kind)}};
  }
  json name_parameter() const {
    json p = openapi_parameters().at("namespace");
    p["name"] = "name";
    p["description"] = "name of the " + kind;
    return p;
  }
  json scope_parameters(bool with_name) const {
    json out = json::array();
    if (with_name) out.push_back(name_parameter());
    if (namespaced) out.push_back(openapi_parameters().at("namespace"));
    out.push_back(openapi_parameters().at("pretty"));
    return out;
  }
};

json responses(std::initializer_list<std::pair<const char*, const char*>> codes,
               const std::string& ref) {
  json out = json::object();
  for (const auto& [code, description] : codes) {
    out[code] = {{"description", description}, {"content", media(ref)}};
  }
  out["401"] = {{"description", "Unauthorized"}};
  return out;
}

void add_custom_resource_paths(json& paths, const CustomResource& r) {
  const std::string base = "/apis/" + r.group + "/" + r.version +
                           (r.namespaced ? "/namespaces/{namespace}/" : "/") + r.plural;
  const std::string list_ref = "#/components/schemas/" + r.schema_name(r.kind + "List");
  const std::string status_ref = kMetaRef + "Status";
  const json patch_body = {
      {"content",
       {{"application/apply-patch+yaml", {{"schema", {{"$ref", kMetaRef + "Patch"}}}}},
        {"application/json-patch+json", {{"schema", {{"$ref", kMetaRef + "Patch"}}}}},
        {"application/merge-patch+json", {{"schema", {{"$ref", kMetaRef + "Patch"}}}}}}}};

  json collection = json::object();
  collection["get"] = r.operation("list", r.id("list"), "list objects of kind " + r.kind,
                                  parameters(kListParameters));
  collection["get"]["responses"] = responses({{"200", "OK"}}, list_ref);
  collection["post"] =
      r.operation("post", r.id("create"), "create a " + r.kind, parameters(kWriteParameters));
  collection["post"]["requestBody"] = {{"content", media(r.object_ref())}};
  collection["post"]["responses"] =
      responses({{"200", "OK"}, {"201", "Created"}, {"202", "Accepted"}}, r.object_ref());
  collection["delete"] = r.operation("deletecollection", r.id("delete", "", "Collection"),
                                     "delete collection of " + r.kind, parameters(kListParameters));
  collection["delete"]["responses"] = responses({{"200", "OK"}}, status_ref);
  collection["parameters"] = r.scope_parameters(false);
  paths[base] = collection;

  json item = json::object();
  item["get"] = r.operation("get", r.id("read"), "read the specified " + r.kind,
                            parameters({"resourceVersion"}));
  item["get"]["responses"] = responses({{"200", "OK"}}, r.object_ref());
  item["put"] = r.operation("put", r.id("replace"), "replace the specified " + r.kind,
                            parameters(kWriteParameters));
  item["put"]["requestBody"] = {{"content", media(r.object_ref())}};
  item["put"]["responses"] = responses({{"200", "OK"}, {"201", "Created"}}, r.object_ref());
  item["delete"] = r.operation(
      "delete", r.id("delete"), "delete a " + r.kind,
      parameters({"dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy"}));
  item["delete"]["requestBody"] = {{"content", media(kMetaRef + "DeleteOptions")}};
  item["delete"]["responses"] = responses({{"200", "OK"}, {"202", "Accepted"}}, status_ref);
  item["patch"] = r.operation("patch", r.id("patch"), "partially update the specified " + r.kind,
                              parameters(kWriteParameters));
  item["patch"]["requestBody"] = patch_body;
  item["patch"]["responses"] = responses({{"200", "OK"}}, r.object_ref());
  item["parameters"] = r.scope_parameters(true);
  paths[base + "/{name}"] = item;

  if (r.status) {
    json status = json::object();
    status["get"] =
        r.operation("get", r.id("read", "Status"), "read status of the specified " + r.kind,
                    parameters({"resourceVersion"}));
    status["get"]["responses"] = responses({{"200", "OK"}}, r.object_ref());
    status["put"] =
        r.operation("put", r.id("replace", "Status"), "replace status of the specified " + r.kind,
                    parameters(kWriteParameters));
    status["put"]["requestBody"] = {{"content", media(r.object_ref())}};
    status["put"]["responses"] = responses({{"200", "OK"}, {"201", "Created"}}, r.object_ref());
    status["patch"] = r.operation("patch", r.id("patch", "Status"),
                                  "partially update status of the specified " + r.kind,
                                  parameters(kWriteParameters));
    status["patch"]["requestBody"] = patch_body;
    status["patch"]["responses"] = responses({{"200", "OK"}}, r.object_ref());
    status["parameters"] = r.scope_parameters(true);
    paths[base + "/{name}/status"] = status;
  }

  if (r.namespaced) {
    json all = json::object();
    all["get"] = r.operation("list",
                             "list" + rest_friendly(r.group, true) +
                                 rest_friendly(r.version, true) + r.kind + "ForAllNamespaces",
                             "list objects of kind " + r.kind, json::array());
    all["get"].erase("parameters");  // they are all the path's
    all["get"]["responses"] = responses({{"200", "OK"}}, list_ref);
    json params = parameters(kListParameters);
    params.insert(params.begin() + 5, openapi_parameters().at("pretty"));
    all["parameters"] = params;
    paths["/apis/" + r.group + "/" + r.version + "/" + r.plural] = all;
  }
}

json field(const char* description_key, const char* type) {
  return {{"description", openapi_field_descriptions().at(description_key)}, {"type", type}};
}

void add_custom_resource_schemas(json& schemas, const CustomResource& r, const json& crd_version) {
  json schema =
      crd_version.value("schema", json::object()).value("openAPIV3Schema", json::object());
  schema["properties"]["apiVersion"] = field("apiVersion", "string");
  schema["properties"]["kind"] = field("kind", "string");
  schema["properties"]["metadata"] = {
      {"description", openapi_field_descriptions().at("objectMetadata")},
      {"allOf", {{{"$ref", kMetaRef + "ObjectMeta"}}}}};
  schema["x-kubernetes-group-version-kind"] = {
      {{"group", r.group}, {"kind", r.kind}, {"version", r.version}}};
  schemas[r.schema_name(r.kind)] = schema;

  const std::string list_kind = r.kind + "List";
  schemas[r.schema_name(list_kind)] = {
      {"description", list_kind + " is a list of " + r.kind},
      {"required", {"items"}},
      {"properties",
       {{"apiVersion", field("apiVersion", "string")},
        {"items",
         {{"description", "List of " + r.plural +
                              ". More info: "
                              "https://git.k8s.io/community/contributors/devel/"
                              "sig-architecture/api-conventions.md"},
          {"type", "array"},
          {"items", {{"$ref", r.object_ref()}}}}},
        {"kind", field("kind", "string")},
        {"metadata",
         {{"description", openapi_field_descriptions().at("listMetadata")},
          {"allOf", {{{"$ref", kMetaRef + "ListMeta"}}}}}}}},
      {"x-kubernetes-group-version-kind",
       {{{"group", r.group}, {"kind", list_kind}, {"version", r.version}}}}};
}

json custom_resource_document(const std::vector<std::pair<const ApiResource*, const json*>>& crs) {
  json paths = json::object();
  json schemas = openapi_meta_schemas();
  for (const auto& [info, crd] : crs) {
    const json* version = find_crd_version(*crd, info->version);
    if (version == nullptr) continue;
    CustomResource r{
        info->group,      info->version,
        info->kind,       info->resource,
        info->namespaced, version->value("subresources", json::object()).contains("status")};
    add_custom_resource_paths(paths, r);
    add_custom_resource_schemas(schemas, r, *version);
  }
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes CRD Swagger"}, {"version", "v0.1.0"}}},
          {"paths", paths},
          {"components", {{"schemas", schemas}}}};
}

// What kubectl's apply needs to leave validation to the server: the PATCH operation of each
// kind, tagged with its group-version-kind and offering fieldValidation.
json minimal_document(const GroupVersion& gv, const std::vector<const ApiResource*>& infos) {
  json paths = json::object();
  for (const auto* info : infos) {
    const std::string path = gv.prefix() + (info->namespaced ? "/namespaces/{namespace}/" : "/") +
                             info->resource + "/{name}";
    paths[path]["patch"] = {
        {"x-kubernetes-action", "patch"},
        {"x-kubernetes-group-version-kind", gvk(gv.group, gv.version, info->kind)},
        {"parameters", parameters({"fieldValidation"})},
        {"responses", {{"200", {{"description", "OK"}}}}}};
  }
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes"}, {"version", "unversioned"}}},
          {"paths", paths}};
}

json group_version_document(const std::vector<ApiResource>& served, const std::vector<json>& crds,
                            const GroupVersion& gv) {
  std::vector<const ApiResource*> infos;
  std::vector<std::pair<const ApiResource*, const json*>> custom;
  for (const auto& info : served) {
    if (info.group != gv.group || info.version != gv.version) continue;
    infos.push_back(&info);
    if (const json* crd = find_crd(crds, info); crd != nullptr) custom.emplace_back(&info, crd);
  }
  if (infos.empty()) return nullptr;
  return custom.empty() ? minimal_document(gv, infos) : custom_resource_document(custom);
}

std::set<GroupVersion> served_group_versions(const std::vector<ApiResource>& served) {
  std::set<GroupVersion> out;
  for (const auto& info : served) out.insert({info.group, info.version});
  return out;
}

}  // namespace

json openapi_document(const std::vector<ApiResource>& served, const std::vector<json>& crds,
                      const std::string& path) {
  if (path == kIndexPath) {
    json index = json::object();
    for (const auto& gv : served_group_versions(served)) {
      const json document = group_version_document(served, crds, gv);
      index[gv.key()] = {
          {"serverRelativeURL", kIndexPath + "/" + gv.key() + "?hash=" + document_hash(document)}};
    }
    return {{"paths", index}};
  }
  if (!path.starts_with(kIndexPath + "/")) return nullptr;
  const std::string key = path.substr(kIndexPath.size() + 1);
  for (const auto& gv : served_group_versions(served)) {
    if (gv.key() == key) return group_version_document(served, crds, gv);
  }
  return nullptr;
}

}  // namespace tessel::testing
