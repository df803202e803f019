#include "tests/support/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <list>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "tests/support/http_connection.h"

namespace tessel::testing {
namespace {

using http::HttpConnection;

std::string take_openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

[[noreturn]] void fail_tls(const std::string& what) {
  throw std::runtime_error("HttpServer: " + what + ": " + take_openssl_error());
}

[[noreturn]] void fail_system(const std::string& what) {
  throw std::runtime_error("HttpServer: " + what + ": " + std::strerror(errno));
}

using SslContextPtr = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;

// Every certificate in a PEM text; throws naming `what` when there is none.
std::vector<X509Ptr> read_certificates(const std::string& pem, const std::string& what) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  std::vector<X509Ptr> certificates;
  while (X509* certificate = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certificates.emplace_back(certificate, X509_free);
  }
  ERR_clear_error();  // the read past the last certificate
  if (certificates.empty()) {
    throw std::runtime_error("HttpServer: " + what + ": no PEM certificate found");
  }
  return certificates;
}

SslContextPtr make_tls_context(const TlsIdentity& identity) {
  SslContextPtr context(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!context) fail_tls("cannot create the TLS context");
  SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION);

  auto chain = read_certificates(identity.cert_pem, "TlsIdentity.cert_pem");
  if (SSL_CTX_use_certificate(context.get(), chain.front().get()) != 1) {
    fail_tls("TlsIdentity.cert_pem");
  }
  for (std::size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(context.get(), chain[i].get()) != 1) {
      fail_tls("TlsIdentity.cert_pem: chain certificate " + std::to_string(i));
    }
  }
  BioPtr key_bio(
      BIO_new_mem_buf(identity.key_pem.data(), static_cast<int>(identity.key_pem.size())),
      BIO_free);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) fail_tls("TlsIdentity.key_pem");
  const int key_used = SSL_CTX_use_PrivateKey(context.get(), key);
  EVP_PKEY_free(key);
  if (key_used != 1) fail_tls("TlsIdentity.key_pem");
  if (SSL_CTX_check_private_key(context.get()) != 1) {
    fail_tls("TlsIdentity.key_pem does not match cert_pem");
  }

  if (!identity.client_ca_pem.empty()) {
    X509_STORE* store = SSL_CTX_get_cert_store(context.get());
    for (const auto& ca : read_certificates(identity.client_ca_pem, "TlsIdentity.client_ca_pem")) {
      if (X509_STORE_add_cert(store, ca.get()) != 1 ||
          SSL_CTX_add_client_CA(context.get(), ca.get()) != 1) {
        fail_tls("TlsIdentity.client_ca_pem");
      }
    }
    // A client certificate is verified when sent, but not required: a client may
    // authenticate with a bearer token instead.
    SSL_CTX_set_verify(context.get(), SSL_VERIFY_PEER, nullptr);
    // Session resumption with client verification needs a session id context.
    static constexpr unsigned char kSessionContext[] = "tessel-test-server";
    SSL_CTX_set_session_id_context(context.get(), kSessionContext, sizeof kSessionContext - 1);
  }
  return context;
}

