// The fault-injection suite's fixture (ctest label chaos): the operator e2e (hub + 2 members,
// process kubelets running real tessel-stage processes, tessel-operator as its own process from
// the charts) with a fleet of 3 one-GPU nodes per member, so that the 4-GPU example job fits again
// without a node it lost, and the job's status written every 0.2 s, so that the steps the status
// shows trail the stages' by a few steps only.
//
// While a case runs, two watchers poll the clusters through the API every 100 ms:
//   - PodWatch: every member's pods of the run's jobs; a duplicate is a moment at which two pods
//     of one tasklet (job, stage, replica) are both not Succeeded or Failed, in any member;
//   - JobWatch: the TrainingJob; its samples give the step before a fault, the step resumed from
//     (status.progress.lastCheckpointStep of the first progress of the next attempt: every rank
//     started, none checkpointed yet) and the time to recover.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/chaos/chaos_result.h"
#include "tests/chaos/stage_service_proxy.h"
#include "tests/operator_e2e/e2e_fixture.h"

namespace tessel::testing {

// The chaos jobs' checkpoint interval (steps): what at most one fault may cost.
inline constexpr int64_t kCheckpointInterval = 10;
// How long a stage waits on a silent peer before it gives the job up
// (spec.network.ioTimeoutSeconds).
inline constexpr double kChaosIoTimeoutSeconds = 3;
// A generous bound for any one wait of the suite (never a measured figure).
inline constexpr std::chrono::seconds kChaosTimeout{180};

using SteadyTime = std::chrono::steady_clock::time_point;

// Polls the pods of the run's jobs in every member (see the header comment).
class PodWatch {
 public:
  explicit PodWatch(std::vector<std::shared_ptr<kube::Client>> members, std::string namespace_);
  ~PodWatch();
  PodWatch(const PodWatch&) = delete;
  PodWatch& operator=(const PodWatch&) = delete;

  // Moments (polls) at which some tasklet had two live pods, and what they were.
  int duplicates() const;
  std::vector<std::string> duplicate_reports() const;
  int polls() const { return polls_.load(); }

 private:
  void poll();

  std::vector<std::shared_ptr<kube::Client>> members_;
  std::string namespace_;
  mutable std::mutex mutex_;
  std::vector<std::string> reports_;
  std::atomic<int> polls_{0};
  std::jthread thread_;
};

// One read of a TrainingJob by JobWatch.
struct JobSample {
  SteadyTime at;
  std::string phase;
  int64_t restarts = 0;
  int64_t resizes = 0;    // elastic regrowths (not restarts)
  int64_t replicas = -1;  // status.replicas: the current width
  double loss = -1;       // status.progress.loss; -1: none
  int64_t step = -1;
  int64_t checkpoint = -1;  // status.progress.lastCheckpointStep
  std::string updated;      // status.progress.updatedAt
  nlohmann::json status;
  // The start attempt: every restart and every regrowth starts the stages again.
  int64_t attempt() const { return restarts + resizes; }
};

class JobWatch {
 public:
  JobWatch(std::shared_ptr<kube::Client> hub, std::string namespace_, std::string name);
  ~JobWatch();
  JobWatch(const JobWatch&) = delete;
  JobWatch& operator=(const JobWatch&) = delete;

  std::vector<JobSample> samples() const;
  std::optional<JobSample> latest() const;

 private:
  std::shared_ptr<kube::Client> hub_;
  kube::ResourceInfo jobs_;
  std::string namespace_, name_;
  mutable std::mutex mutex_;
  std::vector<JobSample> samples_;
  std::jthread thread_;
};

// Field `field` ("status", "reason", "message") of the condition `type` in a job's status; ""
// when the status has no such condition.
std::string condition_field(const nlohmann::json& status, const std::string& type,
                            const std::string& field);

// What a fault that restarts the stages cost, from JobWatch's samples.
struct Recovery {
  int64_t last_step = -1;        // newest status step before the fault
  int64_t last_checkpoint = -1;  // newest status checkpoint step before the fault
  int64_t resumed_from = -1;     // the next attempt's first progress: its checkpoint step
  double recover_s = -1;         // fault -> Running, past resumed_from
  bool recovered = false;
  std::string failure;  // the Failed condition's reason: message, when the job failed instead
};
// `attempt_before`: JobSample::attempt() before the fault.
Recovery recovery_after(const std::vector<JobSample>& samples, SteadyTime fault,
                        int64_t attempt_before);

class ChaosE2e : public OperatorE2e {
 protected:
  int nodes_per_member() const override { return 3; }
  // The job status every 0.2 s, and the stage pods dialling the stage Service (its proxy here)
  // rather than one replica.
  std::vector<std::string> more_hub_values() const override {
    return {"statusIntervalSeconds=0.2",
            "stageService.advertise=\"" + stage_service_address() + "\""};
  }
  // HOST:PORT the stage pods dial for the stage Service: here its proxy on this machine's
  // loopback, which the pods reach as they share the host's network.
  virtual std::string stage_service_address() const {
    return "127.0.0.1:" + std::to_string(stage_service_.port());
  }
  // The loopback port of the stage Service's proxy (for a forwarder that pods elsewhere dial).
  int stage_service_port() const { return stage_service_.port(); }
  void TearDown() override;

