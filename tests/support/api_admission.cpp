#include "tests/support/api_admission.h"

#include <future>
#include <optional>
#include <variant>

#include "kube/base64.h"
#include "tests/support/api_admission_client.h"
#include "tests/support/api_admission_match.h"
#include "tests/support/api_errors.h"
#include "tests/support/api_object_rules.h"
#include "tests/support/api_patch.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

const std::string kAdmissionGroup = "admissionregistration.k8s.io";
const std::string kReviewApiVersion = "admission.k8s.io/v1";

// A failed call: the reason after `failed calling webhook "<name>": `.
struct CallFailure {
  std::string reason;
};

// What one webhook answered: allowed (with a patch, for mutating webhooks) or a denial.
struct Verdict {
  bool allowed = true;
  json status;  // response.status of a denial
  json patch;   // the decoded JSONPatch, or null
  std::vector<std::string> warnings;
};

std::string host_port(const std::string& host, std::int64_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

// clientConfig -> where to send the request; a Service is routed to one of its Endpoints'
// addresses, as kube-apiserver's endpoint resolver does. The error is Go's dial error text.
std::variant<WebhookEndpoint, std::string> resolve(const ObjectStore& store,
                                                   const json& client_config) {
  WebhookEndpoint endpoint;
  const std::optional<std::string> ca =
      kube::base64_decode(client_config.value("caBundle", std::string()));
  endpoint.ca_bundle = ca.value_or("");
  if (client_config.contains("url")) {
    endpoint.url = client_config.value("url", "");
    return endpoint;
  }
  const json service_ref = client_config.value("service", json::object());
  const std::string name = service_ref.value("name", "");
  const std::string namespace_ = service_ref.value("namespace", "");
  const std::int64_t port = service_ref.value("port", std::int64_t{443});
  endpoint.url = "https://" + host_port(name + "." + namespace_ + ".svc", port) +
                 service_ref.value("path", std::string("/"));
  const std::optional<json> service = store.get({"", "services"}, namespace_, name);
  if (!service) return "service \"" + name + "\" not found";
  std::optional<json> service_port;
  for (const json& entry : service->value("spec", json::object()).value("ports", json::array())) {
    if (entry.value("port", std::int64_t{0}) == port) service_port = entry;
  }
  if (!service_port) {
    return "no service port " + std::to_string(port) + " found for service \"" + name + "\"";
  }
  const std::optional<json> endpoints = store.get({"", "endpoints"}, namespace_, name);
  if (!endpoints) return "endpoints \"" + name + "\" not found";
  for (const json& subset : endpoints->value("subsets", json::array())) {
    const json addresses = subset.value("addresses", json::array());
    if (addresses.empty()) continue;
    for (const json& entry : subset.value("ports", json::array())) {
      if (entry.value("name", "") != service_port->value("name", "")) continue;
      endpoint.connect_host = addresses[0].value("ip", "");
      endpoint.connect_port = static_cast<int>(entry.value("port", std::int64_t{0}));
      return endpoint;
    }
  }
  return "no endpoints available for service \"" + name + "\"";
}

json review_request(const AdmissionRequest& request, const std::string& uid, const json& object,
                    const json& old_object) {
  const ResourceType& type = *request.type;
  const json kind = {
      {"group", type.group()}, {"version", type.info.version}, {"kind", type.kind()}};
  const json resource = {
      {"group", type.group()}, {"version", type.info.version}, {"resource", type.resource()}};
  json user = {{"username", request.user.name}};
  if (!request.user.groups.empty()) user["groups"] = request.user.groups;
  json body = {{"uid", uid},
               {"kind", kind},
               {"resource", resource},
               {"requestKind", kind},
               {"requestResource", resource},
               {"operation", request.operation},
               {"userInfo", user},
               {"object", object.is_null() ? json() : in_version(object, type)},
               {"oldObject", old_object.is_null() ? json() : in_version(old_object, type)},
               {"dryRun", request.dry_run},
               {"options", request.options}};
  if (!request.subresource.empty()) {
    body["subResource"] = request.subresource;
    body["requestSubResource"] = request.subresource;
  }
  if (!request.name.empty()) body["name"] = request.name;
  if (!request.namespace_.empty()) body["namespace"] = request.namespace_;
  return {{"apiVersion", kReviewApiVersion}, {"kind", "AdmissionReview"}, {"request", body}};
}

// client-go's error for a response that is not a 2xx.
std::string status_error(int status, const std::string& body) {
  if (body.empty()) {
    return "the server responded with the status code " + std::to_string(status) +
           " but did not return more information";
  }
  return "an error on the server (\"" + body + "\") has prevented the request from succeeding";
}

// webhookrequest.VerifyAdmissionResponse for v1.
std::variant<Verdict, CallFailure> read_response(const json& review, const std::string& uid,
                                                 bool mutating) {
  auto invalid = [](const std::string& why) {
    return CallFailure{"received invalid webhook response: " + why};
  };
  const std::string api_version = review.value("apiVersion", "");
  const std::string kind = review.value("kind", "");
  if (api_version != kReviewApiVersion || kind != "AdmissionReview") {
    return invalid("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got " +
                   api_version + ", Kind=" + kind);
  }
  if (!review.contains("response") || !review["response"].is_object()) {
    return invalid("webhook response was absent");
  }
  const json& response = review["response"];
  const std::string got_uid = response.value("uid", "");
  if (got_uid != uid) {
    return invalid("expected response.uid=\"" + uid + "\", got \"" + got_uid + "\"");
  }
  Verdict verdict;
  verdict.allowed = response.value("allowed", false);
  verdict.status = response.value("status", json());
  for (const json& warning : response.value("warnings", json::array())) {
    if (warning.is_string()) verdict.warnings.push_back(warning.get<std::string>());
  }
  const std::string patch_type = response.value("patchType", "");
  const std::string patch = response.value("patch", "");
  if (!patch.empty() || !patch_type.empty()) {
    if (!mutating)
      return invalid("validating webhook may not return response.patch or response.patchType");
    if (patch_type.empty())
      return invalid("webhook returned response.patch but not response.patchType");
    if (patch_type != "JSONPatch") {
      return invalid("webhook returned invalid response.patchType of \"" + patch_type + "\"");
    }
  }
  if (!patch.empty() && verdict.allowed) {
    // response.patch is []byte: base64 that does not decode fails the response's decoding.
    const std::optional<std::string> bytes = kube::base64_decode(patch);
    if (!bytes) return CallFailure{"failed to call webhook: illegal base64 data in response.patch"};
    // jsonpatch.DecodePatch's refusal is an internal error, whatever the failurePolicy.
    const json operations = json::parse(*bytes, nullptr, false);
    if (operations.is_discarded()) {
      throw internal_error("invalid character in the webhook's patch: it is not JSON");
    }
    if (!operations.is_array()) {
      throw internal_error("json: cannot unmarshal " +
                           std::string(operations.is_object() ? "object" : "value") +
                           " into Go value of type jsonpatch.Patch");
    }
    verdict.patch = operations;
  }
  return verdict;
}

std::variant<Verdict, CallFailure> call(const ObjectStore& store, const json& webhook,
                                        const json& review, const std::string& uid, bool mutating) {
  const std::variant<WebhookEndpoint, std::string> endpoint =
      resolve(store, webhook.value("clientConfig", json::object()));
  const std::chrono::seconds timeout(webhook.value("timeoutSeconds", std::int64_t{10}));
  if (const std::string* error = std::get_if<std::string>(&endpoint)) {
    // The resolver runs when the client dials, so Go reports it as the POST's error.
    const json service = webhook["clientConfig"].value("service", json::object());
    const std::string url =
        "https://" +
        host_port(service.value("name", "") + "." + service.value("namespace", "") + ".svc",
                  service.value("port", std::int64_t{443})) +
        service.value("path", std::string("/")) + "?timeout=" + std::to_string(timeout.count()) +
        "s";
    return CallFailure{"failed to call webhook: Post \"" + url + "\": " + *error};
  }
  const WebhookReply reply =
      post_admission_review(std::get<WebhookEndpoint>(endpoint), review.dump(), timeout);
  if (!reply.error.empty()) return CallFailure{"failed to call webhook: " + reply.error};
  if (reply.status < 200 || reply.status > 299) {
    return CallFailure{"failed to call webhook: " + status_error(reply.status, reply.body)};
  }
  const json answer = json::parse(reply.body, nullptr, false);
  if (answer.is_discarded() || !answer.is_object()) {
    return CallFailure{
        "failed to call webhook: couldn't get version/kind; json parse error: the response is "
        "not a JSON object"};
  }
  return read_response(answer, uid, mutating);
}

// webhookerrors.ToStatusErr of kube-apiserver v1.26.
ApiError denial(const std::string& webhook_name, const json& returned) {
  json status = returned.is_object() ? returned : json::object();
  const std::string denied_by = "admission webhook \"" + webhook_name + "\" denied the request";
  int code = status.value("code", 0);
  if (code < 400) code = 400;
  const std::string message = status.value("message", "");
  const std::string reason = status.value("reason", "");
  json body = {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()}};
  const std::string state = status.value("status", "");
  body["status"] = state.empty() || state == "Success" ? "Failure" : state;
  body["message"] = !message.empty()  ? denied_by + ": " + message
                    : !reason.empty() ? denied_by + ": " + reason
                                      : denied_by + " without explanation";
  if (!reason.empty()) body["reason"] = reason;
  if (status.contains("details") && status["details"].is_object()) {
    body["details"] = status["details"];
  }
  body["code"] = code;
  return ApiError(code, body);
}

