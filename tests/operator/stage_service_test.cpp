// The operator's stage service over real TLS sockets on 127.0.0.1: two jobs served at once, each
// pod's Rendezvous and StageProgress calls authenticated by its job's token, every other caller
// refused with an error that names no token, and the progress folded per job.
#include "operator/server/stage_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "proto/rendezvous/rendezvous_client.h"
#include "tessel/v1alpha1/progress.grpc.pb.h"
#include "tests/support/http_server.h"

namespace tessel::server {
namespace {

namespace pb = tessel::v1alpha1;
using namespace std::chrono_literals;

const std::string kTokenA = "job-a-token-0123456789abcdef0123";
const std::string kTokenB = "job-b-token-fedcba9876543210fedc";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// How often on_progress named each job, awaitable.
class ProgressCalls {
 public:
  void called(const std::string& key) {
    {
      const std::lock_guard lock(mutex_);
      ++calls_[key];
    }
    changed_.notify_all();
  }
  int count(const std::string& key) {
    const std::lock_guard lock(mutex_);
    return calls_[key];
  }
  bool wait_for(const std::string& key, int at_least, std::chrono::seconds within = 10s) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, within, [&] { return calls_[key] >= at_least; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, int> calls_;
};

std::shared_ptr<grpc::ChannelCredentials> trusting(const std::string& ca_pem) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_pem;
  return grpc::SslCredentials(options);
}

pb::StageEvent event(uint64_t job_id, int rank, uint64_t sequence) {
  pb::StageEvent e;
  e.mutable_tasklet()->set_job_id(job_id);
  e.mutable_tasklet()->set_rank(rank);
  e.mutable_tasklet()->set_stage(rank);
  e.mutable_tasklet()->set_replica(0);
  e.mutable_tasklet()->set_incarnation(77);
  e.set_sequence(sequence);
  return e;
}
pb::StageEvent started(uint64_t job_id, int rank, int world, int64_t steps) {
  pb::StageEvent e = event(job_id, rank, 1);
  e.mutable_started()->set_world_size(world);
  e.mutable_started()->set_steps(steps);
  return e;
}
pb::StageEvent step(uint64_t job_id, int rank, int64_t n, double loss) {
  pb::StageEvent e = event(job_id, rank, static_cast<uint64_t>(n) + 1);
  e.mutable_step()->set_step(n);
  e.mutable_step()->set_loss(loss);
  e.mutable_step()->set_tokens_per_s(2000);
  return e;
}

// One Report stream as a stage process opens it: TLS (or not), with a bearer token (or not).
class ProgressStream {
 public:
  ProgressStream(int port, std::shared_ptr<grpc::ChannelCredentials> credentials,
                 const std::string& token)
      : stub_(pb::StageProgress::NewStub(
            grpc::CreateChannel("127.0.0.1:" + std::to_string(port), std::move(credentials)))) {
    if (!token.empty()) context_.AddMetadata("authorization", "Bearer " + token);
    context_.set_deadline(std::chrono::system_clock::now() + 20s);
    call_ = stub_->Report(&context_);
  }

  // Sends the event and returns the server's acknowledgement (nullopt: the stream ended).
  std::optional<uint64_t> send(const pb::StageEvent& event) {
    if (!call_->Write(event)) return std::nullopt;
    pb::ReportReply reply;
    if (!call_->Read(&reply)) return std::nullopt;
    return reply.received();
  }
  grpc::Status finish() {
    call_->WritesDone();
    pb::ReportReply reply;
    while (call_->Read(&reply)) {
    }
    return call_->Finish();
  }

 private:
  std::unique_ptr<pb::StageProgress::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::StageEvent, pb::ReportReply>> call_;
};

class StageServiceTest : public ::testing::Test {
 protected:
  StageServiceTest()
      : cert_(ca_.issue_server()),
        service_("127.0.0.1:0", cert_.cert_pem, cert_.key_pem,
                 [this](const std::string& key) { calls_.called(key); }) {
    service_.register_job("team-a/fables", 11, 2, kTokenA);
    service_.register_job("team-b/poems", 12, 1, kTokenB);
  }