  // The example job (examples/trainingjobs/fables.yaml) made small for a fault: `steps` steps,
  // a checkpoint every kCheckpointInterval steps in a folder of this machine's that every stage
  // opens directly (job.json's absolute path, which the process kubelet does not rewrite: a
  // folder every node sees, as a network file system would be; the hostPath volume of that path
  // is each node's own directory and goes unused), a restart after 1 s of
  // backoff, at most `max_restarts`, stages that give a silent peer kChaosIoTimeoutSeconds.
  // Applied with kubectl; returns the folder of its checkpoints.
  std::string apply_chaos_job(const std::string& name, int steps, int max_restarts = 3,
                              const std::function<void(nlohmann::json&)>& edit = {});

  // Starts the watchers: PodWatch over the run's jobs, and JobWatch over `name`.
  void watch_pods();
  void watch(const std::string& name);

  // The index in operators_ of the replica that holds the run's Lease; -1 when none does.
  int leader();
  // restart_operator(index) (SIGKILL, then the same process again), one at a time with the
  // kubelet's restarts below.
  void kill_and_restart_operator(size_t index);
  // start_operator(replica), one at a time with the kubelet's restarts below.
  void start_follower(const std::string& replica);
  // Sends `signal` to operators_[index] (SIGSTOP, SIGCONT).
  void signal_operator(size_t index, int signal);
  // Times the kubelet's part (below) restarted a replica that had exited on its own.
  int operator_exits() const { return operator_exits_.load(); }

  // Waits until the job is Running with status step >= `step`; fails the test otherwise.
  JobSample wait_for_step(const std::string& name, int64_t step);

  // A live stage pod of the job: its member, name, node and rank; fails the test when none.
  struct StagePod {
    int member = -1;
    std::string name, node;
    int rank = -1;
  };
  StagePod running_stage_pod(const std::string& name, int rank = -1);
  // The pid of the tessel-stage process of a pod (found by its working directory, the pod's
  // directory on the process kubelet); -1 when there is none.
  int stage_pid(const StagePod& pod);

  // Deletes the job and waits until nothing of it is left; returns how many objects were left
  // when the wait ended (0 unless the operator leaked).
  int delete_and_count_leftovers(const std::string& name);

  // The duplicates PodWatch saw (each reported as a test failure too).
  int duplicates_seen();

  // Fills the figures of a restart from JobWatch, checks the bounds (steps lost <= `bound`, the
  // resume from the newest checkpoint before the fault) and records the row.
  ChaosResult finish_restart_case(const std::string& case_name, const std::string& fault_text,
                                  const std::string& job, SteadyTime fault, int64_t restarts_before,
                                  int64_t bound);

  void SetUp() override;

  std::unique_ptr<PodWatch> pod_watch_;
  std::unique_ptr<JobWatch> job_watch_;

 private:
  // The kubelet's restartPolicy Always for the Deployment's pods: a replica that exits (an
  // operator that loses its Lease exits, as client-go's leader election makes controllers do) is
  // started again on its ports within 200 ms.
  void restart_exited_operators(std::stop_token stop);

  // The serving replica's stage port: the Pod labelled tessel.dev/stage-service=serving.
  int serving_stage_port(kube::Client& hub);

  StageServiceProxy stage_service_;
  std::mutex operators_mutex_;  // operators_ between the test and the restarter
  std::atomic<int> operator_exits_{0};
  std::vector<std::string> restart_errors_;  // under operators_mutex_
  std::jthread restarter_;
};

}  // namespace tessel::testing
