// Defaulting and validation of built-in kinds against the captured kube-apiserver v1.26
// responses, and the messages of the rules the fixtures do not cover.
#include "tests/support/builtin_semantics.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/kube/fixtures.h"
#include "tests/support/managed_fields.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
using kube::testing::fixture;
const ApiResource& info(const std::string& group, const std::string& kind) {
  for (const ApiResource& r : served_builtin_resources()) {
    if (r.group == group && r.kind == kind) return r;
  }
  throw std::runtime_error("no resource for " + kind);
}

// What the server fills in itself on every create, which the tests leave to the core.
json without_server_fields(json object) {
  for (const char* field : {"uid", "resourceVersion", "creationTimestamp", "managedFields"}) {
    object["metadata"].erase(field);
  }
  return object;
}

json managed_fields_without_times(json object) {
  json entries = object["metadata"]["managedFields"];
  for (auto& e : entries) e.erase("time");
  return entries;
}

// A create as kube-apiserver runs it: decode, field manager, admission, validation.
json create(const ApiResource& resource, json object) {
  EXPECT_FALSE(decode_error(resource, object).has_value());
  apply_decode_defaults(resource, object);
  object["metadata"]["creationTimestamp"] = "2026-11-21T23:02:25Z";
  record_update(object, nullptr, "tessel-operator", "");
  apply_admission_defaults(resource, object);
  EXPECT_EQ(validate_builtin_create(resource, object), std::vector<FieldError>{});
  return object;
}

void expect_created_as_captured(const ApiResource& resource, const std::string& name) {
  const json captured = fixture(name);
  const json created = create(resource, captured["request"]["body"]);
  EXPECT_EQ(without_server_fields(created), without_server_fields(captured["response"]["body"]));
  EXPECT_EQ(managed_fields_without_times(created),
            managed_fields_without_times(captured["response"]["body"]));
}

TEST(BuiltinCreate, PodGetsTheCapturedDefaultsTolerationsAndStatus) {
  expect_created_as_captured(info("", "Pod"), "201-create-pod-with-nodename.json");
}

TEST(BuiltinCreate, NodeGetsTheNotReadyTaintAndItsZeroStatus) {
  expect_created_as_captured(info("", "Node"), "201-create-node.json");
}

TEST(BuiltinCreate, NamespaceGetsItsNameLabelFinalizerAndPhase) {
  expect_created_as_captured(info("", "Namespace"), "201-create-namespace.json");
}

TEST(BuiltinCreate, CoreEventKeepsItsFieldsAndGetsANullEventTime) {
  expect_created_as_captured(info("", "Event"), "201-create-event-core-v1.json");
}

TEST(BuiltinCreate, LeaseKeepsItsMicroTimes) {
  expect_created_as_captured(info("coordination.k8s.io", "Lease"), "201-lease-create.json");
}

TEST(BuiltinCreate, PodsMountTheServiceAccountTokenUnlessTheyOptOut) {
  json pod = fixture("201-create-pod-with-nodename.json")["request"]["body"];
  pod["spec"].erase("automountServiceAccountToken");
  default_builtin(info("", "Pod"), pod);
  ASSERT_EQ(pod["spec"]["volumes"].size(), 1u);
  const std::string volume = pod["spec"]["volumes"][0]["name"];
  EXPECT_TRUE(volume.starts_with("kube-api-access-"));
  EXPECT_EQ(volume.size(), std::string("kube-api-access-").size() + 5);
  EXPECT_EQ(pod["spec"]["containers"][0]["volumeMounts"][0],
            json({{"name", volume},
                  {"readOnly", true},
                  {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}}));
  EXPECT_EQ(validate_builtin_create(info("", "Pod"), pod), std::vector<FieldError>{});
}

