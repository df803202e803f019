// tessel-stage processes against the operator's stage service, as stage pods run: job.json names
// the service's address, the job's token file and the CA file; the ranks bind ports the kernel
// picks, join over TLS, train, and their progress arrives folded. A rank whose job.json names a
// token that is not its job's is refused and says so.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "operator/server/stage_service.h"
#include "placement/atomic_file.h"
#include "tests/stage/stage_process_support.h"
#include "tests/support/http_server.h"

namespace tessel::server {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using stage::testing::StageProcess;

class StageServiceProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessel-stage-service-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    placement::write_file_atomically((dir_ / "ca.crt").string(), ca_.ca_pem());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The tiny job of `stages` x `replicas` as the operator writes it for job `job_id`: the
  // service's address, with the token in its own file and the CA.
  std::string write_job(uint64_t job_id, int stages, int replicas, int steps,
                        const std::string& token) {
    nlohmann::json job = stage::testing::tiny_job(stages, replicas, 4, 2, "1f1b", steps);
    const std::string token_file = (dir_ / ("token-" + std::to_string(job_id))).string();
    placement::write_file_atomically(token_file, token + "\n");
    const std::string address = "127.0.0.1:" + std::to_string(service_.port());
    const std::string ca_file = (dir_ / "ca.crt").string();
    job["job_id"] = job_id;
    job["rendezvous"] = {{"address", address}, {"token_file", token_file}, {"ca_file", ca_file}};
    job["progress"] = {{"address", address}, {"token_file", token_file}, {"ca_file", ca_file}};
    const std::string path = (dir_ / ("job-" + std::to_string(job_id) + ".json")).string();
    placement::write_file_atomically(path, job.dump(2));
    return path;
  }

  testing::TestCertificateAuthority ca_;
  testing::TestCertificate cert_ = ca_.issue_server();
  StageService service_{"127.0.0.1:0", cert_.cert_pem, cert_.key_pem, nullptr};
  fs::path dir_;
};

TEST_F(StageServiceProcesses, TwoJobsTrainThroughTheServiceAndTheirProgressArrives) {
  constexpr int kSteps = 3;
  const std::string token_a = "a-token-0123456789abcdef01234567";
  const std::string token_b = "b-token-0123456789abcdef01234567";
  service_.register_job("ns/two-stages", 501, 2, token_a);
  service_.register_job("ns/two-replicas", 502, 2, token_b);
  const std::string job_a = write_job(501, 2, 1, kSteps, token_a);
  const std::string job_b = write_job(502, 1, 2, kSteps, token_b);
  std::vector<std::unique_ptr<StageProcess>> processes;
  for (int r = 0; r < 2; ++r) {
    processes.push_back(std::make_unique<StageProcess>(job_a, r));
    processes.push_back(std::make_unique<StageProcess>(job_b, r));
  }
  for (auto& p : processes) {
    ASSERT_EQ(p->finish(120s), 0) << p->stderr_text();
    EXPECT_TRUE(p->lines().empty()) << "progress went to stdout, not to the service";
  }
  for (const std::string key : {"ns/two-stages", "ns/two-replicas"}) {
    const JobProgress p = *service_.progress(key);
    EXPECT_EQ(p.world_size, 2) << key;
    EXPECT_EQ(p.started, 2) << key;
    EXPECT_EQ(p.done, 2) << key;
    EXPECT_EQ(p.step, kSteps) << key;
    EXPECT_EQ(p.total_steps, kSteps) << key;
    // Byte-level tokens: a first loss near ln(256) = 5.55, finite.
    EXPECT_TRUE(std::isfinite(p.loss)) << key;
    EXPECT_GT(p.loss, 3.0) << key;
    EXPECT_LT(p.loss, 7.0) << key;
    EXPECT_GT(p.tokens_per_s, 0) << key;
    EXPECT_TRUE(p.failures.empty()) << key << ": " << p.failures.front();
  }
}

TEST_F(StageServiceProcesses, ARankWithAnotherTokenIsRefusedAndSaysSo) {
  service_.register_job("ns/guarded", 503, 1, "the-real-token-0123456789abcdef0");
  const std::string job = write_job(503, 1, 1, 1, "a-stolen-token-0123456789abcdef0");
  StageProcess process(job, 0);
  EXPECT_NE(process.finish(120s), 0);
  EXPECT_NE(process.stderr_text().find("unknown job or wrong token"), std::string::npos)
      << process.stderr_text();
  EXPECT_EQ(process.stderr_text().find("the-real-token"), std::string::npos);
  EXPECT_EQ(service_.progress("ns/guarded")->started, 0);
}

}  // namespace
}  // namespace tessel::server