// A peer that has gone makes write() raise SIGPIPE; blocked in this thread, the write fails
// with EPIPE instead, and the pending signal is discarded when the thread ends.
void block_sigpipe_in_this_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Closes with a TCP reset, as a host that refuses the connection.
void reset_and_close(int fd) {
  const linger reset{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(fd);
}

bool has_no_body(int status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

// The status line and headers; the framing headers are the server's, not the handler's.
std::string response_head(int status, const HttpHeaders& headers, const std::string& framing,
                          bool keep_alive) {
  std::string head =
      "HTTP/1.1 " + std::to_string(status) + " " + http::reason_phrase(status) + "\r\n";
  for (const auto& [name, value] : headers.entries) {
    if (http::equals_ignore_case(name, "Content-Length") ||
        http::equals_ignore_case(name, "Transfer-Encoding") ||
        http::equals_ignore_case(name, "Connection")) {
      continue;
    }
    head += name + ": " + value + "\r\n";
  }
  head += framing;
  if (!keep_alive) head += "Connection: close\r\n";
  head += "\r\n";
  return head;
}

// The body of a streamed response: chunks for HTTP/1.1, raw bytes ended by closing for 1.0.
class ConnectionResponseStream final : public HttpResponseStream {
 public:
  ConnectionResponseStream(HttpConnection& connection, bool chunked)
      : connection_(connection), chunked_(chunked) {}

  bool write(std::string_view data) override {
    const std::lock_guard lock(write_mutex_);
    if (closed()) return false;
    if (data.empty()) return true;  // an empty chunk would end the body
    std::string frame;
    if (chunked_) {
      char size[20];
      std::snprintf(size, sizeof size, "%zx\r\n", data.size());
      frame.reserve(data.size() + 32);
      frame.append(size).append(data).append("\r\n");
    } else {
      frame.assign(data);
    }
    if (!connection_.send(frame)) failed_.store(true);
    return !failed_.load();
  }

  void abort() override {
    aborted_.store(true);
    connection_.cut();
  }

  bool closed() const override {
    return aborted_.load() || failed_.load() || connection_.peer_closed();
  }

  // Whether the body can be ended properly and the connection used again.
  bool intact() const { return !aborted_.load() && !failed_.load() && !connection_.is_cut(); }

 private:
  HttpConnection& connection_;
  const bool chunked_;
  std::mutex write_mutex_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> failed_{false};
};

}  // namespace

struct HttpServer::Impl {
  struct Worker {
    std::shared_ptr<HttpConnection> connection;
    std::thread thread;
    bool done = false;  // guarded by mutex
  };

  HttpHandler handler;
  SslContextPtr tls{nullptr, SSL_CTX_free};
  int listen_fd = -1;
  int wake_pipe[2] = {-1, -1};  // written once by stop() to end the accept loop
  int port = 0;
  std::thread acceptor;
  std::atomic<std::size_t> accepted{0};

  std::mutex stop_mutex;  // serializes stop()
  bool stopped = false;   // guarded by stop_mutex

  std::mutex mutex;  // guards the fields below
  bool stopping = false;
  bool refusing = false;
  std::list<Worker> workers;

  void listen_on_loopback();
  void accept_loop();
  void start_worker(int fd);
  void reap_finished_workers();  // with mutex held
  void cut_all();                // with mutex held
  void serve(HttpConnection& connection);
  bool serve_one(HttpConnection& connection);
  bool respond(HttpConnection& connection, const http::RequestHead& head,
               const HttpServerResponse& response, bool keep_alive);
  void stop();
  void close_descriptors();
  ~Impl() { close_descriptors(); }  // for a constructor that failed half way
};

void HttpServer::Impl::listen_on_loopback() {
  listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0) fail_system("socket");
  const int on = 1;
  ::setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    fail_system("bind 127.0.0.1:0");
  }
  if (::listen(listen_fd, SOMAXCONN) != 0) fail_system("listen");
  socklen_t length = sizeof address;
  if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    fail_system("getsockname");
  }
  port = ntohs(address.sin_port);
  if (::pipe2(wake_pipe, O_CLOEXEC) != 0) fail_system("pipe");
}

void HttpServer::Impl::accept_loop() {
  while (true) {
    pollfd events[2] = {{listen_fd, POLLIN, 0}, {wake_pipe[0], POLLIN, 0}};
    if (::poll(events, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (events[1].revents != 0) return;
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or memory: wait a little (or for stop) instead of spinning.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        ::poll(&events[1], 1, 10);
      }
      continue;
    }
    accepted.fetch_add(1);
    start_worker(fd);
  }
}

void HttpServer::Impl::start_worker(int fd) {
  const std::lock_guard lock(mutex);
  reap_finished_workers();
  if (stopping || refusing) {
    reset_and_close(fd);
    return;
  }
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);  // each chunk leaves at once
  Worker& worker = workers.emplace_back();
  worker.connection = std::make_shared<HttpConnection>(fd, tls.get());
  worker.thread = std::thread([this, &worker] {
    serve(*worker.connection);
    const std::lock_guard done_lock(mutex);
    worker.done = true;
  });
}

void HttpServer::Impl::reap_finished_workers() {
  for (auto it = workers.begin(); it != workers.end();) {
    if (it->done) {
      it->thread.join();  // it has only the unlock left to do
      it = workers.erase(it);
    } else {
      ++it;
    }
  }
}

void HttpServer::Impl::cut_all() {
  for (auto& worker : workers) worker.connection->cut();
}

void HttpServer::Impl::serve(HttpConnection& connection) {
  block_sigpipe_in_this_thread();
  if (connection.handshake()) {
    while (serve_one(connection)) {
    }
  }
  connection.close();
}

