#include "tests/support/api_object_rules.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "tests/support/api_errors.h"
#include "tests/support/api_object_meta.h"
#include "tests/support/builtin_semantics.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

std::mt19937_64& random_engine() {
  thread_local std::mt19937_64 engine(std::random_device{}());
  return engine;
}

json without_managed_field_times(json object) {
  if (!object.is_object() || !object.contains("metadata")) return object;
  json& metadata = object["metadata"];
  if (metadata.is_object() && metadata.contains("managedFields") &&
      metadata["managedFields"].is_array()) {
    for (json& entry : metadata["managedFields"]) {
      if (entry.is_object()) entry.erase("time");
    }
  }
  return object;
}

}  // namespace

std::string now_rfc3339() { return rfc3339(std::chrono::system_clock::now()); }

std::string new_uid() {
  std::uniform_int_distribution<unsigned> byte(0, 255);
  unsigned char bytes[16];
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(byte(random_engine()));
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0F) | 0x40);
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3F) | 0x80);
  char text[37];
  std::snprintf(text, sizeof text,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", bytes[0],
                bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]);
  return text;
}

std::string generated_name(const std::string& generate_name) {
  // The alphabet of k8s.io/apimachinery/pkg/util/rand: no vowels, no confusable characters.
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::uniform_int_distribution<std::size_t> pick(0, sizeof kAlphabet - 2);
  std::string name = generate_name;
  for (int i = 0; i < 5; ++i) name += kAlphabet[pick(random_engine())];
  return name;
}

std::string meta_string(const json& object, const std::string& field) {
  if (!object.is_object()) return "";
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  const auto found = metadata->find(field);
  return found != metadata->end() && found->is_string() ? found->get<std::string>() : "";
}

json in_version(json object, const ResourceType& type) {
  if (type.custom && object.is_object()) object["apiVersion"] = type.api_version();
  return object;
}

void check_decodable(const ResourceType& type, json& body) {
  const std::string kind = type.kind();
  if (!body.is_object()) {
    throw bad_request(kind + " in version \"" + type.info.version + "\" cannot be handled as a " +
                      kind + ": the body is not a JSON object");
  }
  for (const char* field : {"apiVersion", "kind"}) {
    if (body.contains(field) && !body[field].is_string()) {
      throw bad_request(kind + " in version \"" + type.info.version + "\" cannot be handled as a " +
                        kind + ": " + field + " must be a string");
    }
  }
  if (type.custom) {
    if (!body.contains("kind") || body["kind"].get<std::string>().empty()) {
      throw bad_request("Object 'Kind' is missing in '" + body.dump() + "'");
    }
    if (!body.contains("apiVersion") || body["apiVersion"].get<std::string>().empty()) {
      throw bad_request("Object 'apiVersion' is missing in '" + body.dump() + "'");
    }
  } else {
    if (!body.contains("apiVersion")) body["apiVersion"] = type.api_version();
    if (!body.contains("kind")) body["kind"] = kind;
  }
  const std::string api_version = body["apiVersion"].get<std::string>();
  if (api_version != type.api_version()) {
    throw bad_request("the API version in the data (" + api_version +
                      ") does not match the expected API version (" + type.api_version() + ")");
  }
  const std::string body_kind = body["kind"].get<std::string>();
  if (body_kind != kind) {
    throw bad_request(body_kind + " in version \"" + type.info.version +
                      "\" cannot be handled as a " + kind +
                      ": the kind does not match the "
                      "resource " +
                      type.resource());
  }
  if (body.contains("metadata") && !body["metadata"].is_object()) {
    throw bad_request(kind + " in version \"" + type.info.version + "\" cannot be handled as a " +
                      kind + ": metadata must be an object");
  }
  if (!type.custom) {
    if (const auto message = decode_error(type.info, body)) throw bad_request(*message);
  }
}

void decode_defaults(const ResourceType& type, json& object, const std::string& field_validation,
                     std::vector<std::string>& warnings) {
  if (!type.custom) {
    apply_decode_defaults(type.info, object);
    return;
  }
  if (!type.schema) return;
  const std::vector<std::string> unknown = type.schema->prune(object);
  if (!unknown.empty()) {
    if (field_validation == "Strict") {
      std::string list;
      for (const std::string& field : unknown) {
        list += (list.empty() ? "" : ", ") + std::string("unknown field \"") + field + "\"";
      }
      throw bad_request(type.kind() + " in version \"" + type.info.version +
                        "\" cannot be handled as a " + type.kind() +
                        ": strict decoding error: " + list);
    }
    if (field_validation != "Ignore") {
      for (const std::string& field : unknown)
        warnings.push_back("unknown field \"" + field + "\"");
    }
  }
  type.schema->apply_defaults(object);
}

void validate(const ResourceType& type, const json& object, const json& old_object) {
  std::vector<FieldError> errors;
  if (type.custom) {
    if (old_object.is_null()) {
      errors = validate_object_metadata(type.info, object);
    } else {
      // kube-apiserver checks a custom resource's metadata twice on update (generic and
      // strategy validation), so each problem is reported twice.
      errors = validate_object_metadata_update(old_object, object);
      const std::vector<FieldError> again = validate_object_metadata_update(old_object, object);
      errors.insert(errors.end(), again.begin(), again.end());
    }
    if (type.schema) {
      const std::vector<FieldError> schema_errors = type.schema->validate(object);
      errors.insert(errors.end(), schema_errors.begin(), schema_errors.end());
    }
  } else if (old_object.is_null()) {
    errors = validate_builtin_create(type.info, object);
  } else {
    errors = validate_builtin_update(type.info, old_object, object);
  }
  if (!errors.empty()) {
    throw invalid(type.kind(), type.group(), meta_string(object, "name"), errors);
  }
}

void keep_system_fields(const json& old_object, json& object) {
  const json& old_metadata = old_object["metadata"];
  json& metadata = object["metadata"];
  if (meta_string(object, "uid").empty()) metadata["uid"] = old_metadata.value("uid", "");
  for (const char* field : {"creationTimestamp", "deletionTimestamp", "generation"}) {
    if (old_metadata.contains(field)) {
      metadata[field] = old_metadata[field];
    } else {
      metadata.erase(field);
    }
  }
  if (old_metadata.contains("deletionGracePeriodSeconds") &&
      !metadata.contains("deletionGracePeriodSeconds")) {
    metadata["deletionGracePeriodSeconds"] = old_metadata["deletionGracePeriodSeconds"];
  }
  if (!old_metadata.contains("deletionTimestamp")) metadata.erase("deletionGracePeriodSeconds");
}

void bump_generation(const ResourceType& type, const json& old_object, json& object) {
  if (!type.has_generation()) return;
  bool changed;
  if (type.custom) {
    json old_content = old_object;
    json new_content = object;
    for (json* content : {&old_content, &new_content}) {
      content->erase("metadata");
      if (type.has_subresource("status")) content->erase("status");
    }
    changed = old_content != new_content;
  } else {
    changed = old_object.value("spec", json()) != object.value("spec", json());
  }
  if (changed) {
    object["metadata"]["generation"] = old_object["metadata"].value("generation", 0) + 1;
  }
}

bool same_but_timestamps(const json& a, const json& b) {
  return without_managed_field_times(a) == without_managed_field_times(b);
}

bool should_delete_during_update(const json& old_object, const json& object) {
  if (!finalizers_of(object).empty() || !is_terminating(object)) return false;
  const json& old_metadata = old_object["metadata"];
  return !old_metadata.contains("deletionGracePeriodSeconds") ||
         old_metadata["deletionGracePeriodSeconds"] == 0;
}

}  // namespace tessel::testing
