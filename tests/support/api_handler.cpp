#include "tests/support/api_handler.h"

#include "tests/support/api_access_review.h"
#include "tests/support/api_errors.h"
#include "tests/support/api_protobuf.h"
#include "tests/support/api_rbac_escalation.h"
#include "tests/support/api_representation.h"
#include "tests/support/api_router.h"
#include "tests/support/api_scale.h"
#include "tests/support/discovery.h"
#include "tests/support/managed_fields.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

HttpServerResponse text_response(int status, const std::string& text) {
  HttpServerResponse response;
  response.status = status;
  response.headers.set("Content-Type", "text/plain; charset=utf-8");
  response.headers.set("X-Content-Type-Options", "nosniff");
  response.body = text;
  return response;
}

json parse_body(const HttpServerRequest& request) {
  if (media_type(request) == kProtobufMediaType) return decode_protobuf_body(request.body);
  const json body = json::parse(request.body, nullptr, false);
  if (body.is_discarded()) {
    throw bad_request(
        "couldn't get version/kind; json parse error: the request body is not "
        "valid JSON");
  }
  return body;
}

// Drops what the discovery documents list but this server does not serve (the kube library's
// registry always knows tessel's custom resources; they are served only with their CRDs).
json served_group(json group, const ServedResources& resources) {
  const std::string name = group.value("name", "");
  json versions = json::array();
  for (const json& version : group.value("versions", json::array())) {
    if (resources.serves_group_version(name, version.value("version", ""))) {
      versions.push_back(version);
    }
  }
  if (versions.empty()) return nullptr;
  const std::string preferred = group["preferredVersion"].value("version", "");
  if (!resources.serves_group_version(name, preferred)) group["preferredVersion"] = versions[0];
  group["versions"] = versions;
  return group;
}

json served_resource_list(json list, const ServedResources& resources, const std::string& group,
                          const std::string& version) {
  json kept = json::array();
  for (const json& entry : list.value("resources", json::array())) {
    const std::string name = entry.value("name", "");
    if (resources.find(group, version, name.substr(0, name.find('/')))) kept.push_back(entry);
  }
  list["resources"] = kept;
  return list;
}

json served_openapi_index(json index, const ServedResources& resources) {
  json paths = json::object();
  const json listed = index.value("paths", json::object());
  for (const auto& [path, entry] : listed.items()) {
    const ApiPath parsed = parse_api_path("/" + path);
    if (parsed.type != ApiPath::Type::kGroupVersion ||
        resources.serves_group_version(parsed.group, parsed.version)) {
      paths[path] = entry;
    }
  }
  index["paths"] = paths;
  return index;
}

}  // namespace

HttpServerResponse json_response(int status, const json& body,
                                 const std::vector<std::string>& warnings) {
  HttpServerResponse response;
  response.status = status;
  response.headers.set("Content-Type", "application/json");
  response.headers.set("Cache-Control", "no-cache, private");
  for (const std::string& warning : warnings) {
    response.headers.entries.emplace_back("Warning", "299 - " + json(warning).dump());
  }
  response.body = body.dump() + "\n";
  return response;
}

HttpServerResponse error_response(const ApiError& error) {
  HttpServerResponse response =
      error.is_plain_text() ? text_response(error.http_status(), error.body().get<std::string>())
                            : json_response(error.http_status(), error.body());
  for (const auto& [name, value] : error.headers()) response.headers.set(name, value);
  return response;
}

ApiHandler::ApiHandler(ObjectStore& store, ServedResources& resources, ApiVerbs& verbs,
                       Authenticator& authenticator, ServiceAccountTokens& tokens,
                       std::string git_version, WatchSettings watch_settings)
    : store_(store),
      resources_(resources),
      verbs_(verbs),
      authenticator_(authenticator),
      tokens_(tokens),
      git_version_(std::move(git_version)),
      watch_settings_(watch_settings),
      authorizer_(default_authorizer),
      rule_resolver_(allow_everything_rules) {}

void ApiHandler::set_authorizer(Authorizer authorizer, RuleResolver rules) {
  std::lock_guard lock(authorizer_mutex_);
  if (authorizer) {
    authorizer_ = std::move(authorizer);
    rule_resolver_ = std::move(rules);
  } else {
    authorizer_ = default_authorizer;
    rule_resolver_ = allow_everything_rules;
  }
}

bool ApiHandler::may_escalate_anything(const UserInfo& user) const {
  const Authorizer allowed = authorizer();
  for (const auto& [verb, resource] :
       std::vector<std::pair<std::string, std::string>>{{"escalate", "roles"},
                                                        {"escalate", "clusterroles"},
                                                        {"bind", "roles"},
                                                        {"bind", "clusterroles"}}) {
    RequestAttributes attributes;
    attributes.user = user;
    attributes.verb = verb;
    attributes.api_group = "rbac.authorization.k8s.io";
    attributes.resource = resource;
    if (!allowed(attributes)) return false;
  }
  return true;
}

