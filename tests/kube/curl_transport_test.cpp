// The libcurl transport against the test HTTP server (tests/support/http_server.h), over real
// loopback sockets, plain and TLS.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "kube/http_transport.h"
#include "tests/kube/waiting.h"
#include "tests/support/http_server.h"

namespace tessel::kube {
namespace {

using namespace std::chrono_literals;
using tessel::testing::HttpResponseStream;
using tessel::testing::HttpServer;
using tessel::testing::HttpServerRequest;
using tessel::testing::HttpServerResponse;
using tessel::testing::TestCertificateAuthority;
using tessel::testing::TlsIdentity;
using testing::finishes;
using testing::require;

const std::string kToken = "s3cr3t-token-91f";

HttpServerResponse text(int status, std::string body) {
  HttpServerResponse response;
  response.status = status;
  response.headers.set("Content-Type", "text/plain");
  response.body = std::move(body);
  return response;
}

// Every request the server saw, in order.
class RequestLog {
 public:
  void record(const HttpServerRequest& request) {
    const std::lock_guard lock(mutex_);
    requests_.push_back(request);
  }
  std::vector<HttpServerRequest> all() const {
    const std::lock_guard lock(mutex_);
    return requests_;
  }
  HttpServerRequest last() const {
    const std::lock_guard lock(mutex_);
    return requests_.empty() ? HttpServerRequest{} : requests_.back();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<HttpServerRequest> requests_;
};

// An echo server: answers "<method> <path> <body>" and records each request.
class EchoServer {
 public:
  explicit EchoServer(std::optional<TlsIdentity> tls = std::nullopt)
      : server_(
            [this](const HttpServerRequest& request) {
              log.record(request);
              if (request.path == "/missing") return text(404, "no such thing");
              auto response = text(200, request.method + " " + request.path + " " + request.body);
              response.headers.set("X-Echo", "yes");
              return response;
            },
            std::move(tls)) {}

  std::string url(const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(server_.port());
  }
  HttpServer& server() { return server_; }

  RequestLog log;

 private:
  HttpServer server_;
};

ClusterConfig config_for(const std::string& server) {
  ClusterConfig config;
  config.name = "test";
  config.source = "test-kubeconfig";
  config.server = server;
  return config;
}

HttpRequest get(const std::string& target) {
  HttpRequest request;
  request.target = target;
  return request;
}

// A port on 127.0.0.1 that nothing listens on.
int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// A listening socket that never accepts: the kernel completes TCP handshakes, then nothing.
class SilentListener {
 public:
  SilentListener() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(fd_, 16);
    socklen_t length = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

class TempDirectory {
 public:
  TempDirectory() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessel-curl-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDirectory() { std::filesystem::remove_all(path_); }
  std::filesystem::path path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

TEST(CurlTransportTest, GetAndPostCarryBodiesAndReturnStatusHeadersAndBody) {
  EchoServer echo;
  auto transport = make_curl_transport(config_for(echo.url()));

  const HttpResponse got = transport->round_trip(get("/api/v1/pods?limit=2"));
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "GET /api/v1/pods ");
  EXPECT_EQ(got.header("x-echo"), "yes");
  EXPECT_EQ(got.header("CONTENT-TYPE"), "text/plain");
  EXPECT_EQ(echo.log.last().query_param("limit"), "2");

  HttpRequest post;
  post.method = "POST";
  post.target = "/api/v1/namespaces/default/pods";
  post.headers = {{"Content-Type", "application/json"}};
  post.body = R"({"kind":"Pod"})";
  const HttpResponse posted = transport->round_trip(post);
  EXPECT_EQ(posted.status, 200);
  EXPECT_EQ(posted.body, R"(POST /api/v1/namespaces/default/pods {"kind":"Pod"})");
  EXPECT_EQ(echo.log.last().headers.get("Content-Type"), "application/json");

