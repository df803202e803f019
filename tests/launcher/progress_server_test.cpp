// Stage progress over gRPC: a stage process's reporter and the launcher's server, over real
// sockets on 127.0.0.1.
#include "noderuntime/launcher/progress_server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "noderuntime/stage/grpc_progress_reporter.h"
#include "tessel/v1alpha1/progress.grpc.pb.h"
#include "tests/chaos/stage_service_proxy.h"
#include "tests/held_port.h"

namespace tessel::launcher {
namespace {

using namespace std::chrono_literals;

pb::Tasklet tasklet(uint64_t job_id, int rank, uint64_t incarnation = 7) {
  pb::Tasklet t;
  t.set_job_id(job_id);
  t.set_rank(rank);
  t.set_stage(rank);
  t.set_replica(0);
  t.set_incarnation(incarnation);
  return t;
}

pb::StageEvent step(int64_t n) {
  pb::StageEvent e;
  e.mutable_step()->set_step(n);
  e.mutable_step()->set_loss(5.0 - 0.1 * static_cast<double>(n));
  return e;
}

// Takes events until `count` have arrived or `within` has passed.
std::vector<pb::StageEvent> take(ProgressServer& server, size_t count,
                                 std::chrono::milliseconds within = 10s) {
  std::vector<pb::StageEvent> all;
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (all.size() < count && std::chrono::steady_clock::now() < deadline) {
    pollfd fd{server.wake_fd(), POLLIN, 0};
    ::poll(&fd, 1, 50);
    for (pb::StageEvent& e : server.take()) all.push_back(std::move(e));
  }
  return all;
}

TEST(ProgressServer, EventsArriveOnceInOrderWithTheTaskletAndSequence) {
  ProgressServer server(42);
  {
    stage::GrpcProgressReporter reporter(tasklet(42, 1), server.address());
    for (int n = 1; n <= 50; ++n) reporter.report(step(n));
    EXPECT_TRUE(reporter.flush(10s));
  }
  const std::vector<pb::StageEvent> events = take(server, 50);
  ASSERT_EQ(events.size(), 50u);
  for (int n = 1; n <= 50; ++n) {
    const pb::StageEvent& e = events[n - 1];
    EXPECT_EQ(e.sequence(), static_cast<uint64_t>(n));
    EXPECT_EQ(e.step().step(), n);
    EXPECT_EQ(e.tasklet().rank(), 1);
    EXPECT_EQ(e.tasklet().job_id(), 42u);
  }
  EXPECT_TRUE(take(server, 1, 200ms).empty());
}

// The servers below bind a port held for them (tests/held_port.h), not one picked and released.
TEST(ProgressServer, AReporterStartedBeforeTheServerDeliversOnceItListens) {
  const testing::HeldPort port;
  stage::GrpcProgressReporter reporter(tasklet(3, 0), port.address());
  reporter.report(step(1));
  reporter.report(step(2));
  EXPECT_FALSE(reporter.flush(300ms));  // nobody listens yet
  ProgressServer server(3, port.port());
  EXPECT_TRUE(reporter.flush(10s));
  const std::vector<pb::StageEvent> events = take(server, 2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].step().step(), 1);
  EXPECT_EQ(events[1].step().step(), 2);
}

TEST(ProgressServer, EventsSentWhileTheServerRestartsAreDeliveredToTheNewOne) {
  const testing::HeldPort port;
  stage::GrpcProgressReporter reporter(tasklet(5, 2), port.address());
  {
    ProgressServer first(5, port.port());
    reporter.report(step(1));
    ASSERT_TRUE(reporter.flush(10s));
    ASSERT_EQ(take(first, 1).size(), 1u);
  }
  reporter.report(step(2));  // the server is gone
  reporter.report(step(3));
  ProgressServer second(5, port.port());
  EXPECT_TRUE(reporter.flush(20s));
  const std::vector<pb::StageEvent> events = take(second, 2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].step().step(), 2);
  EXPECT_EQ(events[1].step().step(), 3);
}

// A hand-written StageProgress service on a loopback port of its own, shut down when it goes.
class ServiceOnLoopback {
 public:
  explicit ServiceOnLoopback(grpc::Service& service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) throw std::runtime_error("no loopback port for the test server");
  }
  ~ServiceOnLoopback() { shut_down(); }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void shut_down() const { server_->Shutdown(); }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// A server that keeps its first stream open and reads it but never replies (an operator frozen