RuleResolver ApiHandler::rule_resolver() const {
  std::lock_guard lock(authorizer_mutex_);
  return rule_resolver_;
}

Authorizer ApiHandler::authorizer() const {
  std::lock_guard lock(authorizer_mutex_);
  return authorizer_;
}

bool ApiHandler::is_watch(const HttpServerRequest& request) {
  if (request.method != "GET") return false;
  const std::string watch = request.query_param("watch").value_or("false");
  return watch == "true" || watch == "1" || watch == "True" || watch == "TRUE" || watch == "t" ||
         watch == "T";
}

HttpServerResponse ApiHandler::handle(const HttpServerRequest& request) const {
  try {
    const ApiPath path = parse_api_path(request.path);
    const std::optional<UserInfo> authenticated = authenticator_.authenticate(request);
    if (!authenticated) throw unauthorized();
    const UserInfo user = impersonated_user(request, *authenticated, authorizer());
    const RequestAttributes attributes = request_attributes(request, path, user, is_watch(request));
    if (!authorizer()(attributes)) throw forbidden_request(attributes);
    if (path.type == ApiPath::Type::kResource) return handle_resource(request, path, user);
    return handle_non_resource(request, path);
  } catch (const ApiError& error) {
    return error_response(error);
  } catch (const std::exception& error) {
    return error_response(internal_error(error.what()));
  }
}

HttpServerResponse ApiHandler::handle_non_resource(const HttpServerRequest& request,
                                                   const ApiPath& path) const {
  if (path.type == ApiPath::Type::kUnknown) throw page_not_found();
  if (request.method != "GET") throw method_not_allowed();
  switch (path.type) {
    case ApiPath::Type::kVersion:
      return json_response(200, version_document(git_version_));
    case ApiPath::Type::kHealth:
      return text_response(200, "ok");
    case ApiPath::Type::kCoreGroup:
      return json_response(200, core_api_versions());
    case ApiPath::Type::kGroupList: {
      json list = api_group_list(resources_.resources());
      json groups = json::array();
      for (const json& group : list["groups"]) {
        json served = served_group(group, resources_);
        if (!served.is_null()) groups.push_back(std::move(served));
      }
      list["groups"] = groups;
      return json_response(200, list);
    }
    case ApiPath::Type::kGroup: {
      const json group = api_group(resources_.resources(), path.group);
      const json served = group.is_null() ? json() : served_group(group, resources_);
      if (served.is_null()) throw page_not_found();
      return json_response(200, served);
    }
    case ApiPath::Type::kGroupVersion: {
      if (!resources_.serves_group_version(path.group, path.version)) throw page_not_found();
      const json list = api_resource_list(resources_.resources(), path.group, path.version);
      if (list.is_null()) throw page_not_found();
      return json_response(200, served_resource_list(list, resources_, path.group, path.version));
    }
    case ApiPath::Type::kOpenApi: {
      const std::string rest = request.path.substr(std::string("/openapi/v3").size());
      if (request.path.rfind("/openapi/v3", 0) == 0 && !rest.empty()) {
        const ApiPath group_version = parse_api_path(rest);
        if (group_version.type != ApiPath::Type::kGroupVersion ||
            !resources_.serves_group_version(group_version.group, group_version.version)) {
          throw page_not_found();
        }
      }
      json document = openapi_document(resources_.resources(), resources_.crds(), request.path);
      if (document.is_null()) throw page_not_found();
      if (request.path == "/openapi/v3") document = served_openapi_index(document, resources_);
      return json_response(200, document);
    }
    default:
      throw page_not_found();
  }
}

