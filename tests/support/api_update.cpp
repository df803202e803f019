// update, patch and the shared update pipeline (declared in api_verbs.h).
#include "tests/support/api_errors.h"
#include "tests/support/api_object_rules.h"
#include "tests/support/api_patch.h"
#include "tests/support/api_verbs.h"
#include "tests/support/api_yaml.h"
#include "tests/support/managed_fields.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

const std::vector<std::string> kCustomPatchTypes = {
    "application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"};
const std::vector<std::string> kBuiltinPatchTypes = {
    "application/json-patch+json", "application/merge-patch+json",
    "application/strategic-merge-patch+json", "application/apply-patch+yaml"};

// The body of an apply patch: YAML, of which JSON is a subset.
json parse_apply_body(const std::string& body) {
  try {
    return parse_yaml(body);
  } catch (const std::invalid_argument& error) {
    throw bad_request(std::string("error decoding YAML: ") + error.what());
  }
}

json parse_json_body(const std::string& body) {
  const json parsed = json::parse(body, nullptr, false);
  if (parsed.is_discarded()) {
    throw bad_request("error decoding patch: invalid character in the request body (not JSON)");
  }
  return parsed;
}

}  // namespace

VerbResult ApiVerbs::update(const ObjectRef& ref, json body, const WriteOptions& options) {
  const ResourceType& type = *ref.type;
  check_decodable(type, body);
  const std::string name = meta_string(body, "name");
  if (name.empty()) throw bad_request("name must be provided");
  if (name != ref.name) {
    throw bad_request("the name of the object (" + name + ") does not match the name on the URL (" +
                      ref.name + ")");
  }
  UpdateRules rules;
  rules.require_resource_version = !type.allow_unconditional_update();
  rules.create_if_missing = type.allow_create_on_update() && ref.subresource.empty();
  rules.create_body = body;
  return commit_update(
      ref, [&](const json&) { return body; }, rules, options);
}

VerbResult ApiVerbs::patch(const ObjectRef& ref, const std::string& media_type,
                           const std::string& body, const WriteOptions& options, bool force) {
  const ResourceType& type = *ref.type;
  const std::vector<std::string>& accepted = type.custom ? kCustomPatchTypes : kBuiltinPatchTypes;
  if (std::find(accepted.begin(), accepted.end(), media_type) == accepted.end()) {
    throw unsupported_media_type(accepted);
  }
  if (media_type == "application/apply-patch+yaml") return apply_patch(ref, body, options, force);
  const json patch_document = parse_json_body(body);
  Propose propose;
  if (media_type == "application/merge-patch+json") {
    if (!patch_document.is_object()) throw bad_request("a merge patch must be a JSON object");
    propose = [&](const json& current) { return merge_patch(current, patch_document); };
  } else if (media_type == "application/json-patch+json") {
    propose = [&](const json& current) {
      try {
        return json_patch(current, patch_document);
      } catch (const PatchFormatError& error) {
        throw bad_request(error.what());
      } catch (const PatchApplyError&) {
        // kube-apiserver wraps the json-patch library's error in a generic 422.
        throw ApiError(422, failure_status(422, "Invalid",
                                           "the server rejected our request due to an error in "
                                           "our request",
                                           json::object()));
      }
    };
  } else {
    propose = [&](const json& current) {
      try {
        return strategic_merge_patch(type.kind(), current, patch_document);
      } catch (const PatchFormatError& error) {
        throw bad_request(error.what());
      }
    };
  }
  return commit_update(ref, propose, UpdateRules{}, options);
}

VerbResult ApiVerbs::apply_patch(const ObjectRef& ref, const std::string& body,
                                 const WriteOptions& options, bool force) {
  const ResourceType& type = *ref.type;
  if (options.manager.empty()) throw ApiError(422, missing_field_manager_status());
  json applied = parse_apply_body(body);
  check_decodable(type, applied);
  const std::string name = meta_string(applied, "name");
  if (!name.empty() && name != ref.name) {
    throw bad_request("the name of the object (" + name + ") does not match the name on the URL (" +
                      ref.name + ")");
  }
  const MergeTypes types = type.merge_types();
  auto apply_to = [&](const json& live) {
    try {
      ApplyResult result =
          server_side_apply(live, applied, options.manager, force, ref.subresource, types);
      if (!result.conflicts.empty()) throw ApiError(409, result.conflict_status);
      return result.object;
    } catch (const std::invalid_argument& error) {
      throw bad_request(error.what());
    }
  };
  UpdateRules rules;
  rules.managed_by_apply = true;
  rules.create_if_missing = ref.subresource.empty();
  if (rules.create_if_missing) rules.create_body = apply_to(nullptr);
  return commit_update(ref, apply_to, rules, options);
}

std::optional<json> ApiVerbs::mutate(const ObjectRef& ref, const std::function<bool(json&)>& change,
                                     const std::string& manager) {
  bool changed = false;
  try {
    const VerbResult result = commit_update(ref,
                                            [&](const json& current) {
                                              json proposed = current;
                                              changed = change(proposed);
                                              return proposed;
                                            },
                                            UpdateRules{}, {false, manager, "Ignore"});
    if (!changed) return store_.get(ref.type->collection(), ref.namespace_, ref.name);
    return result.body;
  } catch (const ApiError& error) {
    if (error.http_status() == 404) return std::nullopt;
    throw;
  }
}