  // Sends one event on a fresh stream; the stream's final status.
  grpc::Status refused(std::shared_ptr<grpc::ChannelCredentials> credentials,
                       const std::string& token, const pb::StageEvent& e) {
    ProgressStream stream(service_.port(), std::move(credentials), token);
    EXPECT_EQ(stream.send(e), std::nullopt);
    return stream.finish();
  }

  rendezvous::RendezvousClient rendezvous_client(uint64_t job_id, int rank, int world,
                                                 const std::string& token,
                                                 std::shared_ptr<grpc::ChannelCredentials> creds) {
    rendezvous::Identity id;
    id.job_id = job_id;
    id.rank = rank;
    id.stage = rank;
    id.incarnation = 500 + static_cast<uint64_t>(rank);
    id.world_size = world;
    id.token = token;
    return rendezvous::RendezvousClient("127.0.0.1:" + std::to_string(service_.port()),
                                        std::move(creds), id);
  }

  testing::TestCertificateAuthority ca_;
  testing::TestCertificate cert_;
  ProgressCalls calls_;
  StageService service_;
};

TEST_F(StageServiceTest, TwoJobsRendezvousOverTlsEachWithItsToken) {
  auto rank = [&](uint64_t job, int r, int world, const std::string& token) {
    return std::async(std::launch::async, [=, this] {
      return rendezvous_client(job, r, world, token, trusting(ca_.ca_pem()))
          .join("10.0." + std::to_string(job) + "." + std::to_string(r) + ":4000", 20s);
    });
  };
  auto a0 = rank(11, 0, 2, kTokenA);
  auto a1 = rank(11, 1, 2, kTokenA);
  auto b0 = rank(12, 0, 1, kTokenB);
  const std::vector<std::string> a = {"10.0.11.0:4000", "10.0.11.1:4000"};
  EXPECT_EQ(a0.get().addresses, a);
  EXPECT_EQ(a1.get().addresses, a);
  EXPECT_EQ(b0.get().addresses, std::vector<std::string>{"10.0.12.0:4000"});
}

TEST_F(StageServiceTest, ARendezvousWithAnotherJobsTokenIsRefused) {
  try {
    rendezvous_client(11, 0, 2, kTokenB, trusting(ca_.ca_pem())).join("10.0.0.1:4000", 5s);
    FAIL() << "joined with job b's token";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "job 11: unknown job or wrong token")) << e.what();
    EXPECT_FALSE(contains(e.what(), kTokenA)) << e.what();
    EXPECT_FALSE(contains(e.what(), kTokenB)) << e.what();
    EXPECT_FALSE(contains(e.what(), "gave up")) << "a refusal is not retried: " << e.what();
  }
}