  HttpRequest patch;
  patch.method = "PATCH";
  patch.target = "/x";
  patch.headers = {{"Content-Type", "application/merge-patch+json"}};
  patch.body = std::string(2 << 20, 'p');  // big enough for libcurl to send Expect: 100-continue
  EXPECT_EQ(transport->round_trip(patch).body, "PATCH /x " + patch.body);

  HttpRequest empty_post;
  empty_post.method = "POST";
  empty_post.target = "/empty";
  EXPECT_EQ(transport->round_trip(empty_post).body, "POST /empty ");
  EXPECT_EQ(echo.log.last().headers.get("Content-Type"), std::nullopt);  // no form type
  EXPECT_EQ(echo.log.last().headers.get("Content-Length"), "0");

  HttpRequest remove;
  remove.method = "DELETE";
  remove.target = "/y";
  EXPECT_EQ(transport->round_trip(remove).body, "DELETE /y ");

  const HttpResponse missing = transport->round_trip(get("/missing"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "no such thing");
}

TEST(CurlTransportTest, SendsTheBearerTokenUserAgentAndRequestHeaders) {
  EchoServer echo;
  ClusterConfig config = config_for(echo.url());
  config.token = kToken;
  TransportOptions options;
  options.user_agent = "tessel-test/1.0";
  auto transport = make_curl_transport(config, options);

  HttpRequest request = get("/");
  request.headers = {{"Accept", "application/json"}, {"X-Request-Id", "42"}};
  transport->round_trip(request);
  const auto seen = echo.log.last();
  EXPECT_EQ(seen.headers.get("Authorization"), "Bearer " + kToken);
  EXPECT_EQ(seen.headers.get("User-Agent"), "tessel-test/1.0");
  EXPECT_EQ(seen.headers.get("Accept"), "application/json");
  EXPECT_EQ(seen.headers.get("X-Request-Id"), "42");

  // A request's own User-Agent (the client's) wins over the transport's.
  request.headers.emplace_back("User-Agent", "tessel-operator/0.1");
  transport->round_trip(request);
  EXPECT_EQ(echo.log.last().headers.get("User-Agent"), "tessel-operator/0.1");

  auto anonymous = make_curl_transport(config_for(echo.url()));
  anonymous->round_trip(get("/"));
  EXPECT_EQ(echo.log.last().headers.get("Authorization"), std::nullopt);
}

TEST(CurlTransportTest, FollowsARotatedTokenFile) {
  EchoServer echo;
  TempDirectory directory;
  const auto token_file = directory.path() / "token";
  write_file(token_file, "first-token\n");
  ClusterConfig config = config_for(echo.url());
  config.token_file = token_file.string();
  config.token = "first-token";
  auto transport = make_curl_transport(config);

  transport->round_trip(get("/"));
  EXPECT_EQ(echo.log.last().headers.get("Authorization"), "Bearer first-token");
  // The kubelet replaces the file (a new inode); BearerToken sees it at the next request.
  write_file(directory.path() / "token.new", "second-token-after-rotation\n");
  std::filesystem::rename(directory.path() / "token.new", token_file);
  transport->round_trip(get("/"));
  EXPECT_EQ(echo.log.last().headers.get("Authorization"), "Bearer second-token-after-rotation");
}

TEST(CurlTransportTest, RefusesAConfigItCannotUse) {
  EXPECT_THROW(make_curl_transport(config_for("ftp://127.0.0.1:1")), KubeConfigError);
  EXPECT_THROW(make_curl_transport(config_for("not a url")), KubeConfigError);
  ClusterConfig half_credentials = config_for("https://127.0.0.1:1");
  half_credentials.client_cert_pem = "-----BEGIN CERTIFICATE-----\n";
  try {
    make_curl_transport(half_credentials);
    ADD_FAILURE() << "a certificate without a key was accepted";
  } catch (const KubeConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("test-kubeconfig"), std::string::npos) << error.what();
  }
}

class CurlTlsTest : public ::testing::Test {
 protected:
  TestCertificateAuthority ca;
  tessel::testing::TestCertificate server_certificate = ca.issue_server();