// by SIGSTOP: the kernel keeps its connection and takes the writes), and replies on later ones.
class SilentOnItsFirstStream final : public pb::StageProgress::Service {
 public:
  grpc::Status Report(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<pb::ReportReply, pb::StageEvent>* stream) override {
    const int stream_number = ++streams_;
    {
      const std::lock_guard lock(mutex_);
      peers_.push_back(context->peer());
    }
    pb::StageEvent event;
    while (stream->Read(&event)) {
      if (stream_number == 1) continue;
      {
        const std::lock_guard lock(mutex_);
        received_steps_.push_back(event.step().step());
        answering_peer_ = context->peer();
      }
      pb::ReportReply reply;
      reply.set_received(event.sequence());
      if (!stream->Write(reply)) break;
    }
    return context->IsCancelled() ? grpc::Status::CANCELLED : grpc::Status::OK;
  }
  int streams() const { return streams_; }
  std::vector<int64_t> received_steps() const {
    const std::lock_guard lock(mutex_);
    return received_steps_;
  }
  // The client end ("ipv4:127.0.0.1:<port>") of the silent first stream, and of the stream
  // whose events were answered.
  std::string silent_peer() const {
    const std::lock_guard lock(mutex_);
    return peers_.empty() ? "" : peers_.front();
  }
  std::string answering_peer() const {
    const std::lock_guard lock(mutex_);
    return answering_peer_;
  }

 private:
  std::atomic<int> streams_{0};
  mutable std::mutex mutex_;
  std::vector<int64_t> received_steps_;
  std::vector<std::string> peers_;
  std::string answering_peer_;
};

TEST(ProgressServer, AStreamWhoseServerNeverRepliesIsGivenUpAndTheEventsSentOnANewOne) {
  SilentOnItsFirstStream service;
  const ServiceOnLoopback server(service);
  {
    stage::GrpcProgressReporter reporter(tasklet(10, 0), server.address(), nullptr, "", 300ms);
    reporter.report(step(1));
    reporter.report(step(2));
    // Without the ack timeout the first stream stays open and nothing is ever acknowledged.
    EXPECT_TRUE(reporter.flush(20s));
  }
  server.shut_down();
  EXPECT_GE(service.streams(), 2);
  EXPECT_EQ(service.received_steps(), (std::vector<int64_t>{1, 2}));
  // On a new connection: behind a Service, the silent server's connection leads to it alone.
  EXPECT_NE(service.silent_peer(), service.answering_peer());
}

// A server that acknowledges every event and counts the streams opened to it.
class CountsItsStreams final : public pb::StageProgress::Service {
 public:
  grpc::Status Report(grpc::ServerContext*,
                      grpc::ServerReaderWriter<pb::ReportReply, pb::StageEvent>* stream) override {
    ++streams_;
    pb::StageEvent event;
    while (stream->Read(&event)) {
      pb::ReportReply reply;
      reply.set_received(event.sequence());
      if (!stream->Write(reply)) break;
    }
    return grpc::Status::OK;
  }
  int streams() const { return streams_; }

 private:
  std::atomic<int> streams_{0};
};

// A connection that takes a second to reach the server (a Service whose endpoint lookup lags, a
// loaded operator, a long link) is waited for, not given up and dialled again and again.
TEST(ProgressServer, AConnectionSlowToReachTheServerIsWaitedForNotDialledAgain) {
  CountsItsStreams service;
  const ServiceOnLoopback server(service);
  testing::StageServiceProxy proxy;
  std::atomic<int> connections{0};
  proxy.set_upstream([&connections, port = server.port()] {
    ++connections;
    std::this_thread::sleep_for(1s);
    return port;
  });
  {
    stage::GrpcProgressReporter reporter(tasklet(12, 0),
                                         "127.0.0.1:" + std::to_string(proxy.port()));
    reporter.report(step(1));
    ASSERT_TRUE(reporter.flush(30s));
  }
  // Before the fix each attempt was given 100 ms, then the backoff's growing delay: 7
  // connections here, and the event arrived after 6.4 s instead of 1.
  EXPECT_EQ(connections.load(), 1);
}

// The ack timeout counts from the write that starts a wait: an event sent after the stream was
// idle for longer than the timeout is not taken for one the server never answered.
TEST(ProgressServer, AStreamIdleLongerThanTheAckTimeoutIsKept) {
  CountsItsStreams service;
  const ServiceOnLoopback server(service);
  {
    stage::GrpcProgressReporter reporter(tasklet(11, 0), server.address(), nullptr, "", 2s);
    reporter.report(step(1));
    ASSERT_TRUE(reporter.flush(20s));
    std::this_thread::sleep_for(4500ms);  // idle for more than twice the ack timeout
    reporter.report(step(2));
    ASSERT_TRUE(reporter.flush(20s));
    EXPECT_EQ(service.streams(), 1);  // before the fix: 2, the second event "timed out" at once
  }
}