TEST_F(StageServiceTest, TwoJobsReportOverTlsAndTheirProgressIsFoldedApart) {
  ProgressStream a0(service_.port(), trusting(ca_.ca_pem()), kTokenA);
  ProgressStream a1(service_.port(), trusting(ca_.ca_pem()), kTokenA);
  ProgressStream b0(service_.port(), trusting(ca_.ca_pem()), kTokenB);
  EXPECT_EQ(a0.send(started(11, 0, 2, 3)), 1u);
  EXPECT_EQ(a1.send(started(11, 1, 2, 3)), 1u);
  EXPECT_EQ(b0.send(started(12, 0, 1, 5)), 1u);
  EXPECT_EQ(a0.send(step(11, 0, 1, 5.25)), 2u);
  EXPECT_EQ(service_.progress("team-a/fables")->step, -1);  // rank 1 has not done step 1
  EXPECT_EQ(a1.send(step(11, 1, 1, 5.25)), 2u);
  EXPECT_EQ(b0.send(step(12, 0, 1, 4.0)), 2u);
  EXPECT_EQ(b0.send(step(12, 0, 2, 3.5)), 3u);

  const JobProgress a = *service_.progress("team-a/fables");
  EXPECT_EQ(a.world_size, 2);
  EXPECT_EQ(a.started, 2);
  EXPECT_EQ(a.step, 1);
  EXPECT_DOUBLE_EQ(a.loss, 5.25);
  EXPECT_EQ(a.total_steps, 3);
  const JobProgress b = *service_.progress("team-b/poems");
  EXPECT_EQ(b.step, 2);
  EXPECT_DOUBLE_EQ(b.loss, 3.5);
  EXPECT_EQ(b.total_steps, 5);
  EXPECT_EQ(calls_.count("team-a/fables"), 4);
  EXPECT_EQ(calls_.count("team-b/poems"), 3);

  // Done on one rank, a failure on the other.
  pb::StageEvent done = event(11, 0, 3);
  done.mutable_done()->set_step(1);
  EXPECT_EQ(a0.send(done), 3u);
  pb::StageEvent failed = event(11, 1, 3);
  failed.mutable_error()->set_message("rank 0 hung up");
  EXPECT_EQ(a1.send(failed), 3u);
  const JobProgress ended = *service_.progress("team-a/fables");
  EXPECT_EQ(ended.done, 1);
  EXPECT_EQ(ended.failures, std::vector<std::string>{"rank 1 (stage 1 replica 0): rank 0 hung up"});
  EXPECT_TRUE(a0.finish().ok());
  EXPECT_TRUE(a1.finish().ok());
  EXPECT_TRUE(b0.finish().ok());
}

TEST_F(StageServiceTest, AnEventSentAgainIsAcknowledgedButFoldedOnce) {
  ProgressStream first(service_.port(), trusting(ca_.ca_pem()), kTokenB);
  EXPECT_EQ(first.send(started(12, 0, 1, 5)), 1u);
  EXPECT_EQ(first.send(step(12, 0, 1, 4.0)), 2u);
  EXPECT_TRUE(first.finish().ok());
  // The process's stream broke before it saw the acknowledgement: it sends again.
  ProgressStream again(service_.port(), trusting(ca_.ca_pem()), kTokenB);
  EXPECT_EQ(again.send(step(12, 0, 1, 4.0)), 2u);
  EXPECT_TRUE(again.finish().ok());
  EXPECT_EQ(calls_.count("team-b/poems"), 2);
}

TEST_F(StageServiceTest, ProgressWithoutATokenIsRefused) {
  const grpc::Status status = refused(trusting(ca_.ca_pem()), "", started(11, 0, 2, 3));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(contains(status.error_message(), "no 'authorization: Bearer <token>' metadata"))
      << status.error_message();
  EXPECT_EQ(calls_.count("team-a/fables"), 0);
  EXPECT_EQ(service_.progress("team-a/fables")->started, 0);
}

TEST_F(StageServiceTest, ProgressWithAWrongTokenIsRefusedNamingNoToken) {
  const std::string wrong = "not-the-token-of-any-job-0123456";
  const grpc::Status status = refused(trusting(ca_.ca_pem()), wrong, started(11, 0, 2, 3));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(contains(status.error_message(), "job 11: unknown job, or the bearer token"))
      << status.error_message();
  EXPECT_FALSE(contains(status.error_message(), wrong));
  EXPECT_FALSE(contains(status.error_message(), kTokenA));
  EXPECT_EQ(calls_.count("team-a/fables"), 0);
}

TEST_F(StageServiceTest, ProgressWithAnotherJobsTokenIsRefused) {
  const grpc::Status status = refused(trusting(ca_.ca_pem()), kTokenB, started(11, 0, 2, 3));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(contains(status.error_message(), kTokenA));
  EXPECT_FALSE(contains(status.error_message(), kTokenB));
  EXPECT_EQ(service_.progress("team-a/fables")->started, 0);
  EXPECT_EQ(service_.progress("team-b/poems")->started, 0);
}

