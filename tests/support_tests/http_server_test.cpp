#include "tests/support/http_server.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tessel::testing {
namespace {

using namespace std::chrono_literals;

// Bounds that only run out when the server is broken.
constexpr auto kFailureTimeout = 5s;

// libcurl's global initialization, once, before any test starts a thread.
[[maybe_unused]] const CURLcode kCurlInitialized = curl_global_init(CURL_GLOBAL_DEFAULT);

template <typename T>
void require_ready(std::future<T>& future, const char* what) {
  if (future.wait_for(kFailureTimeout) != std::future_status::ready) {
    ADD_FAILURE() << "timed out: " << what;
    std::abort();  // threads may still use objects the test is about to destroy
  }
}

// A raw TCP client, to send exactly the bytes a test wants.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~RawClient() { ::close(fd_); }

  bool connected() const { return connected_; }

  void send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  // Reads until `marker` has arrived (and returns everything up to and including it), or
  // until the connection ends (then returns what came, without the marker).
  std::string read_until(const std::string& marker) {
    while (true) {
      const auto at = pending_.find(marker);
      if (at != std::string::npos) {
        std::string head = pending_.substr(0, at + marker.size());
        pending_.erase(0, at + marker.size());
        return head;
      }
      if (!receive()) return std::exchange(pending_, "");
    }
  }

  std::string read_exact(std::size_t count) {
    while (pending_.size() < count && receive()) {
    }
    std::string bytes = pending_.substr(0, count);
    pending_.erase(0, bytes.size());
    return bytes;
  }

  // A whole response with a Content-Length body.
  std::string read_response() {
    std::string head = read_until("\r\n\r\n");
    const auto at = head.find("Content-Length: ");
    if (at == std::string::npos) return head;
    return head + read_exact(std::stoul(head.substr(at + 16)));
  }

  // Whether the server closed the connection (waits for it).
  bool at_end_of_stream() {
    if (!pending_.empty()) return false;
    pollfd entry{fd_, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(kFailureTimeout / 1ms)) != 1) return false;
    return !receive();
  }

 private:
  bool receive() {
    char buffer[4096];
    const ssize_t received = ::recv(fd_, buffer, sizeof buffer, 0);
    if (received <= 0) return false;
    pending_.append(buffer, static_cast<std::size_t>(received));
    return true;
  }

  int fd_;
  bool connected_ = false;
  std::string pending_;
};

struct CurlResult {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body;
  std::string error;
};

// A libcurl client; one easy handle, so that sequential requests may reuse a connection.
class CurlClient {
 public:
  CurlClient() : easy_(curl_easy_init()) {}
  ~CurlClient() { curl_easy_cleanup(easy_); }
  CURL* handle() { return easy_; }

  // Called with each piece of body as it arrives; returning false aborts the transfer.
  std::function<bool(std::string_view)> on_data;