  TlsIdentity identity(bool client_certificates = false) const {
    return {server_certificate.cert_pem, server_certificate.key_pem,
            client_certificates ? ca.ca_pem() : ""};
  }
};

TEST_F(CurlTlsTest, VerifiesTheServerAgainstTheConfiguredCa) {
  EchoServer echo(identity());
  ClusterConfig config = config_for(echo.url("https"));
  config.ca_pem = ca.ca_pem();
  EXPECT_EQ(make_curl_transport(config)->round_trip(get("/secure")).body, "GET /secure ");
}

TEST_F(CurlTlsTest, AServerCertificateFromAnotherCaIsAnErrorNamingTheServer) {
  EchoServer echo(identity());
  TestCertificateAuthority other_ca;
  ClusterConfig config = config_for(echo.url("https"));
  config.ca_pem = other_ca.ca_pem();
  config.token = kToken;
  try {
    make_curl_transport(config)->round_trip(get("/api?watch=1"));
    ADD_FAILURE() << "an untrusted server was accepted";
  } catch (const TransportError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("GET " + echo.url("https") + "/api"), std::string::npos) << message;
    EXPECT_NE(message.find("certificate"), std::string::npos) << message;
    EXPECT_EQ(message.find(kToken), std::string::npos) << message;
    EXPECT_FALSE(error.timed_out());
    EXPECT_TRUE(error.permanent()) << "waiting does not make an untrusted server trusted";
  }
  EXPECT_TRUE(echo.log.all().empty());