TEST_F(StageServiceTest, ProgressWithAMalformedAuthorizationIsRefused) {
  // A token without "Bearer " is not taken as one.
  grpc::ClientContext context;
  context.AddMetadata("authorization", kTokenA);
  auto stub = pb::StageProgress::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(service_.port()), trusting(ca_.ca_pem())));
  auto call = stub->Report(&context);
  call->Write(started(11, 0, 2, 3));
  call->WritesDone();
  pb::ReportReply reply;
  EXPECT_FALSE(call->Read(&reply));
  const grpc::Status status = call->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(contains(status.error_message(), kTokenA));
}

TEST_F(StageServiceTest, ARankOutsideTheJobIsRefused) {
  const grpc::Status status = refused(trusting(ca_.ca_pem()), kTokenA, started(11, 2, 2, 3));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(contains(status.error_message(), "tasklet.rank 2 is out of range [0, 2)"))
      << status.error_message();
}

TEST_F(StageServiceTest, APlainTextClientIsRefused) {
  const grpc::Status status =
      refused(grpc::InsecureChannelCredentials(), kTokenA, started(11, 0, 2, 3));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_EQ(service_.progress("team-a/fables")->started, 0);
  try {
    rendezvous_client(11, 0, 2, kTokenA, grpc::InsecureChannelCredentials())
        .join("10.0.0.1:4000", 1s);
    FAIL() << "a plain-text rendezvous was served";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "rendezvous 127.0.0.1:")) << e.what();
  }
}

TEST_F(StageServiceTest, AClientThatDoesNotTrustTheCaIsRefused) {
  const testing::TestCertificateAuthority other;
  const grpc::Status status = refused(trusting(other.ca_pem()), kTokenA, started(11, 0, 2, 3));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_TRUE(contains(status.error_message(), "CERTIFICATE_VERIFY_FAILED") ||
              contains(status.error_message(), "handshake"))
      << status.error_message();
  EXPECT_EQ(service_.progress("team-a/fables")->started, 0);
}