  CurlResult get(const std::string& url) {
    CurlResult result;
    char error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(easy_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy_, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(easy_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy_, CURLOPT_TIMEOUT_MS, static_cast<long>(kFailureTimeout / 1ms));
    curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, &CurlClient::write_callback);
    curl_easy_setopt(easy_, CURLOPT_WRITEDATA, this);
    body_ = &result.body;
    result.code = curl_easy_perform(easy_);
    curl_easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &result.status);
    result.error = error;
    return result;
  }

  CurlResult post(const std::string& url, const std::string& body) {
    curl_easy_setopt(easy_, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(easy_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    return get(url);
  }

  void trust(const std::string& ca_pem) {
    curl_blob blob{const_cast<char*>(ca_pem.data()), ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(easy_, CURLOPT_CAINFO_BLOB, &blob);
  }

  void present(const TestCertificate& certificate) {
    curl_blob cert{const_cast<char*>(certificate.cert_pem.data()), certificate.cert_pem.size(),
                   CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(certificate.key_pem.data()), certificate.key_pem.size(),
                  CURL_BLOB_COPY};
    curl_easy_setopt(easy_, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(easy_, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(easy_, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(easy_, CURLOPT_SSLKEYTYPE, "PEM");
  }

 private:
  static size_t write_callback(char* data, size_t, size_t size, void* self_pointer) {
    auto* self = static_cast<CurlClient*>(self_pointer);
    const std::string_view piece(data, size);
    self->body_->append(piece);
    if (self->on_data && !self->on_data(piece)) return 0;
    return size;
  }

  CURL* easy_;
  std::string* body_ = nullptr;
};

HttpServerResponse text(int status, std::string body) {
  HttpServerResponse response;
  response.status = status;
  response.headers.set("Content-Type", "text/plain");
  response.body = std::move(body);
  return response;
}

std::string url(const HttpServer& server, const std::string& path, bool tls = false) {
  return std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(server.port()) +
         path;
}

// Records the last request a handler saw.
class RequestLog {
 public:
  void record(const HttpServerRequest& request) {
    const std::lock_guard lock(mutex_);
    requests_.push_back(request);
  }
  std::vector<HttpServerRequest> requests() const {
    const std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<HttpServerRequest> requests_;
};

TEST(HttpHeadersTest, LookupIgnoresCaseAndSetReplaces) {
  HttpHeaders headers;
  headers.entries = {{"Content-Type", "a"}, {"content-type", "b"}, {"X-One", "1"}};
  EXPECT_EQ(headers.get("CONTENT-TYPE"), "a");
  EXPECT_EQ(headers.get("x-one"), "1");
  EXPECT_EQ(headers.get("missing"), std::nullopt);
  headers.set("CONTENT-type", "c");
  EXPECT_EQ(headers.entries.size(), 2u);
  EXPECT_EQ(headers.get("content-type"), "c");
}

TEST(HttpServerTest, ParsesTheRequestAndDecodesPathAndQuery) {
  RequestLog log;
  HttpServer server(
      [&](const HttpServerRequest& request) {
        log.record(request);
        return text(200, "hello");
      },
      std::nullopt);
  RawClient client(server.port());
  ASSERT_TRUE(client.connected());
  client.send(
      "GET /api/v1/name%20space/a+b?labelSelector=app%3Dweb&x=1+2&flag&x=3 HTTP/1.1\r\n"
      "Host: 127.0.0.1\r\nX-Custom-Header:   spaced value \r\nACCEPT: application/json\r\n\r\n");
  const std::string response = client.read_response();
  EXPECT_TRUE(response.starts_with("HTTP/1.1 200 OK\r\n")) << response;
  EXPECT_NE(response.find("Content-Length: 5\r\n"), std::string::npos) << response;
  EXPECT_TRUE(response.ends_with("\r\n\r\nhello")) << response;

  const auto requests = log.requests();
  ASSERT_EQ(requests.size(), 1u);
  const HttpServerRequest& request = requests[0];
  EXPECT_EQ(request.method, "GET");
  EXPECT_EQ(request.target, "/api/v1/name%20space/a+b?labelSelector=app%3Dweb&x=1+2&flag&x=3");
  EXPECT_EQ(request.path, "/api/v1/name space/a+b");  // '+' is a space only in the query
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(request.query,
            (Pairs{{"labelSelector", "app=web"}, {"x", "1 2"}, {"flag", ""}, {"x", "3"}}));
  EXPECT_EQ(request.query_param("x"), "1 2");
  EXPECT_EQ(request.query_param("missing"), std::nullopt);
  EXPECT_EQ(request.headers.get("x-custom-header"), "spaced value");
  EXPECT_EQ(request.headers.get("Accept"), "application/json");
  EXPECT_EQ(request.client_cn, "");
  EXPECT_TRUE(request.body.empty());
}

TEST(HttpServerTest, AcceptsTheAbsoluteFormOfTheTarget) {
  RequestLog log;
  HttpServer server(
      [&](const HttpServerRequest& request) {
        log.record(request);
        return text(200, "");
      },
      std::nullopt);
  RawClient client(server.port());
  client.send("GET http://example.com:8080/a%2Fb?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
  EXPECT_TRUE(client.read_response().starts_with("HTTP/1.1 200 OK"));
  client.send("GET https://example.com?q=2 HTTP/1.1\r\nHost: example.com\r\n\r\n");
  EXPECT_TRUE(client.read_response().starts_with("HTTP/1.1 200 OK"));
  const auto requests = log.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].target, "http://example.com:8080/a%2Fb?q=1");
  EXPECT_EQ(requests[0].path, "/a/b");
  EXPECT_EQ(requests[0].query_param("q"), "1");
  EXPECT_EQ(requests[1].path, "/");
  EXPECT_EQ(requests[1].query_param("q"), "2");
}

TEST(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  HttpServer server([](const HttpServerRequest& request) { return text(200, request.path); },
                    std::nullopt);
  RawClient client(server.port());
  client.send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(client.read_response().ends_with("/one"));
  client.send("GET /two HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(client.read_response().ends_with("/two"));

  CurlClient curl;
  for (int i = 0; i < 5; ++i) {
    const auto result = curl.get(url(server, "/curl"));
    ASSERT_EQ(result.code, CURLE_OK) << result.error;
    EXPECT_EQ(result.body, "/curl");
  }
  EXPECT_EQ(server.connections_accepted(), 2u);  // the raw client's and curl's
}

TEST(HttpServerTest, ConnectionCloseAndHttp10EndTheConnection) {
  HttpServer server([](const HttpServerRequest&) { return text(200, "bye"); }, std::nullopt);
  RawClient closing(server.port());
  closing.send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string response = closing.read_response();
  EXPECT_NE(response.find("Connection: close\r\n"), std::string::npos) << response;
  EXPECT_TRUE(closing.at_end_of_stream());

  RawClient old(server.port());
  old.send("GET / HTTP/1.0\r\n\r\n");
  EXPECT_TRUE(old.read_response().ends_with("bye"));
  EXPECT_TRUE(old.at_end_of_stream());
}

TEST(HttpServerTest, DecodesAChunkedRequestBody) {
  RequestLog log;
  HttpServer server(
      [&](const HttpServerRequest& request) {
        log.record(request);
        return text(201, "created");
      },
      std::nullopt);
  RawClient client(server.port());
  client.send(
      "POST /upload HTTP/1.1\r\nHost: x\r\ntransfer-encoding: Chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: yes\r\n\r\n");
  EXPECT_TRUE(client.read_response().starts_with("HTTP/1.1 201 Created\r\n"));
  client.send("POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_TRUE(client.read_response().ends_with("created"));
  const auto requests = log.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].body, "hello, world");
  EXPECT_EQ(requests[1].body, "abc");
}

TEST(HttpServerTest, AnswersExpectContinueBeforeTheBodyIsSent) {
  HttpServer server([](const HttpServerRequest& request) { return text(200, request.body); },
                    std::nullopt);
  RawClient client(server.port());
  client.send("PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(client.read_until("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  client.send("data");
  EXPECT_TRUE(client.read_response().ends_with("\r\n\r\ndata"));
}

TEST(HttpServerTest, CurlUploadsALargeBodyWithoutWaitingForItsExpectTimeout) {
  HttpServer server(
      [](const HttpServerRequest& request) {
        return text(200, std::to_string(request.body.size()) + " " +
                             request.headers.get("Expect").value_or("no expect"));
      },
      std::nullopt);
  const std::string body(3 << 20, 'z');
  CurlClient curl;
  // Were 100 Continue never sent, curl would wait this long before sending the body anyway.
  curl_easy_setopt(curl.handle(), CURLOPT_EXPECT_100_TIMEOUT_MS, 60'000L);
  const auto result = curl.post(url(server, "/big"), body);
  ASSERT_EQ(result.code, CURLE_OK) << result.error;  // CURLOPT_TIMEOUT_MS is kFailureTimeout
  EXPECT_EQ(result.body, std::to_string(body.size()) + " 100-continue");
}

TEST(HttpServerTest, MalformedRequestsGet400AndTheConnectionCloses) {
  std::atomic<int> handled{0};
  HttpServer server(
      [&](const HttpServerRequest&) {
        ++handled;
        return text(200, "");
      },
      std::nullopt);
  const std::vector<std::string> bad_requests = {
      "GARBAGE\r\n\r\n",
      "GET /x HTTP/1.1 extra\r\n\r\n",
      "GET nopath HTTP/1.1\r\n\r\n",
      "GET /%zz HTTP/1.1\r\n\r\n",
      "GET /x HTTP/1.1\r\nno colon here\r\n\r\n",
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
      "POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
  };
  for (const auto& bad : bad_requests) {
    RawClient client(server.port());
    client.send(bad);
    const std::string response = client.read_response();
    EXPECT_TRUE(response.starts_with("HTTP/1.1 400 Bad Request\r\n")) << bad << "\n" << response;
    EXPECT_NE(response.find("Connection: close"), std::string::npos) << response;
    EXPECT_TRUE(client.at_end_of_stream()) << bad;
  }
  EXPECT_EQ(handled.load(), 0);
}

TEST(HttpServerTest, AHandlerExceptionIsA500) {
  HttpServer server(
      [](const HttpServerRequest&) -> HttpServerResponse { throw std::runtime_error("boom"); },
      std::nullopt);
  CurlClient curl;
  const auto result = curl.get(url(server, "/"));
  ASSERT_EQ(result.code, CURLE_OK) << result.error;
  EXPECT_EQ(result.status, 500);
  EXPECT_NE(result.body.find("boom"), std::string::npos);
}

TEST(HttpServerTest, StreamedChunksArriveBeforeTheHandlerReturns) {
  std::promise<void> first_received;
  std::promise<void> second_received;
  HttpServer server(
      [&](const HttpServerRequest& request) {
        if (request.path != "/watch") return text(200, "not a stream");
        HttpServerResponse response;
        response.headers.set("Content-Type", "application/json");
        response.stream = [&](HttpResponseStream& stream) {
          // Each chunk must reach the client while the handler is still running.
          ASSERT_TRUE(stream.write("{\"n\":1}\n"));
          auto first = first_received.get_future();
          require_ready(first, "the first chunk at the client");
          ASSERT_TRUE(stream.write("{\"n\":2}\n"));
          auto second = second_received.get_future();
          require_ready(second, "the second chunk at the client");
          ASSERT_TRUE(stream.write("{\"n\":3}\n"));
        };
        return response;
      },
      std::nullopt);
  CurlClient curl;
  std::string received;
  curl.on_data = [&](std::string_view piece) {
    received += piece;
    if (received == "{\"n\":1}\n") first_received.set_value();
    if (received == "{\"n\":1}\n{\"n\":2}\n") second_received.set_value();
    return true;
  };
  const auto result = curl.get(url(server, "/watch"));
  ASSERT_EQ(result.code, CURLE_OK) << result.error;
  EXPECT_EQ(result.body, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n");
  // The connection survives a stream that ended properly.
  EXPECT_EQ(curl.get(url(server, "/other")).body, "not a stream");
  EXPECT_EQ(server.connections_accepted(), 1u);
}

TEST(HttpServerTest, AbortIsATruncatedBodyForTheClient) {
  HttpServer server(
      [](const HttpServerRequest&) {
        HttpServerResponse response;
        response.stream = [](HttpResponseStream& stream) {
          stream.write("partial");
          stream.abort();
          EXPECT_TRUE(stream.closed());
          EXPECT_FALSE(stream.write("more"));
        };
        return response;
      },
      std::nullopt);
  CurlClient curl;
  const auto result = curl.get(url(server, "/"));
  EXPECT_NE(result.code, CURLE_OK);
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(result.body, "partial");
}

// A watch-like handler: one event, then heartbeats until the stream closes. Reports how it
// ended.
struct OpenStream {
  std::promise<void> started;
  std::promise<bool> ended;  // the value: whether closed() was true at the end

  HttpHandler handler() {
    return [this](const HttpServerRequest&) {
      HttpServerResponse response;
      response.stream = [this](HttpResponseStream& stream) {
        stream.write("event\n");
        started.set_value();
        while (stream.write(" ")) std::this_thread::sleep_for(1ms);
        ended.set_value(stream.closed());
      };
      return response;
    };
  }
};

TEST(HttpServerTest, DropConnectionsEndsOpenStreamsWithoutTheTerminatingChunk) {
  OpenStream open;
  HttpServer server(open.handler(), std::nullopt);
  auto request = std::async(std::launch::async, [&] {
    CurlClient curl;
    return curl.get(url(server, "/watch"));
  });
  auto started = open.started.get_future();
  require_ready(started, "the stream to start");
  server.drop_connections();
  auto ended = open.ended.get_future();
  require_ready(ended, "the handler to see the drop");
  EXPECT_TRUE(ended.get());
  require_ready(request, "the client to see the drop");
  const auto result = request.get();
  EXPECT_NE(result.code, CURLE_OK);
  EXPECT_TRUE(result.body.starts_with("event\n"));

  // The server still serves new connections.
  server.drop_connections();
  EXPECT_EQ(RawClient(server.port()).connected(), true);
}

TEST(HttpServerTest, TheHandlerSeesAClientThatWentAway) {
  std::promise<void> closed_seen;
  HttpServer server(
      [&](const HttpServerRequest&) {
        HttpServerResponse response;
        response.stream = [&](HttpResponseStream& stream) {
          stream.write("first");
          // Not writing: only closed() can tell that the client is gone.
          const auto deadline = std::chrono::steady_clock::now() + kFailureTimeout;
          while (!stream.closed() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(1ms);
          }
          if (stream.closed()) closed_seen.set_value();
        };
        return response;
      },
      std::nullopt);
  {
    CurlClient curl;
    curl.on_data = [](std::string_view) { return false; };  // hang up after the first bytes
    EXPECT_EQ(curl.get(url(server, "/")).code, CURLE_WRITE_ERROR);
  }
  auto closed = closed_seen.get_future();
  require_ready(closed, "closed() after the client hung up");
}

TEST(HttpServerTest, RefusingCutsOpenConnectionsAndRejectsNewOnes) {
  HttpServer server([](const HttpServerRequest&) { return text(200, "ok"); }, std::nullopt);
  RawClient open(server.port());
  open.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(open.read_response().ends_with("ok"));

  server.set_refusing(true);
  EXPECT_TRUE(open.at_end_of_stream());
  CurlClient refused;
  const auto result = refused.get(url(server, "/"));
  EXPECT_NE(result.code, CURLE_OK);
  EXPECT_EQ(result.status, 0);

  server.set_refusing(false);
  CurlClient healed;
  const auto healed_result = healed.get(url(server, "/"));
  EXPECT_EQ(healed_result.code, CURLE_OK) << healed_result.error;
  EXPECT_EQ(healed_result.body, "ok");
}

TEST(HttpServerTest, StopEndsAnOpenStreamAndDoesNotHang) {
  OpenStream open;
  auto server = std::make_unique<HttpServer>(open.handler(), std::nullopt);
  auto request = std::async(std::launch::async, [&] {
    CurlClient curl;
    return curl.get(url(*server, "/watch"));
  });
  auto started = open.started.get_future();
  require_ready(started, "the stream to start");
  auto stopped = std::async(std::launch::async, [&] { server->stop(); });
  require_ready(stopped, "stop()");
  auto ended = open.ended.get_future();
  require_ready(ended, "the handler to end");
  EXPECT_TRUE(ended.get());
  require_ready(request, "the client to see the end");
  EXPECT_NE(request.get().code, CURLE_OK);
  server.reset();  // a second stop() in the destructor is harmless
}

TEST(HttpServerTest, StopEndsAHandlerThatOnlyWatchesClosed) {
  std::promise<void> started;
  HttpServer server(
      [&](const HttpServerRequest&) {
        HttpServerResponse response;
        response.stream = [&](HttpResponseStream& stream) {
          started.set_value();
          while (!stream.closed()) std::this_thread::sleep_for(1ms);
        };
        return response;
      },
      std::nullopt);
  RawClient client(server.port());
  client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  auto started_future = started.get_future();
  require_ready(started_future, "the stream to start");
  auto stopped = std::async(std::launch::async, [&] { server.stop(); });
  require_ready(stopped, "stop()");
  const std::string rest = client.read_until("0\r\n\r\n");
  EXPECT_EQ(rest.find("0\r\n\r\n"), std::string::npos) << "a cut stream has no last chunk";
}

class HttpsServerTest : public ::testing::Test {
 protected:
  TestCertificateAuthority ca;
  TestCertificate server_certificate = ca.issue_server();
  RequestLog log;

  std::unique_ptr<HttpServer> start(bool request_client_certificates) {
    TlsIdentity identity{server_certificate.cert_pem, server_certificate.key_pem,
                         request_client_certificates ? ca.ca_pem() : ""};
    return std::make_unique<HttpServer>(
        [this](const HttpServerRequest& request) {
          log.record(request);
          return text(200, "secure");
        },
        identity);
  }
};

TEST_F(HttpsServerTest, ServesTlsVerifiedAgainstTheCa) {
  auto server = start(false);
  CurlClient curl;
  curl.trust(ca.ca_pem());
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    const auto result =
        curl.get("https://" + host + ":" + std::to_string(server->port()) + "/secure");
    ASSERT_EQ(result.code, CURLE_OK) << host << ": " << result.error;
    EXPECT_EQ(result.body, "secure");
  }
  ASSERT_EQ(log.requests().size(), 2u);
  EXPECT_EQ(log.requests()[0].client_cn, "");

  TestCertificateAuthority other_ca;
  CurlClient distrusting;
  distrusting.trust(other_ca.ca_pem());
  EXPECT_EQ(distrusting.get(url(*server, "/", true)).code, CURLE_PEER_FAILED_VERIFICATION);
}

TEST_F(HttpsServerTest, StreamsOverTlsAndAbortTruncates) {
  TlsIdentity identity{server_certificate.cert_pem, server_certificate.key_pem, ""};
  HttpServer server(
      [](const HttpServerRequest& request) {
        HttpServerResponse response;
        const bool cut = request.path == "/cut";
        response.stream = [cut](HttpResponseStream& stream) {
          stream.write("a");
          stream.write("b");
          if (cut) stream.abort();
        };
        return response;
      },
      identity);
  CurlClient curl;
  curl.trust(ca.ca_pem());
  const auto whole = curl.get(url(server, "/whole", true));
  ASSERT_EQ(whole.code, CURLE_OK) << whole.error;
  EXPECT_EQ(whole.body, "ab");
  const auto cut = curl.get(url(server, "/cut", true));
  EXPECT_NE(cut.code, CURLE_OK);
  EXPECT_EQ(cut.body, "ab");
}

TEST_F(HttpsServerTest, AClientCertificateNamesTheUserAndGroups) {
  auto server = start(true);
  CurlClient curl;
  curl.trust(ca.ca_pem());
  curl.present(ca.issue_client("alice", {"system:masters", "developers"}));
  for (int i = 0; i < 2; ++i) {  // the second request reuses the connection
    const auto result = curl.get(url(*server, "/", true));
    ASSERT_EQ(result.code, CURLE_OK) << result.error;
  }
  CurlClient anonymous;
  anonymous.trust(ca.ca_pem());
  ASSERT_EQ(anonymous.get(url(*server, "/", true)).code, CURLE_OK);

  const auto requests = log.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(requests[i].client_cn, "alice");
    EXPECT_EQ(requests[i].client_organizations,
              (std::vector<std::string>{"system:masters", "developers"}));
  }
  EXPECT_EQ(requests[2].client_cn, "");
  EXPECT_TRUE(requests[2].client_organizations.empty());
}

TEST_F(HttpsServerTest, AClientCertificateFromAnotherCaIsRejected) {
  auto server = start(true);
  TestCertificateAuthority other_ca;
  CurlClient curl;
  curl.trust(ca.ca_pem());
  curl.present(other_ca.issue_client("mallory", {"system:masters"}));
  const auto result = curl.get(url(*server, "/", true));
  EXPECT_NE(result.code, CURLE_OK);
  EXPECT_EQ(result.status, 0);
  EXPECT_TRUE(log.requests().empty());
}

TEST(TestCertificateAuthorityTest, IssuesCertificatesForLoopbackNamesSignedByTheCa) {
  TestCertificateAuthority ca;
  const auto parse = [](const std::string& pem) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    X509* certificate = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    return std::unique_ptr<X509, decltype(&X509_free)>(certificate, X509_free);
  };
  const auto ca_certificate = parse(ca.ca_pem());
  const auto server_certificate = parse(ca.issue_server().cert_pem);
  ASSERT_TRUE(ca_certificate && server_certificate);
  EXPECT_EQ(X509_check_ca(ca_certificate.get()), 1);
  EXPECT_EQ(X509_check_issued(ca_certificate.get(), server_certificate.get()), X509_V_OK);
  EXPECT_EQ(X509_verify(server_certificate.get(), X509_get0_pubkey(ca_certificate.get())), 1);
  EXPECT_EQ(X509_check_ip_asc(server_certificate.get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(server_certificate.get(), "::1", 0), 1);
  EXPECT_EQ(X509_check_host(server_certificate.get(), "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(server_certificate.get(), "example.com", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_cmp_current_time(X509_get0_notBefore(server_certificate.get())), -1);
  EXPECT_EQ(X509_cmp_current_time(X509_get0_notAfter(server_certificate.get())), 1);
  EXPECT_NE(ca.issue_server().key_pem, ca.issue_server().key_pem);  // a fresh key each time
}

}  // namespace
}  // namespace tessel::testing
