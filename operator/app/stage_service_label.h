// The label that marks the one replica serving the stage service: the chart's stage Service
// selects `tessel.dev/stage-service=serving` beside the pod labels, so that stage pods reach the
// Lease holder only (every replica serves HTTPS; only the leader serves the stage service).
//
// The leader labels its own Pod once its stage service listens, after taking the label off every
// other Pod of its namespace (a leader that died without cleaning up), and takes its own label
// off when it stops leading or shuts down.
#pragma once

#include <chrono>
#include <memory>
#include <stop_token>
#include <string>

#include "kube/client.h"
#include "kube/log.h"

namespace tessel::app {

inline constexpr const char* kStageServiceLabel = "tessel.dev/stage-service";
inline constexpr const char* kStageServiceServing = "serving";

struct StageServiceLabelOptions {
  std::string namespace_name;  // --namespace: where the operator's Pods run
  std::string pod_name;        // --pod-name: this replica's Pod
  // While leading, the label is checked (and put back) this often; a failed pass is retried
  // after the same time.
  std::chrono::milliseconds recheck = std::chrono::seconds(10);
  std::shared_ptr<const kube::Logger> logger;  // required
};

class StageServiceLabel {
 public:
  // `hub`'s field manager (ClientOptions::field_manager) names the patches; its request timeout
  // and retries bound how long release() can take.
  StageServiceLabel(kube::Client& hub, StageServiceLabelOptions options);

  // One pass, idempotent: lists the namespace's Pods that carry the label, takes it off every
  // one but this Pod (merge patches), then labels this Pod unless it has the label already.
  // Throws kube::ApiError (a Pod named --pod-name that does not exist: NotFound) or
  // kube::TransportError.
  void claim();

  // Takes the label off this Pod. Best effort: returns false after logging why it could not.
  bool release() noexcept;

  // While leading: claim() at once and again every options.recheck until `stop`, logging the
  // failures (a failed claim is retried, it ends nothing), then release().
  void run(std::stop_token stop);

 private:
  // Merge-patches the label of Pod `name`: `serving` when true, else removed.
  void set_label(const std::string& name, bool serving);

  kube::Client& hub_;
  StageServiceLabelOptions options_;
};

}  // namespace tessel::app