  // Without a CA the system trust store is used, which does not know the test CA either.
  ClusterConfig system_store = config_for(echo.url("https"));
  EXPECT_THROW(make_curl_transport(system_store)->round_trip(get("/")), TransportError);
}

TEST_F(CurlTlsTest, InsecureSkipsVerification) {
  EchoServer echo(identity());
  ClusterConfig config = config_for(echo.url("https"));
  config.insecure_skip_tls_verify = true;
  EXPECT_EQ(make_curl_transport(config)->round_trip(get("/")).status, 200);
}

TEST_F(CurlTlsTest, TlsServerNameIsVerifiedWhileTheServerUrlIsConnectedTo) {
  EchoServer echo(identity());
  ClusterConfig config = config_for(echo.url("https"));
  config.ca_pem = ca.ca_pem();
  config.tls_server_name = "localhost";  // in the certificate; the URL's 127.0.0.1 is too
  EXPECT_EQ(make_curl_transport(config)->round_trip(get("/named")).body, "GET /named ");
  EXPECT_EQ(echo.log.last().headers.get("Host"),
            "127.0.0.1:" + std::to_string(echo.server().port()));

  config.tls_server_name = "kubernetes.example";  // not in the certificate
  EXPECT_THROW(make_curl_transport(config)->round_trip(get("/")), TransportError);
}

TEST_F(CurlTlsTest, AuthenticatesWithAClientCertificate) {
  EchoServer echo(identity(true));
  const auto client = ca.issue_client("system:node:gpu-1", {"system:nodes", "tessel"});
  ClusterConfig config = config_for(echo.url("https"));
  config.ca_pem = ca.ca_pem();
  config.client_cert_pem = client.cert_pem;
  config.client_key_pem = client.key_pem;
  auto transport = make_curl_transport(config);
  EXPECT_EQ(transport->round_trip(get("/")).status, 200);
  EXPECT_EQ(echo.log.last().client_cn, "system:node:gpu-1");
  EXPECT_EQ(echo.log.last().client_organizations,
            (std::vector<std::string>{"system:nodes", "tessel"}));
}

TEST_F(CurlTlsTest, ReusesOneConnectionForSequentialRequests) {
  EchoServer echo(identity());
  ClusterConfig config = config_for(echo.url("https"));
  config.ca_pem = ca.ca_pem();
  auto transport = make_curl_transport(config);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(transport->round_trip(get("/")).status, 200);
  EXPECT_EQ(echo.server().connections_accepted(), 1u);

  // Sequential requests from other threads take the same idle connection.
  for (int i = 0; i < 3; ++i) {
    std::thread([&] { EXPECT_EQ(transport->round_trip(get("/")).status, 200); }).join();
  }
  EXPECT_EQ(echo.server().connections_accepted(), 1u);
}

TEST(CurlTransportTest, ServesConcurrentRequestsFromManyThreads) {
  EchoServer echo;
  auto transport = make_curl_transport(config_for(echo.url()));
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const std::string path = "/t" + std::to_string(t) + "/" + std::to_string(i);
        if (transport->round_trip(get(path)).body == "GET " + path + " ") ++ok;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), 100);
  EXPECT_LE(echo.server().connections_accepted(), 4u);  // one per thread at most
}

TEST(CurlTransportTest, ARefusedConnectionWasNotSent) {
  const std::string server = "http://127.0.0.1:" + std::to_string(unused_port());
  try {
    make_curl_transport(config_for(server))->round_trip(get("/api"));
    ADD_FAILURE() << "no error";
  } catch (const TransportError& error) {
    EXPECT_FALSE(error.request_sent());
    EXPECT_FALSE(error.timed_out());
    EXPECT_NE(std::string(error.what()).find("GET " + server + "/api"), std::string::npos)
        << error.what();
  }
}

TEST(CurlTransportTest, AConnectTimeoutWasNotSent) {
  SilentListener listener;  // TCP connects, the TLS handshake never completes
  TransportOptions options;
  options.connect_timeout = 100ms;
  ClusterConfig config = config_for("https://127.0.0.1:" + std::to_string(listener.port()));
  config.insecure_skip_tls_verify = true;
  try {
    make_curl_transport(config, options)->round_trip(get("/"));
    ADD_FAILURE() << "no error";
  } catch (const TransportError& error) {
    EXPECT_TRUE(error.timed_out()) << error.what();
    EXPECT_FALSE(error.request_sent()) << error.what();
  }
}

TEST(CurlTransportTest, ASlowAnswerTimesOutAfterTheRequestWasSent) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  HttpServer server(
      [released](const HttpServerRequest&) {
        released.wait();
        return text(200, "late");
      },
      std::nullopt);
  HttpRequest request = get("/slow");
  request.timeout = 100ms;
  auto transport =
      make_curl_transport(config_for("http://127.0.0.1:" + std::to_string(server.port())));
  try {
    transport->round_trip(request);
    ADD_FAILURE() << "no error";
  } catch (const TransportError& error) {
    EXPECT_TRUE(error.timed_out()) << error.what();
    EXPECT_TRUE(error.request_sent()) << error.what();
  }
  release.set_value();
}

// A watch-like server: /watch streams what the test pushes, one chunk each, until the test ends
// or cuts the body; /gone answers 410 Gone with a Status body.
class WatchServer {
 public:
  WatchServer()
      : server_(
            [this](const HttpServerRequest& request) {
              log.record(request);
              if (request.path == "/gone") {
                auto response = text(410, R"({"kind":"Status","code":410})");
                response.headers.set("Content-Type", "application/json");
                return response;
              }
              HttpServerResponse response;
              response.headers.set("Content-Type", "application/json");
              response.stream = [this](HttpResponseStream& stream) { serve(stream); };
              return response;
            },
            std::nullopt) {}

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  std::size_t connections() const { return server_.connections_accepted(); }

  void push(std::string event) { post(Action::kWrite, std::move(event)); }
  void end() { post(Action::kEnd, ""); }
  void cut() { post(Action::kCut, ""); }

  RequestLog log;

 private:
  enum class Action { kWrite, kEnd, kCut };

  void post(Action action, std::string event) {
    const std::lock_guard lock(mutex_);
    queue_.emplace_back(action, std::move(event));
    changed_.notify_all();
  }

