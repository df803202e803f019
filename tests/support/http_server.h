// A small HTTP/1.1 server for the test API server: plain TCP or TLS (OpenSSL) on a loopback
// port, one thread per connection, keep-alive, Content-Length and chunked request bodies,
// and responses that are either whole or streamed chunk by chunk (for watches). A TLS client
// certificate signed by the configured CA is verified and handed to the handler.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::testing {

struct HttpHeaders {
  std::vector<std::pair<std::string, std::string>> entries;
  // Case-insensitive lookup of the first header of that name.
  std::optional<std::string> get(std::string_view name) const;
  void set(std::string name, std::string value);  // replaces any of that name
};

struct HttpServerRequest {
  std::string method;  // "GET"
  std::string target;  // the raw request target: "/api/v1/pods?limit=1"
  std::string path;    // percent-decoded path without the query: "/api/v1/pods"
  std::vector<std::pair<std::string, std::string>> query;  // percent-decoded, in order
  HttpHeaders headers;
  std::string body;
  // The verified TLS client certificate's subject: CN, and the O entries. Empty when the
  // client sent none (or the connection is plain HTTP).
  std::string client_cn;
  std::vector<std::string> client_organizations;

  std::optional<std::string> query_param(std::string_view name) const;  // first of that name
};

// Writes one streamed response. write() sends one chunk and returns false once the client has
// gone (or the server is stopping); the handler then returns. Returning from the handler ends
// the stream with the terminating chunk, unless abort() was called, which cuts the
// connection without it (a dropped watch).
class HttpResponseStream {
 public:
  virtual ~HttpResponseStream() = default;
  virtual bool write(std::string_view data) = 0;
  virtual void abort() = 0;
  virtual bool closed() const = 0;  // client gone, aborted, or server stopping
};

struct HttpServerResponse {
  int status = 200;
  HttpHeaders headers;
  std::string body;
  // When set, the headers are sent with Transfer-Encoding: chunked and this function streams
  // the body; `body` is ignored.
  std::function<void(HttpResponseStream&)> stream;
};

using HttpHandler = std::function<HttpServerResponse(const HttpServerRequest&)>;

struct TlsIdentity {
  std::string cert_pem;       // the server's certificate (chain)
  std::string key_pem;        // its key
  std::string client_ca_pem;  // CA for client certificates; empty: none requested
};

class HttpServer {
 public:
  // Listens on 127.0.0.1 with a port the kernel picks; TLS when `tls` is set.
  HttpServer(HttpHandler handler, std::optional<TlsIdentity> tls);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // TCP connections accepted so far, refused ones included (tests of connection reuse).
  std::size_t connections_accepted() const;
  // Closes the listener and every connection (streams see closed() and write() == false),
  // and joins all connection threads.
  void stop();
  // While refusing, new connections are accepted and closed at once, and open connections
  // are cut; used to emulate a network partition.
  void set_refusing(bool refusing);
  // Cuts every open connection now (their streams end without the terminating chunk).
  void drop_connections();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A CA and certificates for tests, made with OpenSSL at run time (EC P-256 keys).
struct TestCertificate {
  std::string cert_pem;
  std::string key_pem;
};
class TestCertificateAuthority {
 public:
  TestCertificateAuthority();  // a fresh self-signed CA, "tessel-test-ca"
  ~TestCertificateAuthority();
  const std::string& ca_pem() const;
  // A server certificate valid for 127.0.0.1, ::1 and localhost.
  TestCertificate issue_server() const;
  // One valid for these DNS names too (a webhook Service's "<name>.<namespace>.svc").
  TestCertificate issue_server(const std::vector<std::string>& dns_names) const;
  // A client certificate with this CN and O entries.
  TestCertificate issue_client(const std::string& cn,
                               const std::vector<std::string>& organizations) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::testing