TEST(BuiltinCreate, PullPolicyAndQosClassFollowTheImageAndResources) {
  auto pod_with = [](const std::string& image, json resources) {
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", "p"}, {"namespace", "default"}}},
                {"spec",
                 {{"automountServiceAccountToken", false},
                  {"containers",
                   json::array({{{"name", "c"}, {"image", image}, {"resources", resources}}})}}}};
    default_builtin(info("", "Pod"), pod);
    return pod;
  };
  EXPECT_EQ(pod_with("busybox", json::object())["spec"]["containers"][0]["imagePullPolicy"],
            "Always");
  EXPECT_EQ(pod_with("busybox:latest", json::object())["spec"]["containers"][0]["imagePullPolicy"],
            "Always");
  EXPECT_EQ(
      pod_with("registry:5000/busybox", json::object())["spec"]["containers"][0]["imagePullPolicy"],
      "Always");
  EXPECT_EQ(
      pod_with("busybox@sha256:abc", json::object())["spec"]["containers"][0]["imagePullPolicy"],
      "IfNotPresent");
  EXPECT_EQ(pod_with("b", json::object())["status"]["qosClass"], "BestEffort");
  EXPECT_EQ(pod_with("b", {{"limits", {{"cpu", "1"}, {"memory", "1Gi"}}}})["status"]["qosClass"],
            "Guaranteed");
  EXPECT_EQ(pod_with("b", {{"limits", {{"cpu", "1"}, {"memory", "1Gi"}}},
                           {"requests", {{"cpu", "500m"}}}})["status"]["qosClass"],
            "Burstable");
}

// ---------------------------------------------------------------------------------------------
// Pod updates

json running_pod() { return fixture("200-pod-get-running.json")["response"]["body"]; }

TEST(PodUpdate, ChangingContainerArgsIsForbiddenWithTheCapturedDiff) {
  const json old_pod = running_pod();
  json new_pod = old_pod;
  new_pod["spec"]["containers"][0]["args"] = json::array({"--stage=1"});
  const std::vector<FieldError> errors = validate_builtin_update(info("", "Pod"), old_pod, new_pod);
  const json captured = fixture("422-pod-spec-update-forbidden.json")["response"]["body"];
  ASSERT_EQ(errors.size(), 1u);
  const json& cause = captured["details"]["causes"][0];
  EXPECT_EQ(errors[0].type, cause["reason"]);
  EXPECT_EQ(errors[0].field, cause["field"]);
  EXPECT_EQ(errors[0].message, cause["message"]);
}

TEST(PodUpdate, ImagesAndAddedTolerationsMayChange) {
  const json old_pod = running_pod();
  json new_pod = old_pod;
  new_pod["spec"]["containers"][0]["image"] = "tessel/stage:0.2.0";
  new_pod["spec"]["tolerations"].push_back(
      {{"key", "gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}});
  EXPECT_EQ(validate_builtin_update(info("", "Pod"), old_pod, new_pod), std::vector<FieldError>{});

  json removed = old_pod;
  removed["spec"]["tolerations"].erase(0);
  const auto errors = validate_builtin_update(info("", "Pod"), old_pod, removed);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].message,
            "Forbidden: existing toleration can not be modified except its tolerationSeconds");
}

// go-cmp's layout rules (no capture covers this case): two records of context around a change,
// identical values compact and cut after four records, keys padded across a run of one-line
// records.
TEST(PodUpdate, ChangedScalarsArePrintedAsRemovedAndInsertedLines) {
  const json old_pod = running_pod();
  json new_pod = old_pod;
  new_pod["spec"]["restartPolicy"] = "Always";
  const auto errors = validate_builtin_update(info("", "Pod"), old_pod, new_pod);
  ASSERT_EQ(errors.size(), 1u);
  const std::string diff = errors[0].message.substr(errors[0].message.find('\n') + 1);
  EXPECT_EQ(diff,
            "  core.PodSpec{\n"
            "  \t... // 2 identical fields\n"
            "  \tContainers:                    {{Name: \"stage\", Image: "
            "\"tessel/stage:0.1.0\", Args: {\"--stage=0\", \"--replica=0\", "
            "\"--peers=/etc/tessel/peers.json\"}, Ports: {{Name: \"activations\", "
            "ContainerPort: 29500, Protocol: \"TCP\"}}, ...}},\n"
            "  \tEphemeralContainers:           nil,\n"
            "- \tRestartPolicy:                 \"Never\",\n"
            "+ \tRestartPolicy:                 \"Always\",\n"
            "  \tTerminationGracePeriodSeconds: &30,\n"
            "  \tActiveDeadlineSeconds:         nil,\n"
            "  \t... // 26 identical fields\n"
            "  }\n");
}

TEST(PodUpdate, MetadataErrorsAreReportedByEveryCheckThatRunsThem) {
  const json old_pod = running_pod();
  json new_pod = old_pod;
  new_pod["metadata"]["labels"]["bad key!"] = "x";
  const auto errors = validate_builtin_update(info("", "Pod"), old_pod, new_pod);
  ASSERT_EQ(errors.size(), 4u);  // generic create-style and update checks, then the Pod's own two
  for (const auto& e : errors) EXPECT_EQ(e.field, "metadata.labels");
}

// ---------------------------------------------------------------------------------------------
// Metadata

std::vector<std::string> messages(const std::vector<FieldError>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.field + ": " + e.message);
  return out;
}