bool is_exempt(const ResourceType& type) {
  return type.group() == kAdmissionGroup && (type.resource() == "validatingwebhookconfigurations" ||
                                             type.resource() == "mutatingwebhookconfigurations");
}

// Handles one webhook's outcome: throws for a denial or a failure under failurePolicy Fail.
// Returns the patch to apply, if any.
json settle(const json& webhook, const std::variant<Verdict, CallFailure>& outcome,
            std::vector<std::string>& warnings) {
  const std::string name = webhook.value("name", "");
  if (const CallFailure* failure = std::get_if<CallFailure>(&outcome)) {
    if (webhook.value("failurePolicy", "Fail") == "Ignore") return nullptr;
    throw internal_error("failed calling webhook \"" + name + "\": " + failure->reason);
  }
  const Verdict& verdict = std::get<Verdict>(outcome);
  warnings.insert(warnings.end(), verdict.warnings.begin(), verdict.warnings.end());
  if (!verdict.allowed) throw denial(name, verdict.status);
  return verdict.patch;
}

}  // namespace

WebhookAdmission::WebhookAdmission(const ObjectStore& store) : store_(store) {}

bool WebhookAdmission::namespace_matches(const json& webhook, const AdmissionRequest& request,
                                         const json& object, const json& old_object) const {
  const bool is_namespace =
      request.type->group().empty() && request.type->resource() == "namespaces";
  if (request.namespace_.empty() && !is_namespace) return true;  // cluster-scoped: never exempt
  const json selector = webhook.value("namespaceSelector", json::object());
  if (selects_everything(selector)) return true;
  json labels;
  if (is_namespace) {
    const json& own = object.is_null() ? old_object : object;
    labels = own.value("metadata", json::object()).value("labels", json());
  } else {
    const std::optional<json> found = store_.get({"", "namespaces"}, "", request.namespace_);
    if (!found) throw not_found({"", "namespaces"}, request.namespace_);
    labels = found->value("metadata", json::object()).value("labels", json());
  }
  return label_selector_matches(selector, labels);
}

