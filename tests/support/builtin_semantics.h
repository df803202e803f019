// What kube-apiserver v1.26 does to the built-in kinds tessel uses beyond storing them:
// defaulting on create, and validation on create and update (metadata common to every kind,
// and each kind's own rules), with messages worded as kube-apiserver words them.
//
// Kinds: core/v1 Pod, Node, Namespace, Service, ConfigMap, Secret, ServiceAccount, Event;
// coordination.k8s.io/v1 Lease; events.k8s.io/v1 Event; the kinds an installation of tessel writes
// (apps/v1, policy/v1, rbac.authorization.k8s.io/v1, admission policies). Other kinds pass through
// untouched (metadata validation aside).
//
// A write goes: decode_error (400) -> apply_decode_defaults -> managed fields (managed_fields.h)
// -> apply_admission_defaults (create only) -> validate_builtin_create / _update (422).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/support/api_builtin_resources.h"
#include "tests/support/structural_schema.h"

namespace tessel::testing {

// Defaulting on create (Pod spec defaults, status.phase Pending, Namespace spec.finalizers and
// status.phase Active, Service clusterIP, ServiceAccount, Event, Lease, Node...): both steps
// below. Service cluster IPs are not allocated here (ClusterIpAllocator).
void default_builtin(const ApiResource& info, nlohmann::json& object);

// What decoding a request does for every write (create and update): the kind's Go defaults
// (a Pod's dnsPolicy, restartPolicy, container terminationMessagePath, imagePullPolicy,
// requests copied from limits..., a Namespace's kubernetes.io/metadata.name label, a Service's
// port protocol and targetPort) and the zero-valued fields its Go type always serialises
// (a Node's status.nodeInfo, an Event's eventTime: null, a container's resources: {}).
void apply_decode_defaults(const ApiResource& info, nlohmann::json& object);

// What admission plugins and the create strategy add after the field manager ran, on create
// only: a Pod's serviceAccountName, priority, preemptionPolicy, not-ready/unreachable
// tolerations, the projected service-account token volume (unless automountServiceAccountToken
// is false), status {phase: Pending, qosClass}; a Node's not-ready taint; a Namespace's
// spec.finalizers and status.phase; a Service's sessionAffinity, ipFamilies, status.
void apply_admission_defaults(const ApiResource& info, nlohmann::json& object);

std::vector<FieldError> validate_builtin_create(const ApiResource& info,
                                                const nlohmann::json& object);
// Includes the metadata checks kube-apiserver runs on every update, as often as it runs them
// (an error in metadata is reported by its generic check and again by the kind's own).
std::vector<FieldError> validate_builtin_update(const ApiResource& info,
                                                const nlohmann::json& old_object,
                                                const nlohmann::json& new_object);

// Metadata validation of a create (name or generateName with the kind's name rule,
// namespace, labels, annotations, ownerReferences, finalizers, managedFields);
// validate_builtin_create includes it. Custom resources use it too (names are DNS-1123
// subdomains for them).
std::vector<FieldError> validate_object_metadata(const ApiResource& info,
                                                 const nlohmann::json& object);
// Metadata validation of an update once (immutable name, namespace, uid, creationTimestamp;
// no new finalizers while terminating; resourceVersion given; labels, annotations...). A
// custom resource's update runs it twice, as kube-apiserver does.
std::vector<FieldError> validate_object_metadata_update(const nlohmann::json& old_object,
                                                        const nlohmann::json& new_object);

// The request body fails to decode into the kind's Go type (a 400 BadRequest, not a 422): the
// message of that Status, e.g. `Lease in version "v1" cannot be handled as a Lease: parsing
// time "..." as "2006-01-02T15:04:05.000000Z07:00": cannot parse " 23:00:00" as "T"`, or
// nullopt when the body decodes. Checks MicroTime and Time fields, a Secret's base64 data, and
// a webhook configuration's lists, timeoutSeconds and caBundle (base64).
std::optional<std::string> decode_error(const ApiResource& info, const nlohmann::json& object);

// Service cluster IPs from kube-apiserver's default service range 10.96.0.0/12. One per
// server; not synchronised.
class ClusterIpAllocator {
 public:
  // On create: gives a Service of type ClusterIP, NodePort or LoadBalancer without
  // spec.clusterIP the next free address, reserves the one it asks for, leaves headless ("None")
  // and ExternalName Services without; sets spec.clusterIP and spec.clusterIPs. Errors (taken or
  // out-of-range address, range exhausted) are worded as kube-apiserver words them.
  std::vector<FieldError> allocate(nlohmann::json& service);
  // When the Service is deleted.
  void release(const nlohmann::json& service);

 private:
  std::set<std::uint32_t> used_;
  std::uint32_t next_ = 1;  // offset into the range of the next address to try
};

}  // namespace tessel::testing