json config_map(const json& metadata) {
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", metadata}};
}

TEST(Metadata, NamesFollowTheKindsRuleWithKubeApiserversWording) {
  EXPECT_EQ(
      messages(validate_builtin_create(
          info("", "ConfigMap"), config_map({{"name", "Bad_Name"}, {"namespace", "default"}}))),
      std::vector<std::string>{
          "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must "
          "consist of lower case alphanumeric characters, '-' or '.', and must start and "
          "end with an alphanumeric character (e.g. 'example.com', regex used for "
          "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"});
  const json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "a.b"}}}};
  EXPECT_EQ(messages(validate_builtin_create(info("", "Namespace"), ns)),
            std::vector<std::string>{
                "metadata.name: Invalid value: \"a.b\": a lowercase RFC 1123 label must consist "
                "of lower case alphanumeric characters or '-', and must start and end with an "
                "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"});
  EXPECT_EQ(
      messages(
          validate_builtin_create(info("", "ConfigMap"), config_map({{"namespace", "default"}}))),
      std::vector<std::string>{"metadata.name: Required value: name or generateName is required"});
  EXPECT_EQ(messages(validate_builtin_create(info("", "ConfigMap"), config_map({{"name", "c"}}))),
            std::vector<std::string>{"metadata.namespace: Required value"});
  EXPECT_EQ(messages(validate_builtin_create(info("", "Node"),
                                             {{"metadata", {{"name", "n"}, {"namespace", "x"}}}})),
            std::vector<std::string>{"metadata.namespace: Forbidden: not allowed on this type"});
}

TEST(Metadata, LabelsAnnotationsAndFinalizers) {
  const json metadata = {{"name", "c"},
                         {"namespace", "default"},
                         {"labels", {{"ok", "fine"}, {"a/b/c", "x"}, {"k", "bad value!"}}},
                         {"annotations", {{"Upper.Case/OK", "1"}, {"-bad", "2"}}},
                         {"finalizers", {"example.com/ok", "custom"}}};
  EXPECT_EQ(
      messages(validate_builtin_create(info("", "ConfigMap"), config_map(metadata))),
      (std::vector<std::string>{
          "metadata.labels: Invalid value: \"a/b/c\": a qualified name must consist of "
          "alphanumeric characters, '-', '_' or '.', and must start and end with an "
          "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
          "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
          "subdomain prefix and '/' (e.g. 'example.com/MyName')",
          "metadata.labels: Invalid value: \"bad value!\": a valid label must be an empty string "
          "or consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
          "an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
          "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
          "metadata.annotations: Invalid value: \"-bad\": name part must consist of alphanumeric "
          "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
          "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
          "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
          "metadata.finalizers[1]: Invalid value: \"custom\": name is neither a standard "
          "finalizer name nor is it fully qualified"}));
  json big = config_map({{"name", "c"}, {"namespace", "default"}});
  big["metadata"]["annotations"]["a"] = std::string(256 * 1024, 'x');
  EXPECT_EQ(
      messages(validate_builtin_create(info("", "ConfigMap"), big)),
      std::vector<std::string>{"metadata.annotations: Too long: must have at most 262144 bytes"});
}

TEST(Metadata, GenerateNameMayEndInADash) {
  json object =
      config_map({{"generateName", "job-"}, {"name", "job-x7k2p"}, {"namespace", "default"}});
  EXPECT_TRUE(validate_builtin_create(info("", "ConfigMap"), object).empty());
  object["metadata"]["generateName"] = "Job-";
  EXPECT_EQ(validate_builtin_create(info("", "ConfigMap"), object).at(0).field,
            "metadata.generateName");
}