std::vector<json> WebhookAdmission::matching(const std::string& resource,
                                             const AdmissionRequest& request, const json& object,
                                             const json& old_object) const {
  std::vector<json> hooks;
  if (is_exempt(*request.type)) return hooks;
  const AdmissionTarget target{request.type->group(),    request.type->info.version,
                               request.type->resource(), request.subresource,
                               request.operation,        request.namespace_};
  auto labels_of = [](const json& item) {
    return item.is_object() ? item.value("metadata", json::object()).value("labels", json())
                            : json();
  };
  // Storage order is name order, the order kube-apiserver sorts configurations in.
  for (const auto& [key, configuration] : store_.list({kAdmissionGroup, resource}, "").items) {
    for (const json& webhook : configuration->value("webhooks", json::array())) {
      if (!rules_match(webhook, target)) continue;
      if (!namespace_matches(webhook, request, object, old_object)) continue;
      const json selector = webhook.value("objectSelector", json::object());
      if (!selects_everything(selector) &&
          !(object.is_object() && label_selector_matches(selector, labels_of(object))) &&
          !(old_object.is_object() && label_selector_matches(selector, labels_of(old_object)))) {
        continue;
      }
      hooks.push_back(webhook);
    }
  }
  return hooks;
}

void WebhookAdmission::mutate(const AdmissionRequest& request, json& object, const json& old_object,
                              std::vector<std::string>& warnings) const {
  const std::vector<json> hooks =
      matching("mutatingwebhookconfigurations", request, object, old_object);
  // Calls one webhook and applies its patch; true when the object changed.
  auto invoke = [&](const json& webhook) {
    const std::string uid = new_uid();
    const json review = review_request(request, uid, object, old_object);
    const json patch = settle(webhook, call(store_, webhook, review, uid, true), warnings);
    if (patch.is_null() || object.is_null()) return false;
    json patched;
    try {
      patched = json_patch(in_version(object, *request.type), patch);
    } catch (const std::exception& error) {
      throw internal_error(error.what());
    }
    const bool changed = patched != in_version(object, *request.type);
    object = std::move(patched);
    return changed;
  };
  std::size_t last_change = 0;  // one past the last webhook that changed the object
  for (std::size_t i = 0; i < hooks.size(); ++i) {
    if (invoke(hooks[i])) last_change = i + 1;
  }
  // reinvocationPolicy IfNeeded: a webhook that ran before a later one changed the object is
  // called once more, in the same order.
  for (std::size_t i = 0; i + 1 < last_change; ++i) {
    if (hooks[i].value("reinvocationPolicy", "Never") == "IfNeeded") invoke(hooks[i]);
  }
}

void WebhookAdmission::validate(const AdmissionRequest& request, const json& object,
                                const json& old_object, std::vector<std::string>& warnings) const {
  const std::vector<json> hooks =
      matching("validatingwebhookconfigurations", request, object, old_object);
  std::vector<std::future<std::variant<Verdict, CallFailure>>> calls;
  for (const json& webhook : hooks) {
    calls.push_back(std::async(std::launch::async, [&, webhook] {
      const std::string uid = new_uid();
      return call(store_, webhook, review_request(request, uid, object, old_object), uid, false);
    }));
  }
  std::optional<ApiError> first;
  for (std::size_t i = 0; i < hooks.size(); ++i) {
    try {
      settle(hooks[i], calls[i].get(), warnings);
    } catch (const ApiError& error) {
      if (!first) first = error;
    }
  }
  if (first) throw *first;
}

}  // namespace tessel::testing