VerbResult ApiVerbs::commit_update(const ObjectRef& ref, const Propose& propose,
                                   const UpdateRules& rules, const WriteOptions& options) {
  const ResourceType& type = *ref.type;
  while (true) {
    const std::optional<json> current = store_.get(type.collection(), ref.namespace_, ref.name);
    if (!current) {
      // A PUT that names a resourceVersion updates an object that must exist.
      if (!rules.create_if_missing || !meta_string(rules.create_body, "resourceVersion").empty()) {
        throw not_found(type.group_resource(), ref.name);
      }
      try {
        return commit_create(ref, rules.create_body, options, rules.managed_by_apply);
      } catch (const ApiError& error) {
        if (error.http_status() == 409 && error.body().value("reason", "") == "AlreadyExists") {
          continue;  // created meanwhile: update it
        }
        throw;
      }
    }
    std::vector<std::string> warnings;
    json object = prepare_update(ref, *current, propose(in_version(*current, type)), rules, options,
                                 warnings);
    const std::string current_version = meta_string(*current, "resourceVersion");
    if (same_but_timestamps(object, *current)) {
      return {200, in_version(*current, type), warnings};  // no-op: no new resourceVersion
    }
    if (options.dry_run) return {200, in_version(object, type), warnings};
    if (should_delete_during_update(*current, object)) {
      const ObjectStore::WriteResult removed =
          store_.remove(type.collection(), ref.namespace_, ref.name, current_version);
      if (removed.outcome != ObjectStore::Outcome::kOk) continue;
      after_removed(type, removed.object);
      return {200, in_version(object, type), warnings};  // the final state, old version
    }
    const ObjectStore::WriteResult written =
        store_.update(type.collection(), object, current_version);
    if (written.outcome != ObjectStore::Outcome::kOk) continue;  // raced: read again
    after_updated(type, written.object);
    return {200, in_version(written.object, type), warnings};
  }
}

json ApiVerbs::prepare_update(const ObjectRef& ref, const json& current, json proposed,
                              const UpdateRules& rules, const WriteOptions& options,
                              std::vector<std::string>& warnings) {
  const ResourceType& type = *ref.type;
  check_decodable(type, proposed);
  json& proposed_metadata = proposed["metadata"];
  if (!proposed_metadata.is_object()) proposed_metadata = json::object();
  if (meta_string(proposed, "name") != ref.name) {
    throw bad_request("the name of the object (" + meta_string(proposed, "name") +
                      ") does not match the name on the URL (" + ref.name + ")");
  }
  if (type.namespaced()) {
    const std::string given = meta_string(proposed, "namespace");
    if (!given.empty() && given != ref.namespace_) {
      throw bad_request(
          "the namespace of the provided object does not match the namespace sent "
          "on the request");
    }
    proposed_metadata["namespace"] = ref.namespace_;
  } else {
    proposed_metadata.erase("namespace");
  }
  const std::string proposed_version = meta_string(proposed, "resourceVersion");
  if (proposed_version.empty() && rules.require_resource_version) {
    throw invalid(type.resource(), type.group(), ref.name,
                  {{"FieldValueInvalid", "metadata.resourceVersion",
                    "Invalid value: 0x0: must be specified for an update"}});
  }
  if (!proposed_version.empty() && proposed_version != meta_string(current, "resourceVersion")) {
    throw conflict(type.group_resource(), ref.name);
  }
  // Decoding defaults, then the field manager sees the object as the request made it (ignored
  // fields included: the real server records them under a status manager too).
  decode_defaults(type, proposed, options.field_validation, warnings);
  if (!rules.managed_by_apply) {
    record_update(proposed, current, options.manager, ref.subresource, type.merge_types());
  }
  const std::optional<AdmissionRequest> admission =
      options.user ? std::optional(write_admission(ref, ref.name, "UPDATE", options))
                   : std::nullopt;
  if (admission) {
    const json before = proposed;
    admission_.mutate(*admission, proposed, current, warnings);
    if (proposed != before) redecode(type, proposed);
  }
  json object;
  if (ref.subresource.empty()) {
    object = proposed;
    if (type.has_subresource("status")) {
      if (current.contains("status")) {
        object["status"] = current["status"];
      } else {
        object.erase("status");
      }
    }
    keep_system_fields(current, object);
  } else {
    // A subresource write stores only its part; everything else stays as stored.
    object = current;
    if (ref.subresource == "finalize") {
      object["spec"]["finalizers"] =
          proposed.value("spec", json::object()).value("finalizers", json::array());
    } else if (proposed.contains("status")) {
      object["status"] = proposed["status"];
    } else {
      object.erase("status");
    }
    object["metadata"]["managedFields"] = proposed["metadata"].value("managedFields", json());
    if (object["metadata"]["managedFields"].is_null()) object["metadata"].erase("managedFields");
  }
  object["metadata"]["resourceVersion"] = meta_string(current, "resourceVersion");
  bump_generation(type, current, object);
  validate(type, object, current);
  if (type.resource() == "customresourcedefinitions") {
    if (const std::vector<FieldError> errors = validate_crd(object); !errors.empty()) {
      throw invalid(type.kind(), type.group(), ref.name, errors);
    }
  }
  if (admission) admission_.validate(*admission, object, current, warnings);
  return object;
}

}  // namespace tessel::testing