bool HttpServer::Impl::serve_one(HttpConnection& connection) {
  std::optional<http::RequestHead> head;
  try {
    head = connection.read_request();
  } catch (const http::RequestError& error) {
    const std::string body = std::string(error.what()) + "\n";
    HttpHeaders headers;
    headers.set("Content-Type", "text/plain; charset=utf-8");
    connection.send(response_head(error.status(), headers,
                                  "Content-Length: " + std::to_string(body.size()) + "\r\n",
                                  false) +
                    body);
    return false;
  }
  if (!head) return false;
  HttpServerRequest& request = head->request;
  request.client_cn = connection.client_cn();
  request.client_organizations = connection.client_organizations();
  const std::string connection_header = request.headers.get("Connection").value_or("");
  bool keep_alive = head->minor_version >= 1 ? !http::has_token(connection_header, "close")
                                             : http::has_token(connection_header, "keep-alive");
  HttpServerResponse response;
  try {
    response = handler(request);
  } catch (const std::exception& error) {
    response = HttpServerResponse{};
    response.status = 500;
    response.headers.set("Content-Type", "text/plain; charset=utf-8");
    response.body = std::string("handler failed: ") + error.what() + "\n";
  }
  if (http::has_token(response.headers.get("Connection").value_or(""), "close")) {
    keep_alive = false;
  }
  return respond(connection, *head, response, keep_alive);
}

bool HttpServer::Impl::respond(HttpConnection& connection, const http::RequestHead& head,
                               const HttpServerResponse& response, bool keep_alive) {
  const bool head_only = head.request.method == "HEAD" || has_no_body(response.status);
  if (!response.stream || head_only) {
    const std::string framing =
        has_no_body(response.status)
            ? std::string()
            : "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
    std::string bytes = response_head(response.status, response.headers, framing, keep_alive);
    if (!head_only) bytes += response.body;
    return connection.send(bytes) && keep_alive;
  }

  // HTTP/1.0 has no chunked encoding: the body ends when the connection closes.
  const bool chunked = head.minor_version >= 1;
  if (!chunked) keep_alive = false;
  const std::string framing = chunked ? "Transfer-Encoding: chunked\r\n" : "";
  if (!connection.send(response_head(response.status, response.headers, framing, keep_alive))) {
    return false;
  }
  ConnectionResponseStream stream(connection, chunked);
  try {
    response.stream(stream);
  } catch (const std::exception&) {
    stream.abort();  // the status is sent; a cut body is the only way left to say it failed
  }
  if (!stream.intact()) return false;
  if (chunked && !connection.send("0\r\n\r\n")) return false;
  return keep_alive;
}

void HttpServer::Impl::stop() {
  const std::lock_guard stop_lock(stop_mutex);
  if (stopped) return;
  stopped = true;
  {
    const std::lock_guard lock(mutex);
    stopping = true;
  }
  const char wake = 1;
  [[maybe_unused]] const auto written = ::write(wake_pipe[1], &wake, 1);
  if (acceptor.joinable()) acceptor.join();
  std::list<Worker> all;
  {
    const std::lock_guard lock(mutex);
    cut_all();
    all.splice(all.end(), workers);
  }
  for (auto& worker : all) worker.thread.join();
  close_descriptors();
}

void HttpServer::Impl::close_descriptors() {
  for (int* fd : {&listen_fd, &wake_pipe[0], &wake_pipe[1]}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

HttpServer::HttpServer(HttpHandler handler, std::optional<TlsIdentity> tls)
    : impl_(std::make_unique<Impl>()) {
  impl_->handler = std::move(handler);
  if (tls) impl_->tls = make_tls_context(*tls);
  impl_->listen_on_loopback();
  impl_->acceptor = std::thread([impl = impl_.get()] { impl->accept_loop(); });
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->port; }

std::size_t HttpServer::connections_accepted() const { return impl_->accepted.load(); }

void HttpServer::stop() { impl_->stop(); }

void HttpServer::set_refusing(bool refusing) {
  const std::lock_guard lock(impl_->mutex);
  impl_->refusing = refusing;
  if (refusing) impl_->cut_all();
}

void HttpServer::drop_connections() {
  const std::lock_guard lock(impl_->mutex);
  impl_->cut_all();
}

}  // namespace tessel::testing
