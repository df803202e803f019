// The stage service (operator/server) as the TrainingJob reconciler sees it
// (controller::StageChannel), so the controller library does not depend on gRPC.
#pragma once

#include "operator/controller/job_progress.h"
#include "operator/server/stage_service.h"

namespace tessel::app {

class StageServiceChannel final : public controller::StageChannel {
 public:
  explicit StageServiceChannel(server::StageService& service) : service_(service) {}
  void register_job(const std::string& key, uint64_t job_id, int world_size,
                    const std::string& token) override {
    service_.register_job(key, job_id, world_size, token);
  }
  void unregister_job(const std::string& key) override { service_.unregister_job(key); }
  std::optional<controller::JobProgress> progress(const std::string& key) const override {
    return service_.progress(key);
  }

 private:
  server::StageService& service_;
};

}  // namespace tessel::app