TEST(Metadata, NoNewFinalizersWhileTerminatingAsTheCapturedCause) {
  const json old_object = fixture("200-get-terminating-with-finalizer.json")["response"]["body"];
  json new_object = old_object;
  new_object["metadata"]["finalizers"].push_back("tessel.dev/other");
  const auto errors = validate_object_metadata_update(old_object, new_object);
  const json cause = fixture(
      "422-add-finalizer-while-terminating.json")["response"]["body"]["details"]["causes"][0];
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], (FieldError{cause["reason"], cause["field"], cause["message"]}));
}

TEST(Metadata, ImmutableFieldsOnUpdate) {
  const json old_object = fixture("201-create-namespace.json")["response"]["body"];
  json renamed = old_object;
  renamed["metadata"]["name"] = "other";
  renamed["metadata"]["uid"] = "changed";
  renamed["metadata"]["creationTimestamp"] = "2030-01-01T00:00:00Z";
  EXPECT_EQ(messages(validate_object_metadata_update(old_object, renamed)),
            (std::vector<std::string>{
                "metadata.name: Invalid value: \"other\": field is immutable",
                "metadata.uid: Invalid value: \"changed\": field is immutable",
                "metadata.creationTimestamp: Invalid value: 2030-01-01 00:00:00 +0000 UTC: field "
                "is immutable"}));
  json unversioned = old_object;
  unversioned["metadata"].erase("resourceVersion");
  EXPECT_EQ(messages(validate_object_metadata_update(old_object, unversioned)),
            std::vector<std::string>{
                "metadata.resourceVersion: Invalid value: \"\": must be specified for an update"});
}

// ---------------------------------------------------------------------------------------------
// Decoding

TEST(DecodeError, MalformedMicroTimeIsTheCaptured400) {
  const json captured = fixture("400-lease-bad-microtime.json");
  EXPECT_EQ(decode_error(info("coordination.k8s.io", "Lease"), captured["request"]["body"]),
            captured["response"]["body"]["message"].get<std::string>());
}

TEST(DecodeError, GoTimeParsingMessages) {
  const auto lease_error = [](const json& renew_time) {
    const json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                        {"kind", "Lease"},
                        {"metadata", {{"name", "l"}}},
                        {"spec", {{"renewTime", renew_time}}}};
    return decode_error(info("coordination.k8s.io", "Lease"), lease).value_or("");
  };
  const std::string prefix = "Lease in version \"v1\" cannot be handled as a Lease: ";
  EXPECT_EQ(lease_error("2026-11-21T23:02:08.819817Z"), "");
  EXPECT_EQ(lease_error("2026-11-21T23:02:08.819817+02:00"), "");
  EXPECT_EQ(lease_error(nullptr), "");
  EXPECT_EQ(lease_error("2026-11-21T23:02:08Z"),
            prefix +
                "parsing time \"2026-11-21T23:02:08Z\" as "
                "\"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"Z\" as \".000000\"");
  EXPECT_EQ(lease_error("2026-13-21T23:02:08.819817Z"),
            prefix + "parsing time \"2026-13-21T23:02:08.819817Z\": month out of range");
  EXPECT_EQ(lease_error("2026-02-30T23:02:08.819817Z"),
            prefix + "parsing time \"2026-02-30T23:02:08.819817Z\": day out of range");
  EXPECT_EQ(lease_error("2026-11-21T23:02:08.819817Zjunk"),
            prefix + "parsing time \"2026-11-21T23:02:08.819817Zjunk\": extra text: \"junk\"");
  EXPECT_EQ(lease_error(5), prefix + "json: cannot unmarshal number into Go value of type string");
  // metav1.Time takes any fraction, or none.
  json event = fixture("201-create-event-core-v1.json")["request"]["body"];
  event["firstTimestamp"] = "2026-11-21T23:01:50.5Z";
  EXPECT_FALSE(decode_error(info("", "Event"), event).has_value());
  event["firstTimestamp"] = "yesterday";
  EXPECT_EQ(decode_error(info("", "Event"), event),
            "Event in version \"v1\" cannot be handled as a Event: parsing time \"yesterday\" as "
            "\"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\"");
}

