#include "tests/support/api_scale.h"

#include "tests/support/api_errors.h"
#include "tests/support/api_patch.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

// metav1.FormatLabelSelector of matchLabels (the only form the charts' selectors take), as
// status.selector shows it.
std::string selector_text(const json& selector) {
  std::string out;
  const json labels =
      selector.is_object() ? selector.value("matchLabels", json::object()) : json::object();
  for (const auto& [key, value] : labels.items()) {
    out +=
        (out.empty() ? "" : ",") + key + "=" + (value.is_string() ? value.get<std::string>() : "");
  }
  return out;
}

json scale_of(const json& object) {
  const json metadata = object.value("metadata", json::object());
  const json spec = object.value("spec", json::object());
  const json status = object.value("status", json::object());
  return {{"kind", "Scale"},
          {"apiVersion", "autoscaling/v1"},
          {"metadata",
           {{"name", metadata.value("name", "")},
            {"namespace", metadata.value("namespace", "")},
            {"uid", metadata.value("uid", "")},
            {"resourceVersion", metadata.value("resourceVersion", "")},
            {"creationTimestamp", metadata.value("creationTimestamp", json())}}},
          {"spec", {{"replicas", spec.value("replicas", 0)}}},
          {"status",
           {{"replicas", status.value("replicas", 0)},
            {"selector", selector_text(spec.value("selector", json()))}}}};
}

json parse(const std::string& body) {
  json parsed = json::parse(body, nullptr, false);
  if (parsed.is_discarded()) throw bad_request("the request body is not valid JSON");
  return parsed;
}

}  // namespace

VerbResult serve_scale(ApiVerbs& verbs, const ObjectRef& ref, const std::string& method,
                       const std::string& media_type, const std::string& body,
                       const WriteOptions& options) {
  const ObjectRef main{ref.type, ref.namespace_, ref.name, ""};
  const json current = verbs.get(main);
  if (method == "GET") return {200, scale_of(current), {}};
  json scale;
  if (method == "PUT") {
    scale = parse(body);
  } else if (method == "PATCH") {
    const json patch = parse(body);
    if (media_type == "application/json-patch+json") {
      scale = json_patch(scale_of(current), patch);
    } else if (media_type == "application/merge-patch+json" ||
               media_type == "application/strategic-merge-patch+json") {
      scale = merge_patch(scale_of(current), patch);
    } else {
      throw unsupported_media_type({"application/json-patch+json", "application/merge-patch+json",
                                    "application/strategic-merge-patch+json"});
    }
  } else {
    throw method_not_allowed();
  }
  const json replicas = scale.value("spec", json::object()).value("replicas", json());
  if (!replicas.is_number_integer() || replicas.get<std::int64_t>() < 0) {
    throw invalid("Scale", "autoscaling", ref.name,
                  {{"FieldValueInvalid", "spec.replicas",
                    "Invalid value: " + replicas.dump() + ": must be greater than or equal to 0"}});
  }
  json change = {{"spec", {{"replicas", replicas}}}};
  const std::string version = scale.value("metadata", json::object()).value("resourceVersion", "");
  if (!version.empty()) change["metadata"] = {{"resourceVersion", version}};
  const VerbResult result =
      verbs.patch(main, "application/merge-patch+json", change.dump(), options, false);
  return {200, scale_of(result.body), result.warnings};
}

}  // namespace tessel::testing