  void serve(HttpResponseStream& stream) {
    std::unique_lock lock(mutex_);
    while (!stream.closed()) {
      // Wakes up now and then: only closed() tells that the client went away.
      changed_.wait_for(lock, 5ms, [&] { return !queue_.empty(); });
      if (queue_.empty()) continue;
      auto [action, event] = std::move(queue_.front());
      queue_.erase(queue_.begin());
      if (action == Action::kEnd) return;
      if (action == Action::kCut) {
        stream.abort();
        return;
      }
      stream.write(event);
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::pair<Action, std::string>> queue_;
  HttpServer server_;  // last: stopped first, while the queue is still there
};

// A watch request whose silence limit only runs out when something is broken.
HttpRequest watch_request(const std::string& target) {
  HttpRequest request = get(target);
  request.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(testing::kFailureTimeout);
  return request;
}

// What a stream's on_data received, readable from the test thread.
class Received {
 public:
  std::function<bool(std::string_view)> collector(bool keep_going = true) {
    return [this, keep_going](std::string_view data) {
      const std::lock_guard lock(mutex_);
      chunks_.emplace_back(data);
      return keep_going;
    };
  }
  std::string text() const {
    const std::lock_guard lock(mutex_);
    std::string all;
    for (const auto& chunk : chunks_) all += chunk;
    return all;
  }
  // Waits (bounded) until the bytes so far are `expected`.
  void wait_for(const std::string& expected) const {
    require(testing::eventually([&] { return text() == expected; }), expected.c_str());
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> chunks_;
};

TEST(CurlTransportStreamTest, DeliversEachChunkAsItComes) {
  WatchServer watch;
  auto transport = make_curl_transport(config_for(watch.url()));
  Received received;
  auto on_data = received.collector();
  auto streaming = std::async(std::launch::async, [&] {
    return transport->stream(watch_request("/watch"), on_data, std::stop_token());
  });
  watch.push("{\"type\":\"ADDED\"}\n");
  received.wait_for("{\"type\":\"ADDED\"}\n");
  watch.push("{\"type\":\"DELETED\"}\n");
  received.wait_for("{\"type\":\"ADDED\"}\n{\"type\":\"DELETED\"}\n");
  watch.end();
  require(finishes(streaming), "the stream to end with the body");
  const HttpResponse response = streaming.get();
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.header("content-type"), "application/json");
  EXPECT_TRUE(response.body.empty());
}

// A stream the server never ends returns on a stop request, with what it received. (The stop
// wakes curl's poll at once instead of at its next 1 s timeout; how fast that is on this machine
// is not asserted: a loaded machine may delay any thread.)
TEST(CurlTransportStreamTest, ReturnsOnAStopRequest) {
  WatchServer watch;
  auto transport = make_curl_transport(config_for(watch.url()));
  Received received;
  auto on_data = received.collector();
  std::stop_source stop;
  auto streaming = std::async(std::launch::async, [&] {
    return transport->stream(watch_request("/watch"), on_data, stop.get_token());
  });
  watch.push("event\n");
  received.wait_for("event\n");  // then nothing more arrives
  stop.request_stop();
  require(finishes(streaming), "the stream to stop");
  EXPECT_EQ(streaming.get().status, 200);

  // A stop requested before the stream begins returns at once, too.
  auto stopped_early = std::async(std::launch::async, [&] {
    return transport->stream(watch_request("/watch"), on_data, stop.get_token());
  });
  require(finishes(stopped_early), "the stopped stream to return");
  EXPECT_EQ(received.text(), "event\n");
}

TEST(CurlTransportStreamTest, SilenceLongerThanTheTimeoutIsATimeout) {
  WatchServer watch;
  auto transport = make_curl_transport(config_for(watch.url()));
  Received received;
  HttpRequest request = get("/watch");
  request.timeout = 150ms;
  watch.push("event\n");
  const auto started = std::chrono::steady_clock::now();
  try {
    transport->stream(request, received.collector(), std::stop_token());
    ADD_FAILURE() << "a silent stream did not time out";
  } catch (const TransportError& error) {
    EXPECT_TRUE(error.timed_out()) << error.what();
    EXPECT_TRUE(error.request_sent()) << error.what();
    EXPECT_NE(std::string(error.what()).find(watch.url() + "/watch"), std::string::npos)
        << error.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - started, 150ms);
  EXPECT_EQ(received.text(), "event\n");
}

TEST(CurlTransportStreamTest, ABodyCutMidwayIsAnError) {
  WatchServer watch;
  auto transport = make_curl_transport(config_for(watch.url()));
  Received received;
  watch.push("partial\n");
  watch.cut();
  try {
    transport->stream(watch_request("/watch"), received.collector(), std::stop_token());
    ADD_FAILURE() << "a truncated chunked body was taken as complete";
  } catch (const TransportError& error) {
    EXPECT_FALSE(error.timed_out()) << error.what();
    EXPECT_TRUE(error.request_sent()) << error.what();
  }
  EXPECT_EQ(received.text(), "partial\n");
}

TEST(CurlTransportStreamTest, AnErrorAnswerIsReturnedWhole) {
  WatchServer watch;
  auto transport = make_curl_transport(config_for(watch.url()));
  Received received;
  const HttpResponse response =
      transport->stream(watch_request("/gone"), received.collector(), std::stop_token());
  EXPECT_EQ(response.status, 410);
  EXPECT_EQ(response.body, R"({"kind":"Status","code":410})");
  EXPECT_EQ(received.text(), "");
}

TEST(CurlTransportStreamTest, EndsWhenOnDataSaysSo) {
  WatchServer watch;
  auto transport = make_curl_transport(config_for(watch.url()));
  Received received;
  watch.push("first\n");
  const HttpResponse response =
      transport->stream(watch_request("/watch"), received.collector(false), std::stop_token());
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(received.text(), "first\n");
}

TEST(CurlTransportStreamTest, PassesOnWhatOnDataThrows) {
  WatchServer watch;
  auto transport = make_curl_transport(config_for(watch.url()));
  watch.push("event\n");
  EXPECT_THROW(transport->stream(
                   watch_request("/watch"),
                   [](std::string_view) -> bool { throw std::invalid_argument("bad event"); },
                   std::stop_token()),
               std::invalid_argument);
}

TEST(CurlTransportStreamTest, AStreamUsesTheTokenAndKeepsTheConnectionWhenItEnds) {
  WatchServer watch;
  ClusterConfig config = config_for(watch.url());
  config.token = kToken;
  auto transport = make_curl_transport(config);
  Received received;
  watch.push("a");
  watch.end();
  const auto ended = transport->stream(watch_request("/watch"), received.collector(), {});
  EXPECT_EQ(ended.status, 200);
  const auto gone = transport->stream(watch_request("/gone"), received.collector(), {});
  EXPECT_EQ(gone.status, 410);
  EXPECT_EQ(received.text(), "a");
  EXPECT_EQ(watch.log.last().headers.get("Authorization"), "Bearer " + kToken);
  EXPECT_EQ(watch.connections(), 1u);
}

// An HTTP proxy that answers one request itself and reports the request line it got.
TEST(CurlTransportTest, SendsRequestsThroughTheConfiguredProxy) {
  RequestLog proxied;
  HttpServer proxy(
      [&](const HttpServerRequest& request) {
        proxied.record(request);
        return text(200, "via proxy");
      },
      std::nullopt);
  ClusterConfig config = config_for("http://kubernetes.invalid:6443");
  config.proxy_url = "http://127.0.0.1:" + std::to_string(proxy.port());
  const HttpResponse response = make_curl_transport(config)->round_trip(get("/api"));
  EXPECT_EQ(response.body, "via proxy");
  ASSERT_EQ(proxied.all().size(), 1u);
  EXPECT_EQ(proxied.last().target, "http://kubernetes.invalid:6443/api");
}

}  // namespace
}  // namespace tessel::kube
