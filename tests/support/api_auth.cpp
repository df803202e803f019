#include "tests/support/api_auth.h"

#include <algorithm>
#include <cctype>

#include "tests/support/api_field_selector.h"
#include "tests/support/api_label_selector.h"
#include "tests/support/api_service_account_tokens.h"

namespace tessel::testing {
namespace {

constexpr const char* kAnonymous = "system:anonymous";

UserInfo with_group(UserInfo user, const std::string& group) {
  if (std::find(user.groups.begin(), user.groups.end(), group) == user.groups.end()) {
    user.groups.push_back(group);
  }
  return user;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

bool is_public_info_path(const std::string& path) {
  for (const std::string prefix : {"/healthz", "/livez", "/readyz"}) {
    if (path == prefix || path.rfind(prefix + "/", 0) == 0) return true;
  }
  return path == "/version" || path == "/version/";
}

// The name a list or watch names with fieldSelector metadata.name=x (or ==x), if valid as a
// path segment; none when the selectors do not parse (kube-apiserver's request info then
// treats the request as a plain list, and the list itself answers 400).
std::string selected_name(const HttpServerRequest& request) {
  const std::optional<std::string> selector = request.query_param("fieldSelector");
  if (!selector) return "";
  try {
    LabelSelector::parse(request.query_param("labelSelector").value_or(""));
    const std::optional<std::string> name =
        FieldSelector::parse(*selector).required_value("metadata.name");
    if (!name) return "";
    const bool valid =
        *name != "." && *name != ".." && name->find_first_of("/%") == std::string::npos;
    return valid ? *name : "";
  } catch (const std::invalid_argument&) {
    return "";
  }
}

}  // namespace

Authenticator::Authenticator(const std::vector<ApiTestServerOptions::Token>& tokens,
                             const ServiceAccountTokens* service_account_tokens)
    : service_account_tokens_(service_account_tokens) {
  for (const auto& token : tokens) tokens_[token.token] = token.user;
}

void Authenticator::add_token(const std::string& token, const UserInfo& user) {
  std::lock_guard lock(mutex_);
  tokens_[token] = user;
}

std::optional<UserInfo> Authenticator::authenticate(const HttpServerRequest& request) const {
  if (!request.client_cn.empty()) {
    return with_group({request.client_cn, request.client_organizations}, "system:authenticated");
  }
  const std::string header = request.headers.get("Authorization").value_or("");
  const std::size_t space = header.find(' ');
  if (space != std::string::npos && lower(header.substr(0, space)) == "bearer") {
    std::string token = header.substr(space + 1);
    token.erase(0, token.find_first_not_of(' '));
    {
      std::lock_guard lock(mutex_);
      const auto found = tokens_.find(token);
      if (found != tokens_.end()) return with_group(found->second, "system:authenticated");
    }
    if (service_account_tokens_ == nullptr) return std::nullopt;
    const std::optional<UserInfo> account = service_account_tokens_->authenticate(token);
    if (!account) return std::nullopt;
    return with_group(*account, "system:authenticated");
  }
  return UserInfo{kAnonymous, {"system:unauthenticated"}};
}

RequestAttributes request_attributes(const HttpServerRequest& request, const ApiPath& path,
                                     const UserInfo& user, bool watch) {
  RequestAttributes attributes;
  attributes.user = user;
  attributes.path = request.path;
  attributes.resource_request = path.type == ApiPath::Type::kResource;
  if (!attributes.resource_request) {
    attributes.verb = lower(request.method);
    return attributes;
  }
  attributes.api_group = path.group;
  attributes.resource = path.resource;
  attributes.subresource = path.subresource;
  attributes.namespace_ = path.namespace_;
  attributes.name = path.name;
  // A namespace object is named by its own path but lives in no namespace.
  if (path.group.empty() && path.resource == "namespaces") attributes.namespace_ = path.name;
  const std::string& method = request.method;
  if (method == "GET" || method == "HEAD") {
    attributes.verb = watch ? "watch" : path.name.empty() ? "list" : "get";
    // A list or watch selecting one name by field is authorized as a request for that name
    // (RBAC's resourceNames then apply), as kube-apiserver's request info makes it.
    if (path.name.empty()) attributes.name = selected_name(request);
  } else if (method == "POST") {
    attributes.verb = "create";
  } else if (method == "PUT") {
    attributes.verb = "update";
  } else if (method == "PATCH") {
    attributes.verb = "patch";
  } else if (method == "DELETE") {
    attributes.verb = path.name.empty() ? "deletecollection" : "delete";
  } else {
    attributes.verb = lower(method);
  }
  return attributes;
}

UserInfo impersonated_user(const HttpServerRequest& request, const UserInfo& user,
                           const Authorizer& authorizer) {
  const std::optional<std::string> name = request.headers.get("Impersonate-User");
  std::vector<std::string> groups;
  for (const auto& [header, value] : request.headers.entries) {
    if (lower(header) == "impersonate-group") groups.push_back(value);
  }
  if (!name) {
    if (groups.empty()) return user;
    throw bad_request("requested [{Group  " + groups.front() +
                      "    }] without impersonating a user");
  }
  const auto check = [&](const std::string& resource, const std::string& namespace_,
                         const std::string& object) {
    RequestAttributes attributes;
    attributes.user = user;
    attributes.verb = "impersonate";
    attributes.resource = resource;
    attributes.namespace_ = namespace_;
    attributes.name = object;
    attributes.path = request.path;
    if (!authorizer(attributes)) throw forbidden_request(attributes);
  };
  UserInfo acting{*name, {}};
  const std::string prefix = "system:serviceaccount:";
  const std::size_t colon = name->rfind(':');
  if (name->rfind(prefix, 0) == 0 && colon > prefix.size()) {
    const std::string namespace_ = name->substr(prefix.size(), colon - prefix.size());
    const std::string account = name->substr(colon + 1);
    check("serviceaccounts", namespace_, account);
    if (groups.empty()) acting.groups = service_account_user(namespace_, account).groups;
  } else {
    check("users", "", *name);
  }
  for (const std::string& group : groups) {
    check("groups", "", group);
    if (std::find(acting.groups.begin(), acting.groups.end(), group) == acting.groups.end()) {
      acting.groups.push_back(group);
    }
  }
  if (*name == kAnonymous) {
    if (groups.empty()) acting.groups = {"system:unauthenticated"};
    return acting;
  }
  const bool named_either =
      std::any_of(acting.groups.begin(), acting.groups.end(), [](const std::string& group) {
        return group == "system:authenticated" || group == "system:unauthenticated";
      });
  return named_either ? acting : with_group(acting, "system:authenticated");
}

bool default_authorizer(const RequestAttributes& attributes) {
  if (attributes.user.name != kAnonymous) return true;
  return !attributes.resource_request && attributes.verb == "get" &&
         is_public_info_path(attributes.path);
}

ApiError forbidden_request(const RequestAttributes& attributes) {
  const std::string user = "User \"" + attributes.user.name + "\" cannot " + attributes.verb;
  if (!attributes.resource_request) {
    return forbidden({}, "", user + " path \"" + attributes.path + "\"");
  }
  std::string resource = attributes.resource;
  if (!attributes.subresource.empty()) resource += "/" + attributes.subresource;
  std::string reason =
      user + " resource \"" + resource + "\" in API group \"" + attributes.api_group + "\"";
  reason += attributes.namespace_.empty() ? " at the cluster scope"
                                          : " in the namespace \"" + attributes.namespace_ + "\"";
  return forbidden({attributes.api_group, attributes.resource}, attributes.name, reason);
}

}  // namespace tessel::testing