HttpServerResponse ApiHandler::handle_resource(const HttpServerRequest& request,
                                               const ApiPath& path, const UserInfo& user) const {
  const std::shared_ptr<const ResourceType> type =
      resources_.find(path.group, path.version, path.resource);
  if (!type) throw page_not_found();
  if (type->namespaced() == false && !path.namespace_.empty()) throw page_not_found();
  if (type->namespaced() && !path.name.empty() && path.namespace_.empty()) throw page_not_found();
  if (auto answer = answer_review(request, *type, path, user)) return *answer;
  const bool finalize =
      path.subresource == "finalize" && type->group().empty() && type->resource() == "namespaces";
  const ObjectRef ref{type, path.namespace_, path.name, path.subresource};
  const RequestOptions options = parse_request_options(request);
  const std::string& method = request.method;
  WriteOptions write{options.dry_run, options.field_manager, options.field_validation, user};
  if (write.manager.empty() && media_type(request) != "application/apply-patch+yaml") {
    write.manager = default_manager(request.headers.get("User-Agent").value_or(""));
  }
  if (path.subresource == "scale" && type->has_subresource("scale") && !path.name.empty()) {
    const VerbResult result =
        serve_scale(verbs_, ref, method, media_type(request), request.body, write);
    return json_response(result.status, result.body, result.warnings);
  }
  if (!path.subresource.empty() && path.subresource != "status" && !finalize) {
    throw page_not_found();
  }
  if (path.subresource == "status" && !type->has_subresource("status")) throw page_not_found();
  if (finalize && method != "PUT") throw method_not_allowed();
  if (method == "GET") return read(request, ref, options);
  if (path.is_collection() && method != "POST" && method != "DELETE") throw method_not_allowed();
  if (!path.is_collection() && method == "POST") throw method_not_allowed();
  if (path.subresource.empty() && (method == "POST" || method == "PUT" || method == "PATCH") &&
      is_rbac_kind(*type) && !may_escalate_anything(user)) {
    // The object as the write would store it decides what it grants.
    WriteOptions trial = write;
    trial.dry_run = true;
    const VerbResult would = method == "POST" ? verbs_.create(ref, parse_body(request), trial)
                             : method == "PUT"
                                 ? verbs_.update(ref, parse_body(request), trial)
                                 : verbs_.patch(ref, media_type(request), request.body, trial,
                                                options.force.value_or(false));
    confirm_no_escalation(*type, would.body, user, authorizer(), rule_resolver(), store_);
  }
  VerbResult result;
  if (method == "POST") {
    result = verbs_.create(ref, parse_body(request), write);
  } else if (method == "PUT") {
    result = verbs_.update(ref, parse_body(request), write);
  } else if (method == "PATCH") {
    result =
        verbs_.patch(ref, media_type(request), request.body, write, options.force.value_or(false));
  } else if (method == "DELETE") {
    if (!path.subresource.empty()) throw method_not_allowed();
    DeleteOptions deletion = parse_delete_options(options, request.body);
    deletion.user = user;
    result = path.is_collection() ? verbs_.remove_collection(ref, options, deletion)
                                  : verbs_.remove(ref, deletion);
  } else {
    throw method_not_allowed();
  }
  return json_response(result.status, result.body, result.warnings);
}

std::optional<HttpServerResponse> ApiHandler::answer_review(const HttpServerRequest& request,
                                                            const ResourceType& type,
                                                            const ApiPath& path,
                                                            const UserInfo& user) const {
  if (type.group() == "authorization.k8s.io") {
    if (request.method != "POST" || !path.name.empty()) throw method_not_allowed();
    if (type.resource() == "selfsubjectrulesreviews") {
      return json_response(
          201, answer_self_subject_rules_review(parse_body(request), user, rule_resolver()));
    }
    return json_response(
        201, answer_self_subject_access_review(parse_body(request), user, authorizer()));
  }
  if (type.group().empty() && type.resource() == "serviceaccounts" && path.subresource == "token") {
    if (request.method != "POST") throw method_not_allowed();
    return json_response(
        201, tokens_.answer_token_request(path.namespace_, path.name, parse_body(request)));
  }
  return std::nullopt;
}

HttpServerResponse ApiHandler::read(const HttpServerRequest& request, const ObjectRef& ref,
                                    const RequestOptions& options) const {
  const ResourceType& type = *ref.type;
  const Representation representation = negotiate_representation(request, true);
  if (options.watch) {
    RequestOptions watch_options = options;
    if (!ref.name.empty()) {
      // A watch of one object is a watch of its collection selecting it by name.
      watch_options.field_selector =
          "metadata.name=" + ref.name +
          (options.field_selector.empty() ? "" : "," + options.field_selector);
    }
    return watch_response(store_, ref.type, ref.namespace_, watch_options, representation,
                          watch_settings_);
  }
  if (ref.name.empty()) {
    const ListResult list = verbs_.list(ref, options);
    switch (representation.type) {
      case Representation::Type::kTable:
        return json_response(
            200, table_of_list(type, list, options.include_object, representation.api_version));
      case Representation::Type::kPartialObjectMetadata:
        return json_response(200, partial_object_metadata_list(list, representation.api_version));
      case Representation::Type::kJson:
        break;
    }
    return json_response(200, list_body(type, list));
  }
  const json object = verbs_.get(ref);
  switch (representation.type) {
    case Representation::Type::kTable:
      return json_response(
          200, table_of_one(type, object, options.include_object, representation.api_version));
    case Representation::Type::kPartialObjectMetadata:
      return json_response(200, partial_object_metadata(object, representation.api_version));
    case Representation::Type::kJson:
      break;
  }
  return json_response(200, object);
}

}  // namespace tessel::testing