TEST(DecodeError, MalformedQuantities) {
  json pod = fixture("201-create-pod-with-nodename.json")["request"]["body"];
  pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "two";
  EXPECT_EQ(decode_error(info("", "Pod"), pod),
            "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular "
            "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
  pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1500m";
  EXPECT_FALSE(decode_error(info("", "Pod"), pod).has_value());
}

TEST(DecodeError, SecretDataMustBeBase64) {
  json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", "s"}, {"namespace", "default"}}},
                 {"data", {{"ok", "aGVsbG8="}, {"bad", "abc$"}}}};
  EXPECT_EQ(decode_error(info("", "Secret"), secret),
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input "
            "byte 3");
  secret["data"]["bad"] = "abc";
  EXPECT_EQ(decode_error(info("", "Secret"), secret),
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input "
            "byte 0");
  secret["data"].erase("bad");
  EXPECT_FALSE(decode_error(info("", "Secret"), secret).has_value());
}

// ---------------------------------------------------------------------------------------------
// Other kinds

TEST(Secret, StringDataIsMergedIntoDataAndTheTypeDefaults) {
  json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", "s"}, {"namespace", "default"}}},
                 {"data", {{"a", "eA=="}}},
                 {"stringData", {{"b", "hello"}}}};
  default_builtin(info("", "Secret"), secret);
  EXPECT_EQ(secret["data"], json({{"a", "eA=="}, {"b", "aGVsbG8="}}));
  EXPECT_FALSE(secret.contains("stringData"));
  EXPECT_EQ(secret["type"], "Opaque");
  secret["type"] = "kubernetes.io/tls";
  EXPECT_EQ(
      messages(validate_builtin_create(info("", "Secret"), secret)),
      (std::vector<std::string>{"data[tls.key]: Required value", "data[tls.crt]: Required value"}));
}

TEST(ConfigMap, KeysAndImmutability) {
  json cm = config_map({{"name", "c"}, {"namespace", "default"}});
  cm["data"] = {{"..bad", "x"}, {"good.key", "y"}};
  cm["binaryData"] = {{"good.key", "eQ=="}};
  EXPECT_EQ(
      messages(validate_builtin_create(info("", "ConfigMap"), cm)),
      (std::vector<std::string>{
          "data[..bad]: Invalid value: \"..bad\": must not start with '..'",
          "data[good.key]: Invalid value: \"good.key\": duplicate of key present in binaryData",
          "binaryData[good.key]: Invalid value: \"good.key\": duplicate of key present in "
          "data"}));
  json old_cm = config_map({{"name", "c"}, {"namespace", "default"}, {"resourceVersion", "1"}});
  old_cm["immutable"] = true;
  old_cm["data"] = {{"a", "1"}};
  json new_cm = old_cm;
  new_cm["data"]["a"] = "2";
  EXPECT_EQ(
      messages(validate_builtin_update(info("", "ConfigMap"), old_cm, new_cm)),
      std::vector<std::string>{"data: Forbidden: field is immutable when `immutable` is set"});
}