// A restarted server (an operator that took over) never saw what its predecessor acknowledged:
// a new stream repeats the latest Started, Step and CheckpointWritten first, so that it knows
// the rank's step, loss and checkpoint at once; a kind with a newer event still to send is not
// repeated (a server that saw them drops them: the dropping case below).
TEST(ProgressServer, ARestartedServerGetsTheLatestStateAgainBeforeWhatWasNotAcknowledged) {
  const testing::HeldPort port;
  stage::GrpcProgressReporter reporter(tasklet(6, 1), port.address());
  pb::StageEvent started;
  started.mutable_started()->set_world_size(2);
  started.mutable_started()->set_steps(10);
  pb::StageEvent checkpoint;
  checkpoint.mutable_checkpoint()->set_step(3);
  {
    ProgressServer first(6, port.port());
    reporter.report(started);                               // sequence 1
    for (int n = 1; n <= 3; ++n) reporter.report(step(n));  // 2, 3, 4
    reporter.report(checkpoint);                            // 5
    reporter.report(step(4));                               // 6
    ASSERT_TRUE(reporter.flush(10s));
    ASSERT_EQ(take(first, 6).size(), 6u);
  }
  pb::StageEvent done;
  done.mutable_done();
  reporter.report(done);  // 7, while no server listens
  ProgressServer second(6, port.port());
  EXPECT_TRUE(reporter.flush(20s));
  const std::vector<pb::StageEvent> events = take(second, 4);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_TRUE(events[0].has_started());
  EXPECT_EQ(events[0].sequence(), 1u);
  EXPECT_EQ(events[0].started().world_size(), 2);
  EXPECT_TRUE(events[1].has_checkpoint());
  EXPECT_EQ(events[1].sequence(), 5u);
  EXPECT_EQ(events[1].checkpoint().step(), 3);
  EXPECT_TRUE(events[2].has_step());
  EXPECT_EQ(events[2].sequence(), 6u);
  EXPECT_EQ(events[2].step().step(), 4);
  EXPECT_TRUE(events[3].has_done());
  EXPECT_EQ(events[3].sequence(), 7u);
  EXPECT_TRUE(take(second, 1, 200ms).empty());
}

TEST(ProgressServer, AnEventSentAgainIsAcknowledgedAndDroppedButANewIncarnationCounts) {
  ProgressServer server(9);
  auto stub = pb::StageProgress::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  auto send_all = [&](const std::vector<pb::StageEvent>& events) {
    grpc::ClientContext context;
    auto stream = stub->Report(&context);
    std::vector<uint64_t> acknowledged;
    for (const pb::StageEvent& e : events) {
      EXPECT_TRUE(stream->Write(e));
      pb::ReportReply reply;
      EXPECT_TRUE(stream->Read(&reply));
      acknowledged.push_back(reply.received());
    }
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
    return acknowledged;
  };
  auto numbered = [](pb::StageEvent e, uint64_t incarnation, uint64_t sequence) {
    *e.mutable_tasklet() = tasklet(9, 0, incarnation);
    e.set_sequence(sequence);
    return e;
  };
  EXPECT_EQ(send_all({numbered(step(1), 1, 1), numbered(step(2), 1, 2)}),
            (std::vector<uint64_t>{1, 2}));
  // A reconnecting process sends 2 again, then 3.
  EXPECT_EQ(send_all({numbered(step(2), 1, 2), numbered(step(3), 1, 3)}),
            (std::vector<uint64_t>{2, 3}));
  // The process restarted: its numbering starts again.
  EXPECT_EQ(send_all({numbered(step(3), 2, 1)}), (std::vector<uint64_t>{1}));
  const std::vector<pb::StageEvent> events = take(server, 4);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].step().step(), 1);
  EXPECT_EQ(events[1].step().step(), 2);
  EXPECT_EQ(events[2].step().step(), 3);
  EXPECT_EQ(events[3].tasklet().incarnation(), 2u);
}

TEST(ProgressServer, AnotherJobsEventsAreRefusedNamingBothJobs) {
  ProgressServer server(11);
  auto stub = pb::StageProgress::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->Report(&context);
  pb::StageEvent e = step(1);
  *e.mutable_tasklet() = tasklet(12, 3);
  e.set_sequence(1);
  stream->Write(e);
  pb::ReportReply reply;
  EXPECT_FALSE(stream->Read(&reply));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), "rank 3 reports for job 12, this launcher runs job 11");
  EXPECT_TRUE(take(server, 1, 200ms).empty());
}

}  // namespace
}  // namespace tessel::launcher
