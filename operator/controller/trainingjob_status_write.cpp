#include "kube/api_error.h"
#include "kube/object.h"
#include "operator/controller/conditions.h"
#include "operator/controller/labels.h"
#include "operator/controller/trainingjob_reconciler.h"
#include "operator/controller/trainingjob_reconciler_internal.h"

namespace tessel::controller {

using nlohmann::json;
using namespace trainingjob;

kube::ReconcileResult TrainingJobReconciler::succeed(const api::TrainingJob& job, json& status,
                                                     const std::optional<JobProgress>& progress,
                                                     const std::optional<FinalFigures>& finished,
                                                     int ranks) {
  const json& object = job.object;
  const int64_t generation = job.generation;
  json& conditions = status["conditions"];
  status["phase"] = "Succeeded";
  status["completionTime"] = now_text();
  if (std::optional<json> last = final_progress_status(
          progress, status.value("progress", json()), finished, job.spec.training.steps,
          double(job.spec.global_batch) * job.spec.model.seq_len, now_text())) {
    status["progress"] = std::move(*last);
  }
  set_condition(conditions, {"Running", "False", "Succeeded", "Training finished."}, generation,
                now_text());
  set_condition(conditions,
                {"Succeeded", "True", "Succeeded",
                 "All " + std::to_string(ranks) + " stage ranks finished " +
                     std::to_string(job.spec.training.steps) + " steps."},
                generation, now_text());
  const json loss = status.value("/progress/loss"_json_pointer, json());
  record(object, kube::EventType::kNormal, "Succeeded",
         "Trained " + std::to_string(job.spec.training.steps) + " steps" +
             (loss.is_number() ? "; final loss " + loss.dump() : std::string()) + ".");
  return write_final_status(job.namespace_name + "/" + job.name, object, std::move(status));
}

TrainingJobReconciler::StatusWrite TrainingJobReconciler::put_status(const json& job,
                                                                     const json& status) {
  if (job.value("status", json::object()) == status) return StatusWrite::kWritten;
  json updated = job;
  updated["status"] = status;
  try {
    hub_.update_status(jobs_resource_, updated);
  } catch (const kube::ApiError& e) {
    if (e.code() == 404) return StatusWrite::kGone;
    if (e.code() == 409) return StatusWrite::kConflict;  // a newer job is on its way to the cache
    throw;
  }
  return StatusWrite::kWritten;
}

kube::ReconcileResult TrainingJobReconciler::write_status(const json& job, json status,
                                                          kube::ReconcileResult then) {
  switch (put_status(job, status)) {
    case StatusWrite::kGone:
      return {};
    case StatusWrite::kConflict:
      return {.requeue = true};
    case StatusWrite::kWritten:
      break;
  }
  return then;
}

kube::ReconcileResult TrainingJobReconciler::write_final_status(const std::string& key,
                                                                const json& job, json status) {
  const kube::ReconcileResult result = write_status(job, std::move(status), {});
  // A conflict retries with the fold still there: let go first, and the retry would write the
  // progress of a fresh, empty registration (step 0) over the one the stages reported.
  if (!result.requeue) stages_.unregister_job(key);
  return result;
}

}  // namespace tessel::controller