TEST(Service, DefaultsAndClusterIps) {
  json service = {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", {{"name", "peers"}, {"namespace", "default"}}},
      {"spec", {{"selector", {{"app", "x"}}}, {"ports", json::array({{{"port", 80}}})}}}};
  default_builtin(info("", "Service"), service);
  EXPECT_EQ(service["spec"]["type"], "ClusterIP");
  EXPECT_EQ(service["spec"]["sessionAffinity"], "None");
  EXPECT_EQ(service["spec"]["ports"][0],
            json({{"port", 80}, {"protocol", "TCP"}, {"targetPort", 80}}));
  EXPECT_EQ(service["spec"]["ipFamilies"], json::array({"IPv4"}));
  EXPECT_EQ(service["status"], json({{"loadBalancer", json::object()}}));
  EXPECT_TRUE(validate_builtin_create(info("", "Service"), service).empty());

  ClusterIpAllocator allocator;
  json first = service;
  EXPECT_TRUE(allocator.allocate(first).empty());
  EXPECT_EQ(first["spec"]["clusterIP"], "10.96.0.1");
  EXPECT_EQ(first["spec"]["clusterIPs"], json::array({"10.96.0.1"}));
  json second = service;
  EXPECT_TRUE(allocator.allocate(second).empty());
  EXPECT_EQ(second["spec"]["clusterIP"], "10.96.0.2");
  json taken = service;
  taken["spec"]["clusterIP"] = "10.96.0.2";
  EXPECT_EQ(messages(allocator.allocate(taken)),
            std::vector<std::string>{"spec.clusterIPs: Invalid value: []string{\"10.96.0.2\"}: "
                                     "failed to allocate IP 10.96.0.2: provided IP is already "
                                     "allocated"});
  allocator.release(second);
  EXPECT_TRUE(allocator.allocate(taken).empty());
  json outside = service;
  outside["spec"]["clusterIP"] = "10.0.0.1";
  EXPECT_EQ(allocator.allocate(outside).at(0).message,
            "Invalid value: []string{\"10.0.0.1\"}: failed to allocate IP 10.0.0.1: the provided "
            "IP (10.0.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12");
  json headless = service;
  headless["spec"]["clusterIP"] = "None";
  EXPECT_TRUE(allocator.allocate(headless).empty());
  EXPECT_EQ(headless["spec"]["clusterIPs"], json::array({"None"}));
}

TEST(Service, ValidationMessages) {
  json service = {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", {{"name", "1peers"}, {"namespace", "default"}}},
      {"spec", {{"ports", json::array({{{"port", 80}}, {{"port", 70000}, {"name", "b"}}})}}}};
  default_builtin(info("", "Service"), service);
  EXPECT_EQ(messages(validate_builtin_create(info("", "Service"), service)),
            (std::vector<std::string>{
                "metadata.name: Invalid value: \"1peers\": a DNS-1035 label must consist of lower "
                "case alphanumeric characters or '-', start with an alphabetic character, and end "
                "with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
                "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.ports[0].name: Required value",
                "spec.ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.ports[1].targetPort: Invalid value: 70000: must be between 1 and 65535, "
                "inclusive"}));
}

TEST(Lease, DurationMustBePositive) {
  json lease = fixture("201-lease-create.json")["request"]["body"];
  lease["spec"]["leaseDurationSeconds"] = 0;
  EXPECT_EQ(messages(validate_builtin_create(info("coordination.k8s.io", "Lease"), lease)),
            std::vector<std::string>{
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"});
}

TEST(Events, TheNewApiRequiresWhatTheLegacyOneDoesNot) {
  const json event = {{"apiVersion", "events.k8s.io/v1"},
                      {"kind", "Event"},
                      {"metadata", {{"name", "e"}, {"namespace", "default"}}},
                      {"regarding", {{"kind", "Pod"}, {"name", "p"}, {"namespace", "default"}}},
                      {"note", "hello"},
                      {"type", "Normal"}};
  EXPECT_EQ(messages(validate_builtin_create(info("events.k8s.io", "Event"), event)),
            std::vector<std::string>{"eventTime: Required value"});
  json with_time = event;
  with_time["eventTime"] = "2026-11-21T23:01:50.000000Z";
  EXPECT_EQ(
      messages(validate_builtin_create(info("events.k8s.io", "Event"), with_time)),
      (std::vector<std::string>{
          "reportingController: Required value",
          // kube-apiserver checks the empty name as a qualified name too
          "reportingController: Invalid value: \"\": name part must be non-empty",
          "reportingController: Invalid value: \"\": name part must consist of alphanumeric "
          "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
          "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
          "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
          "reportingInstance: Required value", "action: Required value",
          "reason: Required value"}));
  // The legacy API takes an event without any of them, and checks no name rule of its own.
  json legacy = fixture("201-create-event-core-v1.json")["request"]["body"];
  legacy["metadata"]["name"] = "Upper.Case";
  EXPECT_TRUE(validate_builtin_create(info("", "Event"), legacy).empty());
  legacy["involvedObject"]["namespace"] = "other";
  EXPECT_EQ(
      messages(validate_builtin_create(info("", "Event"), legacy)),
      std::vector<std::string>{
          "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"});
}

}  // namespace
}  // namespace tessel::testing
