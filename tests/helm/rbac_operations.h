// The catalogue of API calls tessel's product makes, each named and made through kube/'s client
// as the product's code makes it (same verb, resource, subresource and scope), for the test that
// proves the charts' RBAC is needed rule by rule (chart_rbac_test.cpp). Where the product reads
// an object before writing it, the read that feeds a call is made with an admin client (the
// product's read comes from its informer cache, which its list and watch calls fill).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kube/client.h"
#include "kube/resource.h"

namespace tessel::testing::helm {

// Whose identity makes a call: the hub operator's ServiceAccount (helm/tessel), the identity of
// the operator's kubeconfig for a member (helm/tessel-member's operatorAccess), the prober's
// ServiceAccount (helm/tessel-member's prober).
enum class Identity { kHubOperator, kMemberOperator, kProber };
std::string_view to_string(Identity identity);
// Whether the identity's calls go to the hub (else to the member).
bool calls_hub(Identity identity);

// What the calls act on: the operator's and the prober's flags as the rendered charts set them,
// and the names of the objects the calls need (each call's prepare makes them when missing).
struct OperationScope {
  // The hub operator's flags (the rendered Deployment's args).
  std::string operator_namespace;  // --namespace: the hub release's namespace
  std::string watch_namespace;     // --watch-namespace; "" for every namespace
  std::string member_selector;     // --member-selector
  std::string hub_id;              // --hub-id
  std::string lease_name;          // --lease-name
  std::string prober_namespace;    // --prober-namespace: the member release's namespace
  // The prober's flags (the rendered DaemonSet's args).
  std::string peer_selector;    // --peer-selector
  std::string peers_configmap;  // --peers-configmap
  // A TrainingJob's namespace, in the hub and in the member (the operator puts a job's objects
  // in the job's namespace in every member), and the objects the calls are about.
  std::string job_namespace;
  std::string job_name;
  std::string member_name;   // a MemberCluster (cluster-scoped: unique per test)
  std::string node_name;     // the prober's own Node, in the member
  bool create_node = false;  // make that Node (an API test server); else it exists (a real one)
  std::string pod_image;     // the stage pods' image (they never start: see the pods' selector)
  kube::ResourceInfo jobs, members;  // the CRDs' served resources
};

struct Operation {
  std::string name;  // "operator: list TrainingJobs across namespaces"
  Identity identity;
  // The request as RBAC sees it: verb, resource ("trainingjobs/status.tessel.dev", "pods"),
  // where ("cluster-wide", "all namespaces", "in <namespace>").
  std::string verb, resource, where;
  // Makes what the call needs with an admin client of the call's cluster and returns what the
  // call is handed (the object to write, say).
  std::function<nlohmann::json(kube::Client& admin)> prepare;
  // The call, with a client of `identity`; throws kube::ApiError when refused.
  std::function<void(kube::Client& client, const nlohmann::json& prepared)> call;
};

// Every call, in the order: hub operator, member operator, prober. `scope` must outlive them.
std::vector<Operation> operation_catalogue(const OperationScope& scope);

// "verb resource where", for messages.
std::string describe(const Operation& operation);

}  // namespace tessel::testing::helm