TEST_F(StageServiceTest, RegisteringAgainKeepsTheProgressAndANewTokenStartsOver) {
  ProgressStream stream(service_.port(), trusting(ca_.ca_pem()), kTokenB);
  EXPECT_EQ(stream.send(started(12, 0, 1, 5)), 1u);
  EXPECT_TRUE(stream.finish().ok());
  service_.register_job("team-b/poems", 12, 1, kTokenB);
  EXPECT_EQ(service_.progress("team-b/poems")->started, 1);
  const std::string rotated = "job-b-rotated-0123456789abcdef01";
  service_.register_job("team-b/poems", 12, 1, rotated);
  EXPECT_EQ(service_.progress("team-b/poems")->started, 0);
  EXPECT_EQ(refused(trusting(ca_.ca_pem()), kTokenB, started(12, 0, 1, 5)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

// An unregistered job's rendezvous is refused. Its processes are being stopped: their last
// progress events are acknowledged (or each would wait out its 10 s exit flush, and the next
// attempt's pods, which take the same names, with it) and dropped.
TEST_F(StageServiceTest, AnUnregisteredJobIsNoLongerServed) {
  service_.unregister_job("team-a/fables");
  service_.unregister_job("team-a/fables");  // again: nothing to do
  EXPECT_EQ(service_.progress("team-a/fables"), std::nullopt);
  try {
    rendezvous_client(11, 0, 2, kTokenA, trusting(ca_.ca_pem())).join("10.0.0.1:4000", 5s);
    FAIL() << "an unregistered job's rank joined";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "job 11: unknown job or wrong token")) << e.what();
  }
  {
    ProgressStream stream(service_.port(), trusting(ca_.ca_pem()), kTokenA);
    EXPECT_EQ(stream.send(started(11, 0, 2, 3)), 1u);
    EXPECT_EQ(stream.send(step(11, 0, 1, 4.0)), 2u);
    EXPECT_TRUE(stream.finish().ok());
  }
  EXPECT_EQ(service_.progress("team-a/fables"), std::nullopt);  // folded nowhere
  EXPECT_EQ(calls_.count("team-a/fables"), 0);
  EXPECT_EQ(refused(trusting(ca_.ca_pem()), kTokenB, started(11, 0, 2, 3)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);  // another job's token still is no token
  EXPECT_EQ(refused(trusting(ca_.ca_pem()), kTokenA, started(11, 2, 2, 3)).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(service_.progress("team-b/poems").has_value());
}

// Only the last 64 jobs let go are acknowledged so: the 65th before is refused like any unknown
// job, and registering an id again serves it anew.
TEST_F(StageServiceTest, OnlyTheLastSixtyFourJobsLetGoAreAcknowledged) {
  service_.unregister_job("team-a/fables");
  for (uint64_t id = 100; id < 164; ++id) {
    service_.register_job("team-c/job-" + std::to_string(id), id, 1, kTokenB);
    service_.unregister_job("team-c/job-" + std::to_string(id));
  }
  EXPECT_EQ(refused(trusting(ca_.ca_pem()), kTokenA, started(11, 0, 2, 3)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  {
    ProgressStream stream(service_.port(), trusting(ca_.ca_pem()), kTokenB);
    EXPECT_EQ(stream.send(started(100, 0, 1, 3)), 1u);  // the oldest of the 64 kept
    EXPECT_TRUE(stream.finish().ok());
  }
  service_.register_job("team-a/fables", 11, 2, kTokenA);
  ProgressStream stream(service_.port(), trusting(ca_.ca_pem()), kTokenA);
  EXPECT_EQ(stream.send(started(11, 0, 2, 3)), 1u);
  EXPECT_TRUE(stream.finish().ok());
  EXPECT_EQ(service_.progress("team-a/fables")->started, 1);
}

TEST_F(StageServiceTest, BadRegistrationsAreRefusedNamingTheJobAndTheBound) {
  auto message = [&](const std::string& key, uint64_t id, int world, const std::string& token) {
    try {
      service_.register_job(key, id, world, token);
    } catch (const StageServiceError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message("ns/x", 20, 0, kTokenA),
            "stage service: job ns/x: world size must be in [1, 8192], got 0");
  EXPECT_EQ(message("ns/x", 20, 2, "short"),
            "stage service: job ns/x: the token must have at least 16 bytes, it has 5");
  EXPECT_EQ(message("ns/x", 11, 2, kTokenA),
            "stage service: job ns/x: job id 11 is already served for job team-a/fables");
  EXPECT_EQ(service_.progress("ns/x"), std::nullopt);
}

TEST(StageServiceStart, ABadCertificateOrKeyIsNamedAtStart) {
  const testing::TestCertificateAuthority ca;
  const testing::TestCertificate one = ca.issue_server();
  const testing::TestCertificate two = ca.issue_server();
  auto message = [](const std::string& cert, const std::string& key) {
    try {
      StageService service("127.0.0.1:0", cert, key, nullptr);
    } catch (const StageServiceError& e) {
      return std::string(e.what());
    }
    return std::string("(started)");
  };
  EXPECT_EQ(message("not a certificate", one.key_pem),
            "stage service on 127.0.0.1:0: the certificate is not PEM (no -----BEGIN line)");
  EXPECT_EQ(message(one.cert_pem, "not a key"),
            "stage service on 127.0.0.1:0: the key is not PEM (no -----BEGIN line)");
  EXPECT_EQ(message(one.cert_pem, two.key_pem),
            "stage service on 127.0.0.1:0: the key is not the certificate's (the first in the "
            "chain)");
  EXPECT_TRUE(contains(
      message("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", one.key_pem),
      "the certificate does not parse"));
}

TEST(StageServiceStart, ATakenPortIsNamed) {
  const testing::TestCertificateAuthority ca;
  const testing::TestCertificate cert = ca.issue_server();
  StageService first("127.0.0.1:0", cert.cert_pem, cert.key_pem, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(first.port());
  try {
    StageService second(address, cert.cert_pem, cert.key_pem, nullptr);
    FAIL() << "two services on " << address;
  } catch (const StageServiceError& e) {
    EXPECT_TRUE(contains(e.what(), "cannot listen on " + address)) << e.what();
  }
}

}  // namespace
}  // namespace tessel::server
